//===- loss.cu - Cross-entropy over a logits chunk (CUDA C) ---------------===//
//
// Part of mtc. The pieces of the chunked LM head + cross-entropy
// (cpu::linearCrossEntropy, runtime/cpu/LinearCrossEntropy.cpp) on a GPU:
// cuBLASLt produces a chunk of logits [rows, V] (B x S x V never exists),
// these kernels turn it into per-row losses, or in place into the logits'
// gradient, and one block reduces the per-row losses of all chunks to the
// mean. Semantics of cpu::crossEntropy / cpu::crossEntropyGrad, with the
// softcap of linearCrossEntropy: l' = cap * tanh(l / cap) when cap > 0.
// T = float for _f32, bf16 for _bf16; fp32 math.
//
// Entries:
//
//   cross_entropy_f32 / _bf16(const T *logits, const int *targets, int rows,
//                             int V, int ignoreIndex, float softcap,
//                             float *rowLoss, float *rowLse)
//     logits [rows, V]; targets, rowLoss, rowLse [rows] (rowLse may be null).
//     rowLoss[r] = lse_r - l'[r, t] (t = targets[r]); 0 when t ==
//     ignoreIndex; NaN when t is outside [0, V) otherwise (the CPU's loss is
//     NaN then too). rowLse[r] = log sum_j exp(l'[r, j]) (0 for an ignored
//     row): the gradient can reuse it instead of recomputing.
//   grid (rows), block (multiple of 32, <= 1024; 256), no dynamic smem.
//
//   cross_entropy_grad_f32 / _bf16(T *logits, const int *targets,
//                                  const float *rowLse, int rows, int V,
//                                  int ignoreIndex, float softcap,
//                                  float scale)
//     In place: logits [rows, V] become dlogits = scale * (softmax(l') -
//     onehot(t)) * dl'/dl, with dl'/dl = 1 - (l' / cap)^2 under a softcap.
//     scale = dloss / count (count: the non-ignored rows of the whole batch,
//     over all chunks). Ignored rows become zeros; a target outside [0, V)
//     gets no one-hot term (as the CPU). rowLse: the forward's, or null to
//     recompute it (max and sum passes over the row first).
//   grid (rows), block (multiple of 32, <= 1024; 256), no dynamic smem.
//
//   cross_entropy_grad_dloss_f32 / _bf16(T *logits, const int *targets,
//                                        const float *rowLse, int rows,
//                                        int V, int ignoreIndex,
//                                        float softcap, const float *dloss,
//                                        const int *count)
//     cross_entropy_grad with scale = *dloss / *count (in double, rounded
//     once, as the CPU; 0 when *count is 0) read on the device: on a GPU
//     dloss and the count are results of earlier kernels, and reading them
//     on the host would cost a synchronisation.
//   grid (rows), block (multiple of 32, <= 1024; 256), no dynamic smem.
//
//   cross_entropy_count(const int *targets, int rows, int ignoreIndex,
//                       int *count)
//     *count = the rows whose target != ignoreIndex (integers: exact).
//   grid (1), block (multiple of 32, <= 1024; 1024), no dynamic smem.
//
//   cross_entropy_mean(const float *rowLoss, const int *targets, int rows,
//                      int ignoreIndex, float *loss, int *count)
//     *loss = the mean of rowLoss over the rows whose target != ignoreIndex
//     (0 when there are none), *count = their number. Sums in double in a
//     fixed order (thread i adds rows i, i + blockDim.x, ...; then a fixed
//     shuffle tree): deterministic.
//   grid (1), block (multiple of 32, <= 1024; 1024), no dynamic smem.
//
// Numerics: the row max and sum of exp(l' - max) are fp32 (per-thread
// strided partials, then a fixed xor-shuffle tree and a fixed sum of the
// warps' partials: results do not depend on the schedule); expf, logf and
// tanhf are CUDA's accurate versions.
//
//===----------------------------------------------------------------------===//
#include "common.cuh"

