//===- norm.cu - RMSNorm forward and backward (CUDA C) --------------------===//
//
// Part of mtc. The library kernels of rmsnorm (cpu::rmsnorm/rmsnormGrad in
// runtime/cpu/Kernels.h are the reference):
//
//   y = x * r * (offset + w),  r = (mean over D of x^2 + eps)^-1/2
//
// x, y, dy, dx: [rows, D] contiguous; w, dwAcc: [D]. fp32 math.
//
//   rmsnorm_fwd_f32 / _bf16 (x, w, y, rows, D, eps, offset)
//       grid (rows), block a multiple of 32 (<= 1024); one block per row.
//       Storage of x, w, y: f32 or bf16.
//   rmsnorm_bwd_dx_f32 (x, w, dy, dx, rowInv, rows, D, eps, offset)
//       grid (rows), block a multiple of 32: dx overwritten, and each row's
//       r written to rowInv[rows] (f32 scratch) for the weight gradient.
//   rmsnorm_bwd_dw_partial_f32 (x, dy, rowInv, partial, rows, D, chunks)
//       grid (ceil(D / blockDim.x), chunks): partial[c, i] = the sum, over
//       the rows of chunk c (rows * c / chunks up to rows * (c+1) / chunks)
//       in row order, of dy[r, i] * x[r, i] * r_r. partial: [chunks, D] f32.
//   mtc_sum_partials_f32 (partial, acc, chunks, D)
//       grid (ceil(D / blockDim.x)): acc[i] += the sum over c, in order, of
//       partial[c, i].
//
// Deterministic: every sum has one fixed order (block reductions by xor
// butterflies, partials in chunk order), so results do not depend on the
// schedule; no atomics.
//
//===----------------------------------------------------------------------===//
#include "common.cuh"

namespace {

using namespace mtc_cuda;

template <typename T>
__device__ __forceinline__ void rmsnormForward(const T *x, const T *w, T *y,
                                               int D, float eps, float offset) {
  __shared__ float scratch[32];
  const size_t row = static_cast<size_t>(blockIdx.x) * D;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float v = toFloat(x[row + i]);
    ss += v * v;
  }
  ss = blockSum(ss, scratch);
  const float inv = rsqrtf(ss / D + eps);
  for (int i = threadIdx.x; i < D; i += blockDim.x)
    y[row + i] =
        fromFloat<T>(toFloat(x[row + i]) * inv * (offset + toFloat(w[i])));
}

} // namespace

extern "C" __global__ void rmsnorm_fwd_f32(const float *x, const float *w,
                                           float *y, int rows, int D, float eps,
                                           float offset) {
  rmsnormForward(x, w, y, D, eps, offset);
}

extern "C" __global__ void rmsnorm_fwd_bf16(const bf16 *x, const bf16 *w,
                                            bf16 *y, int rows, int D, float eps,
                                            float offset) {
  rmsnormForward(x, w, y, D, eps, offset);
}

// dx_i = r g_i dy_i - x_i r^3 / D * sum_j dy_j g_j x_j,  g = offset + w.
extern "C" __global__ void rmsnorm_bwd_dx_f32(const float *x, const float *w,
                                              const float *dy, float *dx,
                                              float *rowInv, int rows, int D,
                                              float eps, float offset) {
  __shared__ float scratch[32];
  const size_t row = static_cast<size_t>(blockIdx.x) * D;
  float ss = 0.0f, dot = 0.0f;
  for (int i = threadIdx.x; i < D; i += blockDim.x) {
    float v = x[row + i];
    ss += v * v;
    dot += dy[row + i] * (offset + w[i]) * v;
  }
  ss = blockSum(ss, scratch);
  dot = blockSum(dot, scratch);
  const float inv = rsqrtf(ss / D + eps);
  const float k = inv * inv * inv * dot / D;
  for (int i = threadIdx.x; i < D; i += blockDim.x)
    dx[row + i] = inv * (offset + w[i]) * dy[row + i] - x[row + i] * k;
  if (threadIdx.x == 0)
    rowInv[blockIdx.x] = inv;
}

extern "C" __global__ void
rmsnorm_bwd_dw_partial_f32(const float *x, const float *dy, const float *rowInv,
                           float *partial, int rows, int D, int chunks) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int c = blockIdx.y;
  if (i >= D)
    return;
  const long long r0 = static_cast<long long>(rows) * c / chunks;
  const long long r1 = static_cast<long long>(rows) * (c + 1) / chunks;
  float s = 0.0f;
  for (long long r = r0; r < r1; ++r)
    s += dy[r * D + i] * x[r * D + i] * rowInv[r];
  partial[static_cast<size_t>(c) * D + i] = s;
}

extern "C" __global__ void mtc_sum_partials_f32(const float *partial,
                                                float *acc, int chunks, int D) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= D)
    return;
  float s = 0.0f;
  for (int c = 0; c < chunks; ++c)
    s += partial[static_cast<size_t>(c) * D + i];
  acc[i] += s;
}
