//===- moe.cu - Mixture-of-experts routing on the device ------------------===//
//
// Part of mtc. The routing of the moe and moe_grad ops (CPU semantics:
// runtime/exec/ExecMoE.cpp, cpu::moeTopK) as device kernels, so that a moe
// op never waits for the host: the router's probabilities, each token's
// top-k experts and gate weights, per-expert token lists built by a scan
// (no atomics), the gather of an expert's rows, the gate-weighted scatter of
// its outputs, the aux loss and the backward counterparts. The router GEMM
// and softmax are the library's (Matmul, reduce.cu).
//
// Layout. N tokens, E experts, top K. The per-expert lists have a capacity
// of N rows per expert (a token picks an expert at most once), so expert e's
// list is list[e * N, e * N + count[e]), tokens ascending; the host runs
// each expert over all N rows (rows past count[e] are zeros), which keeps
// every shape independent of the routing (runtime/cuda/ops/Moe.h).
//
// Entries (T = float for _f32, bf16 for _bf16; routing data is fp32/int32):
//
//   moe_topk(const float *probs, int N, int E, int K, int normalize,
//            int *choice, float *gate)
//     probs [N, E]; choice, gate [N, K]: cpu::moeTopK exactly (NaN ranks as
//     -inf, ties to the lower index, the gate sum in fp32 in k order).
//     grid (ceil(N / 128)), block (128).
//
//   moe_lists(const int *choice, const float *gate, int N, int E, int K,
//             int *count, int *list, float *slotGate, int *slotOf)
//     count [E]; list, slotGate [E, N]; slotOf [N, K]. For expert e: count[e]
//     tokens chose it; list[e * N + j] is the j-th of them (ascending),
//     slotGate[e * N + j] its gate for e, and slotOf[t * K + k] = j where
//     choice[t * K + k] = e. Entries past count[e] are not written.
//     grid (E), block (kMoeScanThreads = 256): one block scans the tokens
//     for its expert in chunks of 256 (a shared-memory prefix sum).
//
//   moe_gather_f32 / _bf16(const T *h, const int *list, const int *count,
//                          T *x, int N, int D)
//     x [N, D] = h[list[j], :] for j < *count, zeros after (list, count of
//     one expert). grid (N), block (any; 128).
//
//   moe_scatter_f32 / _bf16(const T *out, const int *list,
//                           const float *slotGate, const int *count, T *y,
//                           int N, int D)
//     y[list[j], :] += slotGate[j] * out[j, :] for j < *count (slotGate null:
//     weight 1). A token is at most once in a list: no two threads write
//     one element, and each row of y sums its experts in the order the host
//     launches them (ascending e, the CPU's order).
//     grid (N), block (any; 128).
//
//   moe_grad_rows_f32 / _bf16(const T *dy, const T *out, const int *list,
//                             const float *slotGate, const int *count,
//                             T *dye, double *dg, int N, int D)
//     For j < *count, t = list[j]: dye[j, :] = slotGate[j] * dy[t, :] and
//     dg[j] = sum_d dy[t, d] * out[j, d] (double, a fixed tree over the
//     block); rows past *count: dye zero, dg untouched.
//     grid (N), block (kMoeScanThreads = 256).
//
//   moe_gate_grad(const float *probs, const int *choice, const float *gate,
//                 const int *slotOf, const double *dg, const int *count,
//                 int N, int E, int K, int normalize, double auxCoef,
//                 float *dp)
//     dp [N, E] (overwritten): the gate gradients dg (at dg[e * N + slot])
//     through the renormalisation, then c * E * f_e / N in every row when
//     auxCoef = c > 0 (f_e = count[e] / (N K)), as the CPU.
//     grid (ceil(N / 128)), block (128).
//
//   moe_aux_loss(const float *probs, const int *count, int N, int E, int K,
//                double coef, double *out)
//     *out = coef * E * sum_e f_e * P_e / N, P_e = sum_t probs[t, e], in
//     double; each P_e a fixed tree over the block (deterministic).
//     grid (1), block (kMoeScanThreads = 256).
//
//===----------------------------------------------------------------------===//
#include "common.cuh"