namespace {

using namespace mtc_cuda;

/// The (softcapped) logit.
__device__ __forceinline__ float capped(float l, float cap) {
  return cap > 0.0f ? cap * tanhf(l / cap) : l;
}

/// The max m and the sum s of exp(l'[j] - m) of one row, returned to every
/// thread of the block.
template <typename T>
__device__ __forceinline__ float2 rowMaxSum(const T *row, int V, float cap,
                                            float *scratch) {
  float m = __int_as_float(0xff800000); // -inf
  for (int j = threadIdx.x; j < V; j += blockDim.x)
    m = fmaxf(m, capped(toFloat(row[j]), cap));
  m = blockMax(m, scratch);
  float s = 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x)
    s += expf(capped(toFloat(row[j]), cap) - m);
  s = blockSum(s, scratch);
  return make_float2(m, s);
}

template <typename T>
__device__ __forceinline__ void
lossRow(const T *logits, const int *targets, int rows, int V, int ignoreIndex,
        float cap, float *rowLoss, float *rowLse) {
  __shared__ float scratch[32];
  const int r = blockIdx.x;
  if (r >= rows)
    return;
  const int t = targets[r];
  if (t == ignoreIndex) {
    if (threadIdx.x == 0) {
      rowLoss[r] = 0.0f;
      if (rowLse)
        rowLse[r] = 0.0f;
    }
    return;
  }
  const T *row = logits + static_cast<long long>(r) * V;
  const float2 ms = rowMaxSum(row, V, cap, scratch);
  if (threadIdx.x == 0) {
    // (m - l'_t) + log s: the difference first, exact when they are close.
    rowLoss[r] = t >= 0 && t < V
                     ? (ms.x - capped(toFloat(row[t]), cap)) + logf(ms.y)
                     : __int_as_float(0x7fffffff); // NaN
    if (rowLse)
      rowLse[r] = ms.x + logf(ms.y);
  }
}

template <typename T>
__device__ __forceinline__ void
gradRow(T *logits, const int *targets, const float *rowLse, int rows, int V,
        int ignoreIndex, float cap, float scale) {
  __shared__ float scratch[32];
  const int r = blockIdx.x;
  if (r >= rows)
    return;
  T *row = logits + static_cast<long long>(r) * V;
  const int t = targets[r];
  if (t == ignoreIndex) {
    for (int j = threadIdx.x; j < V; j += blockDim.x)
      row[j] = fromFloat<T>(0.0f);
    return;
  }
  // Every element is read and then overwritten by the same thread, so the
  // in-place update needs no barrier after the reductions.
  // softmax_j = exp(l'_j - m) / s. Recomputed, m and 1 / s are exact to
  // fp32 rounding; from the forward's lse (m = lse, s = 1) the rounding of
  // lse adds about ulp(lse) of relative error.
  float m, scaleOverSum;
  if (rowLse) {
    m = rowLse[r];
    scaleOverSum = scale;
  } else {
    const float2 ms = rowMaxSum(row, V, cap, scratch);
    m = ms.x;
    scaleOverSum = scale / ms.y;
  }
  const float invCap = cap > 0.0f ? 1.0f / cap : 0.0f;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float c = capped(toFloat(row[j]), cap);
    float g = scaleOverSum * expf(c - m);
    if (j == t)
      g -= scale;
    if (cap > 0.0f) {
      const float u = c * invCap;
      g *= 1.0f - u * u;
    }
    row[j] = fromFloat<T>(g);
  }
}

