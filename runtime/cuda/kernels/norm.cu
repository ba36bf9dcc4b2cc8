//===- norm.cu - RMSNorm and LayerNorm, forward and backward -----*- CUDA
//-*-===//
//
// Part of mtc. The CUDA versions of runtime/cpu's rmsnorm, rmsnormGrad,
// layernorm and layernormGrad (runtime/cpu/Norm.cpp, the reference
// semantics). Every tensor is dense and row-major: x, y, dy, dx [rows, D]
// (row r at r * D), w, b [D]. Storage T is f32 or bf16 (entries `_f32`,
// `_bf16`); arithmetic is fp32; bf16 stores round to nearest even.
//
// Forward (one block per row; grid (rows), block any multiple of 32 up to
// 1024 -- 256 suits D of 1k-16k, 128 below; no dynamic shared memory):
//
//   mtc_rmsnorm_T(x, w, y, rows, D, eps, offset)
//       y = x / sqrt(mean(x^2) + eps) * (offset + w)
//   mtc_layernorm_T(x, w, b, y, rows, D, eps)
//       y = (x - mean) / sqrt(var + eps) * w + b   (b may be null)
//       variance of the centred row (two passes, no E[x^2] - E[x]^2; the
//       second pass also corrects the mean, see meanRstd)
//
// Backward: dx is f32 in both variants (x, w, dy of type T); dwAcc / dbAcc
// are ACCUMULATED, deterministically, in three launches:
//
//   1. mtc_rmsnorm_grad_T(x, w, dy, dx, rstd, rows, D, eps, offset)
//      mtc_layernorm_grad_T(x, w, dy, dx, stats, rows, D, eps)
//      one block per row as the forward: dx overwritten; the row's
//      statistics saved for step 2 (rmsnorm: rstd [rows] = 1/sqrt(ms+eps);
//      layernorm: stats [rows, 2] = (mean, rstd)); either may be null when
//      no parameter gradient is wanted (then skip 2 and 3).
//   2. mtc_rmsnorm_grad_w_T(x, dy, rstd, partialW, rows, D, chunks)
//      mtc_layernorm_grad_wb_T(x, dy, stats, partialW, partialB, rows, D,
//                              chunks)
//      grid (ceil(D / blockDim.x), chunks), block any multiple of 32 up to
//      1024 (128-256), chunks in [1, 65535]: thread (column j, chunk c) sums
//      its column over rows [rows c / chunks, rows (c + 1) / chunks) in row
//      order into partial[c, j] (partialW, and partialB unless null: [chunks,
//      D] f32 scratch). rmsnorm: dw = dy x rstd; layernorm: dw = dy xhat,
//      db = dy.
//   3. mtc_sum_partials_f32(partialW, dwAcc, chunks, D, /*accumulate=*/1)
//      (reduce.cu), and the same for partialB into dbAcc.
//
// Each column's sum has a fixed order that depends only on (rows, chunks):
// the results are bit-identical whatever the schedule. chunks = min(rows,
// 64), as runtime/cpu's paramChunks, gives D / blockDim.x * 64 blocks in
// step 2, plenty for a GPU at D >= 1024.
//
// Row access: 16-byte packs (4 f32 / 8 bf16 per load, vector.cuh) when the
// row pointers are 16-byte aligned -- always when D is a multiple of 4 (f32)
// or 8 (bf16) and the tensors are -- with a scalar tail; element by element
// otherwise. Reductions over a row: each thread sums its elements in fp32,
// then a warp xor butterfly and one partial per warp (common.cuh's
// blockSum) -- an order fixed by (D, blockDim.x, alignment), deterministic.
// A row is read from global memory once per pass (rmsnorm 2 passes,
// layernorm 3; the backward one more): at D <= 16384 a row is at most 64 KiB
// and the later passes mostly hit L1/L2.
//
//===----------------------------------------------------------------------===//
#include "common.cuh"
#include "vector.cuh"