namespace {

using namespace mtc_cuda;

constexpr int kMoeScanThreads = 256;

/// The exclusive prefix sum of \p v over the block (blockDim.x <=
/// kMoeScanThreads), with the block's total in *total; \p s holds
/// kMoeScanThreads ints of shared memory. Hillis-Steele: the order of the
/// additions is fixed, and integers make it exact anyway.
__device__ __forceinline__ int blockExclusiveScan(int v, int *s, int *total) {
  const int i = threadIdx.x;
  s[i] = v;
  __syncthreads();
  for (int off = 1; off < static_cast<int>(blockDim.x); off <<= 1) {
    const int add = i >= off ? s[i - off] : 0;
    __syncthreads();
    s[i] += add;
    __syncthreads();
  }
  const int inclusive = s[i];
  *total = s[blockDim.x - 1];
  __syncthreads(); // s may be reused by the next call
  return inclusive - v;
}

/// The sum of \p v over the block in double (blockDim.x a power of two, at
/// most kMoeScanThreads), a fixed tree; every thread gets it.
__device__ __forceinline__ double blockSumDouble(double v, double *s) {
  const int i = threadIdx.x;
  s[i] = v;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half >>= 1) {
    if (i < half)
      s[i] += s[i + half];
    __syncthreads();
  }
  const double sum = s[0];
  __syncthreads();
  return sum;
}

template <typename T>
__device__ __forceinline__ void gatherRow(const T *h, const int *list,
                                          const int *count, T *x, int D) {
  const long long j = blockIdx.x;
  T *xr = x + j * D;
  if (j >= *count) {
    for (int d = threadIdx.x; d < D; d += blockDim.x)
      xr[d] = fromFloat<T>(0.0f);
    return;
  }
  const T *hr = h + static_cast<long long>(list[j]) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x)
    xr[d] = hr[d];
}

template <typename T>
__device__ __forceinline__ void scatterRow(const T *out, const int *list,
                                           const float *slotGate,
                                           const int *count, T *y, int D) {
  const long long j = blockIdx.x;
  if (j >= *count)
    return;
  const float g = slotGate ? slotGate[j] : 1.0f;
  T *yr = y + static_cast<long long>(list[j]) * D;
  const T *orow = out + j * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x)
    yr[d] = fromFloat<T>(toFloat(yr[d]) + g * toFloat(orow[d]));
}

template <typename T>
__device__ __forceinline__ void
gradRow(const T *dy, const T *out, const int *list, const float *slotGate,
        const int *count, T *dye, double *dg, int D, double *s) {
  const long long j = blockIdx.x;
  T *dr = dye + j * D;
  if (j >= *count) {
    for (int d = threadIdx.x; d < D; d += blockDim.x)
      dr[d] = fromFloat<T>(0.0f);
    return;
  }
  const float g = slotGate[j];
  const T *dyr = dy + static_cast<long long>(list[j]) * D;
  const T *orow = out + j * D;
  double dot = 0;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    const float v = toFloat(dyr[d]);
    dr[d] = fromFloat<T>(g * v);
    dot += static_cast<double>(v) * static_cast<double>(toFloat(orow[d]));
  }
  dot = blockSumDouble(dot, s);
  if (threadIdx.x == 0)
    dg[j] = dot;
}

} // namespace

extern "C" __global__ void moe_topk(const float *probs, int N, int E, int K,
                                    int normalize, int *choice, float *gate) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t >= N)
    return;
  const float *p = probs + static_cast<long long>(t) * E;
  int *ch = choice + static_cast<long long>(t) * K;
  float *g = gate + static_cast<long long>(t) * K;
  // K passes of a selection: the best expert not yet chosen, by (p
  // descending, index ascending), a strict order (cpu::moeTopK's).
  for (int k = 0; k < K; ++k) {
    int best = -1;
    float bestKey = 0;
    for (int e = 0; e < E; ++e) {
      bool taken = false;
      for (int q = 0; q < k; ++q)
        taken = taken || ch[q] == e;
      if (taken)
        continue;
      const float v = p[e];
      const float key = v != v ? __int_as_float(0xff800000) : v; // NaN: -inf
      if (best < 0 || key > bestKey) {
        best = e;
        bestKey = key;
      }
    }
    ch[k] = best;
  }
  float sum = 0;
  for (int k = 0; k < K; ++k) {
    g[k] = p[ch[k]];
    sum += g[k];
  }
  if (normalize)
    for (int k = 0; k < K; ++k)
      g[k] /= sum;
}

extern "C" __global__ void __launch_bounds__(kMoeScanThreads)
    moe_lists(const int *choice, const float *gate, int N, int E, int K,
              int *count, int *list, float *slotGate, int *slotOf) {
  __shared__ int scan[kMoeScanThreads];
  const int e = blockIdx.x;
  if (e >= E)
    return;
  int *lst = list + static_cast<long long>(e) * N;
  float *sg = slotGate + static_cast<long long>(e) * N;
  int running = 0;
  for (int base = 0; base < N; base += blockDim.x) {
    const int t = base + threadIdx.x;
    int kk = -1;
    if (t < N)
      for (int k = 0; k < K; ++k)
        if (kk < 0 && choice[static_cast<long long>(t) * K + k] == e)
          kk = k;
    int total = 0;
    const int at = running + blockExclusiveScan(kk >= 0, scan, &total);
    if (kk >= 0) {
      lst[at] = t;
      sg[at] = gate[static_cast<long long>(t) * K + kk];
      slotOf[static_cast<long long>(t) * K + kk] = at;
    }
    running += total;
  }
  if (threadIdx.x == 0)
    count[e] = running;
}