__device__ __forceinline__ double warpSumDouble(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ int warpSumInt(int v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

/// dloss / count as the CPU computes it: in double, rounded once.
__device__ __forceinline__ float deviceScale(const float *dloss,
                                             const int *count) {
  const int c = *count;
  return c > 0 ? static_cast<float>(static_cast<double>(*dloss) / c) : 0.0f;
}

} // namespace

extern "C" __global__ void cross_entropy_f32(const float *logits,
                                             const int *targets, int rows,
                                             int V, int ignoreIndex,
                                             float softcap, float *rowLoss,
                                             float *rowLse) {
  lossRow(logits, targets, rows, V, ignoreIndex, softcap, rowLoss, rowLse);
}

extern "C" __global__ void cross_entropy_bf16(const mtc_cuda::bf16 *logits,
                                              const int *targets, int rows,
                                              int V, int ignoreIndex,
                                              float softcap, float *rowLoss,
                                              float *rowLse) {
  lossRow(logits, targets, rows, V, ignoreIndex, softcap, rowLoss, rowLse);
}

extern "C" __global__ void cross_entropy_grad_f32(float *logits,
                                                  const int *targets,
                                                  const float *rowLse, int rows,
                                                  int V, int ignoreIndex,
                                                  float softcap, float scale) {
  gradRow(logits, targets, rowLse, rows, V, ignoreIndex, softcap, scale);
}

extern "C" __global__ void
cross_entropy_grad_bf16(mtc_cuda::bf16 *logits, const int *targets,
                        const float *rowLse, int rows, int V, int ignoreIndex,
                        float softcap, float scale) {
  gradRow(logits, targets, rowLse, rows, V, ignoreIndex, softcap, scale);
}

extern "C" __global__ void cross_entropy_grad_dloss_f32(
    float *logits, const int *targets, const float *rowLse, int rows, int V,
    int ignoreIndex, float softcap, const float *dloss, const int *count) {
  gradRow(logits, targets, rowLse, rows, V, ignoreIndex, softcap,
          deviceScale(dloss, count));
}

extern "C" __global__ void
cross_entropy_grad_dloss_bf16(mtc_cuda::bf16 *logits, const int *targets,
                              const float *rowLse, int rows, int V,
                              int ignoreIndex, float softcap,
                              const float *dloss, const int *count) {
  gradRow(logits, targets, rowLse, rows, V, ignoreIndex, softcap,
          deviceScale(dloss, count));
}

extern "C" __global__ void cross_entropy_count(const int *targets, int rows,
                                               int ignoreIndex, int *count) {
  __shared__ int counts[32];
  const int lane = threadIdx.x % mtc_cuda::kWarpSize,
            warp = threadIdx.x / mtc_cuda::kWarpSize;
  int k = 0;
  for (int r = threadIdx.x; r < rows; r += blockDim.x)
    k += targets[r] != ignoreIndex;
  k = warpSumInt(k);
  if (lane == 0)
    counts[warp] = k;
  __syncthreads();
  if (threadIdx.x == 0) {
    int n = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / mtc_cuda::kWarpSize); ++w)
      n += counts[w];
    *count = n;
  }
}

extern "C" __global__ void cross_entropy_mean(const float *rowLoss,
                                              const int *targets, int rows,
                                              int ignoreIndex, float *loss,
                                              int *count) {
  __shared__ double sums[32];
  __shared__ int counts[32];
  const int lane = threadIdx.x % mtc_cuda::kWarpSize,
            warp = threadIdx.x / mtc_cuda::kWarpSize;
  double s = 0.0;
  int k = 0;
  for (int r = threadIdx.x; r < rows; r += blockDim.x)
    if (targets[r] != ignoreIndex) {
      s += rowLoss[r];
      ++k;
    }
  s = warpSumDouble(s);
  k = warpSumInt(k);
  if (lane == 0) {
    sums[warp] = s;
    counts[warp] = k;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0.0;
    int n = 0;
    for (int w = 0; w < static_cast<int>(blockDim.x / mtc_cuda::kWarpSize);
         ++w) {
      total += sums[w];
      n += counts[w];
    }
    *loss = n > 0 ? static_cast<float>(total / n) : 0.0f;
    *count = n;
  }
}