namespace {

using namespace mtc_cuda;

/// The sums of \p a and of \p b over the block, with one pair of barriers
/// (\p scratch: 64 floats of shared memory). Same order as blockSum.
__device__ __forceinline__ float2 blockSum2(float a, float b, float *scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  a = warpSum(a);
  b = warpSum(b);
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0) {
    scratch[warp] = a;
    scratch[32 + warp] = b;
  }
  __syncthreads();
  a = lane < warps ? scratch[lane] : 0.0f;
  b = lane < warps ? scratch[32 + lane] : 0.0f;
  return make_float2(warpSum(a), warpSum(b));
}

/// Row range [first, last) of chunk \p c of \p chunks over \p rows.
__device__ __forceinline__ void chunkRows(int rows, int c, int chunks,
                                          int &first, int &last) {
  first = static_cast<int>(static_cast<long long>(rows) * c / chunks);
  last = static_cast<int>(static_cast<long long>(rows) * (c + 1) / chunks);
}

/// Mean and 1/sqrt(var + eps) of one row (\p scratch: 64 floats). Two
/// passes as runtime/cpu, the second also summing the deviations from the
/// first mean m0 to correct it: mean = m0 + sum(x - m0) / D,
/// var = sum((x - m0)^2) / D - (sum(x - m0) / D)^2 (the corrected two-pass
/// algorithm). The fp32 block sum alone leaves the mean several ulp off
/// where |mean| >> std (test: LayerNormLargeMeanAgainstDouble).
template <typename T>
__device__ __forceinline__ float2 meanRstd(const T *xr, int D, float eps,
                                           bool vec, float *scratch) {
  float s = 0.0f;
  forRow(xr, D, vec, [&](int, float v) { s += v; });
  const float m0 = blockSum(s, scratch) / D;
  float c = 0.0f, q = 0.0f;
  forRow(xr, D, vec, [&](int, float v) {
    const float d = v - m0;
    c += d;
    q += d * d;
  });
  const float2 sums = blockSum2(c, q, scratch);
  const float shift = sums.x / D;
  const float var = fmaxf(sums.y / D - shift * shift, 0.0f);
  return make_float2(m0 + shift, 1.0f / sqrtf(var + eps));
}

template <typename T>
__device__ void rmsnorm(const T *__restrict__ x, const T *__restrict__ w,
                        T *__restrict__ y, int rows, int D, float eps,
                        float offset) {
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  if (row >= rows)
    return;
  const T *xr = x + static_cast<size_t>(row) * D;
  T *yr = y + static_cast<size_t>(row) * D;
  const bool vec = aligned16(xr) && aligned16(w) && aligned16(yr);
  float ss = 0.0f;
  forRow(xr, D, vec, [&](int, float v) { ss += v * v; });
  // 1 / sqrtf (both correctly rounded) rather than rsqrtf (2 ulp).
  const float inv = 1.0f / sqrtf(blockSum(ss, scratch) / D + eps);
  mapRow2(xr, w, yr, D, vec,
          [&](int, float v, float wv) { return v * inv * (offset + wv); });
}

template <typename T>
__device__ void rmsnormGrad(const T *__restrict__ x, const T *__restrict__ w,
                            const T *__restrict__ dy, float *__restrict__ dx,
                            float *__restrict__ rstd, int rows, int D,
                            float eps, float offset) {
  // y_i = x_i r g_i, r = (mean(x^2) + eps)^-1/2, g = offset + w:
  // dx_i = r g_i dy_i - x_i r^3 / D * sum_j dy_j g_j x_j.
  __shared__ float scratch[64];
  const int row = blockIdx.x;
  if (row >= rows)
    return;
  const size_t base = static_cast<size_t>(row) * D;
  const T *xr = x + base, *gr = dy + base;
  float *dr = dx + base;
  const bool vec =
      aligned16(xr) && aligned16(gr) && aligned16(w) && aligned16(dr);
  float ss = 0.0f, dot = 0.0f;
  forRow3(xr, gr, w, D, vec, [&](int, float v, float g, float wv) {
    ss += v * v;
    dot += g * (offset + wv) * v;
  });
  const float2 sums = blockSum2(ss, dot, scratch);
  const float inv = 1.0f / sqrtf(sums.x / D + eps);
  const float k = inv * inv * inv * sums.y / D;
  mapRow3(xr, gr, w, dr, D, vec, [&](int, float v, float g, float wv) {
    return inv * (offset + wv) * g - v * k;
  });
  if (rstd && threadIdx.x == 0)
    rstd[row] = inv;
}