extern "C" __global__ void moe_gather_f32(const float *h, const int *list,
                                          const int *count, float *x, int N,
                                          int D) {
  if (static_cast<int>(blockIdx.x) < N)
    gatherRow<float>(h, list, count, x, D);
}

extern "C" __global__ void moe_gather_bf16(const mtc_cuda::bf16 *h,
                                           const int *list, const int *count,
                                           mtc_cuda::bf16 *x, int N, int D) {
  if (static_cast<int>(blockIdx.x) < N)
    gatherRow<mtc_cuda::bf16>(h, list, count, x, D);
}

extern "C" __global__ void moe_scatter_f32(const float *out, const int *list,
                                           const float *slotGate,
                                           const int *count, float *y, int N,
                                           int D) {
  if (static_cast<int>(blockIdx.x) < N)
    scatterRow<float>(out, list, slotGate, count, y, D);
}

extern "C" __global__ void moe_scatter_bf16(const mtc_cuda::bf16 *out,
                                            const int *list,
                                            const float *slotGate,
                                            const int *count, mtc_cuda::bf16 *y,
                                            int N, int D) {
  if (static_cast<int>(blockIdx.x) < N)
    scatterRow<mtc_cuda::bf16>(out, list, slotGate, count, y, D);
}

extern "C" __global__ void __launch_bounds__(kMoeScanThreads)
    moe_grad_rows_f32(const float *dy, const float *out, const int *list,
                      const float *slotGate, const int *count, float *dye,
                      double *dg, int N, int D) {
  __shared__ double sums[kMoeScanThreads];
  if (static_cast<int>(blockIdx.x) < N)
    gradRow<float>(dy, out, list, slotGate, count, dye, dg, D, sums);
}

extern "C" __global__ void __launch_bounds__(kMoeScanThreads)
    moe_grad_rows_bf16(const mtc_cuda::bf16 *dy, const mtc_cuda::bf16 *out,
                       const int *list, const float *slotGate, const int *count,
                       mtc_cuda::bf16 *dye, double *dg, int N, int D) {
  __shared__ double sums[kMoeScanThreads];
  if (static_cast<int>(blockIdx.x) < N)
    gradRow<mtc_cuda::bf16>(dy, out, list, slotGate, count, dye, dg, D, sums);
}

extern "C" __global__ void moe_gate_grad(const float *probs, const int *choice,
                                         const float *gate, const int *slotOf,
                                         const double *dg, const int *count,
                                         int N, int E, int K, int normalize,
                                         double auxCoef, float *dp) {
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (t >= N)
    return;
  const long long row = static_cast<long long>(t);
  const float *p = probs + row * E;
  const int *ch = choice + row * K;
  float *d = dp + row * E;
  for (int e = 0; e < E; ++e)
    d[e] = 0.0f;
  // dg of slot k: the expert's list position of this token.
  auto dgOf = [&](int k) {
    return dg[static_cast<long long>(ch[k]) * N + slotOf[row * K + k]];
  };
  if (normalize) {
    // g_k = p_k / s: dp_k = (dg_k - sum_j dg_j g_j) / s.
    double sum = 0, dot = 0;
    for (int k = 0; k < K; ++k) {
      sum += p[ch[k]];
      dot += dgOf(k) * gate[row * K + k];
    }
    for (int k = 0; k < K; ++k)
      d[ch[k]] += static_cast<float>((dgOf(k) - dot) / sum);
  } else {
    for (int k = 0; k < K; ++k)
      d[ch[k]] += static_cast<float>(dgOf(k));
  }
  if (auxCoef > 0)
    for (int e = 0; e < E; ++e) {
      const double f = static_cast<double>(count[e]) /
                       (static_cast<double>(N) * static_cast<double>(K));
      d[e] += static_cast<float>(auxCoef * E * f / N);
    }
}

extern "C" __global__ void __launch_bounds__(kMoeScanThreads)
    moe_aux_loss(const float *probs, const int *count, int N, int E, int K,
                 double coef, double *out) {
  __shared__ double sums[kMoeScanThreads];
  double aux = 0;
  for (int e = 0; e < E; ++e) {
    double P = 0;
    for (int t = threadIdx.x; t < N; t += blockDim.x)
      P += probs[static_cast<long long>(t) * E + e];
    P = blockSumDouble(P, sums);
    const double f = static_cast<double>(count[e]) /
                     (static_cast<double>(N) * static_cast<double>(K));
    aux += f * P / N;
  }
  if (threadIdx.x == 0)
    *out = coef * E * aux;
}