template <typename T>
__device__ void rmsnormGradW(const T *__restrict__ x, const T *__restrict__ dy,
                             const float *__restrict__ rstd,
                             float *__restrict__ partial, int rows, int D,
                             int chunks) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
  if (j >= D || c >= chunks)
    return;
  int first, last;
  chunkRows(rows, c, chunks, first, last);
  float s = 0.0f;
  for (int r = first; r < last; ++r) {
    const size_t i = static_cast<size_t>(r) * D + j;
    s += toFloat(dy[i]) * toFloat(x[i]) * rstd[r];
  }
  partial[static_cast<size_t>(c) * D + j] = s;
}

template <typename T>
__device__ void layernorm(const T *__restrict__ x, const T *__restrict__ w,
                          const T *__restrict__ b, T *__restrict__ y, int rows,
                          int D, float eps) {
  __shared__ float scratch[64];
  const int row = blockIdx.x;
  if (row >= rows)
    return;
  const T *xr = x + static_cast<size_t>(row) * D;
  T *yr = y + static_cast<size_t>(row) * D;
  const bool vec =
      aligned16(xr) && aligned16(w) && aligned16(yr) && (!b || aligned16(b));
  const float2 s = meanRstd(xr, D, eps, vec, scratch);
  if (b)
    mapRow3(xr, w, b, yr, D, vec, [&](int, float v, float wv, float bv) {
      return (v - s.x) * s.y * wv + bv;
    });
  else
    mapRow2(xr, w, yr, D, vec,
            [&](int, float v, float wv) { return (v - s.x) * s.y * wv; });
}

template <typename T>
__device__ void layernormGrad(const T *__restrict__ x, const T *__restrict__ w,
                              const T *__restrict__ dy, float *__restrict__ dx,
                              float *__restrict__ stats, int rows, int D,
                              float eps) {
  // xhat = (x - mean) rstd, g = dy w:
  // dx = rstd (g - mean(g) - xhat mean(g xhat)).
  __shared__ float scratch[64];
  const int row = blockIdx.x;
  if (row >= rows)
    return;
  const size_t base = static_cast<size_t>(row) * D;
  const T *xr = x + base, *gr = dy + base;
  float *dr = dx + base;
  const bool vec =
      aligned16(xr) && aligned16(gr) && aligned16(w) && aligned16(dr);
  const float2 s = meanRstd(xr, D, eps, vec, scratch);
  float sg = 0.0f, sgx = 0.0f;
  forRow3(xr, gr, w, D, vec, [&](int, float v, float gy, float wv) {
    const float g = gy * wv;
    sg += g;
    sgx += g * ((v - s.x) * s.y);
  });
  const float2 sums = blockSum2(sg, sgx, scratch);
  const float mg = sums.x / D, mgx = sums.y / D;
  mapRow3(xr, gr, w, dr, D, vec, [&](int, float v, float gy, float wv) {
    const float g = gy * wv;
    const float xhat = (v - s.x) * s.y;
    return s.y * (g - mg - xhat * mgx);
  });
  if (stats && threadIdx.x == 0) {
    stats[2 * static_cast<size_t>(row)] = s.x;
    stats[2 * static_cast<size_t>(row) + 1] = s.y;
  }
}

template <typename T>
__device__ void
layernormGradWB(const T *__restrict__ x, const T *__restrict__ dy,
                const float *__restrict__ stats, float *__restrict__ partialW,
                float *__restrict__ partialB, int rows, int D, int chunks) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
  if (j >= D || c >= chunks)
    return;
  int first, last;
  chunkRows(rows, c, chunks, first, last);
  float sw = 0.0f, sb = 0.0f;
  for (int r = first; r < last; ++r) {
    const size_t i = static_cast<size_t>(r) * D + j;
    const float g = toFloat(dy[i]);
    sw += g * ((toFloat(x[i]) - stats[2 * r]) * stats[2 * r + 1]);
    sb += g;
  }
  const size_t out = static_cast<size_t>(c) * D + j;
  partialW[out] = sw;
  if (partialB)
    partialB[out] = sb;
}

} // namespace

// Entries (written out: the emulator build finds them by their text).

extern "C" __global__ void __launch_bounds__(1024)
    mtc_rmsnorm_f32(const float *x, const float *w, float *y, int rows, int D,
                    float eps, float offset) {
  rmsnorm(x, w, y, rows, D, eps, offset);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_rmsnorm_grad_f32(const float *x, const float *w, const float *dy,
                         float *dx, float *rstd, int rows, int D, float eps,
                         float offset) {
  rmsnormGrad(x, w, dy, dx, rstd, rows, D, eps, offset);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_rmsnorm_grad_w_f32(const float *x, const float *dy, const float *rstd,
                           float *partialW, int rows, int D, int chunks) {
  rmsnormGradW(x, dy, rstd, partialW, rows, D, chunks);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_layernorm_f32(const float *x, const float *w, const float *b, float *y,
                      int rows, int D, float eps) {
  layernorm(x, w, b, y, rows, D, eps);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_layernorm_grad_f32(const float *x, const float *w, const float *dy,
                           float *dx, float *stats, int rows, int D,
                           float eps) {
  layernormGrad(x, w, dy, dx, stats, rows, D, eps);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_layernorm_grad_wb_f32(const float *x, const float *dy,
                              const float *stats, float *partialW,
                              float *partialB, int rows, int D, int chunks) {
  layernormGradWB(x, dy, stats, partialW, partialB, rows, D, chunks);
}

extern "C" __global__ void __launch_bounds__(1024)
    mtc_rmsnorm_bf16(const mtc_cuda::bf16 *x, const mtc_cuda::bf16 *w,
                     mtc_cuda::bf16 *y, int rows, int D, float eps,
                     float offset) {
  rmsnorm(x, w, y, rows, D, eps, offset);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_rmsnorm_grad_bf16(const mtc_cuda::bf16 *x, const mtc_cuda::bf16 *w,
                          const mtc_cuda::bf16 *dy, float *dx, float *rstd,
                          int rows, int D, float eps, float offset) {
  rmsnormGrad(x, w, dy, dx, rstd, rows, D, eps, offset);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_rmsnorm_grad_w_bf16(const mtc_cuda::bf16 *x, const mtc_cuda::bf16 *dy,
                            const float *rstd, float *partialW, int rows, int D,
                            int chunks) {
  rmsnormGradW(x, dy, rstd, partialW, rows, D, chunks);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_layernorm_bf16(const mtc_cuda::bf16 *x, const mtc_cuda::bf16 *w,
                       const mtc_cuda::bf16 *b, mtc_cuda::bf16 *y, int rows,
                       int D, float eps) {
  layernorm(x, w, b, y, rows, D, eps);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_layernorm_grad_bf16(const mtc_cuda::bf16 *x, const mtc_cuda::bf16 *w,
                            const mtc_cuda::bf16 *dy, float *dx, float *stats,
                            int rows, int D, float eps) {
  layernormGrad(x, w, dy, dx, stats, rows, D, eps);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_layernorm_grad_wb_bf16(const mtc_cuda::bf16 *x,
                               const mtc_cuda::bf16 *dy, const float *stats,
                               float *partialW, float *partialB, int rows,
                               int D, int chunks) {
  layernormGradWB(x, dy, stats, partialW, partialB, rows, D, chunks);
}
