//===- reduce.cu - Reductions and softmax over one axis ----------*- CUDA
//-*-===//
//
// Part of mtc. The CUDA versions of runtime/cpu's reduce, reduceGrad,
// softmax, softmaxGrad (runtime/cpu/Norm.cpp) and reduceTo
// (runtime/cpu/Elementwise.cpp), plus the in-order sum of per-chunk partials
// that the deterministic parameter gradients (norm.cu) and reduceTo finish
// with. Storage T is f32 or bf16 (`_f32`, `_bf16`) where both exist;
// arithmetic is fp32; bf16 stores round to nearest even.
//
// Ops over the middle axis see x as [outer, n, inner] (dense, row-major);
// y, dy as [outer, inner]. Each op has two entries:
//
//   row form (inner == 1; the hot case): one block per row, grid (outer),
//   block any multiple of 32 up to 1024 (256 for n of 1k and more, 64-128
//   below), no dynamic shared memory; the block walks the row in 16-byte
//   packs when the row pointers are aligned (vector.cuh), else element by
//   element, then a warp butterfly and one partial per warp.
//   strided form (`_strided`, any inner >= 1): one thread per column (o, i),
//   walking n with stride inner (coalesced across i); grid
//   (ceil(outer * inner / blockDim.x)), block any multiple of 32 up to 1024
//   (128-256), no dynamic shared memory. Slow when outer * inner is small and
//   n large: use the row form for inner == 1.
//
//   mtc_reduce[_strided]_T(x, y, outer, n, [inner,] op)
//       op 0 Sum, 1 Mean, 2 Max (cpu::Reduce). Max ignores NaN as
//       runtime/cpu does (`v > m`), -inf for an empty max.
//   mtc_reduce_grad[_strided]_T(x, dy, dx, outer, n, [inner,] op)
//       dx overwritten: Sum dy, Mean dy / n, Max dy at the FIRST maximal
//       element of the column (index 0 when none is > -inf), 0 elsewhere.
//   mtc_softmax[_strided]_T(x, y, outer, n, [inner])
//       y = exp(x - max) / sum exp(x - max), exp being runtime/cpu's fexp
//       (fastmath.cuh). One read pass computes max and sum together (online:
//       the running sum is rescaled when the max grows), a second writes y.
//       A row of all -inf gives NaN, as runtime/cpu (0 / 0).
//   mtc_softmax_grad[_strided]_T(y, dy, dx, outer, n, [inner])
//       dx = y * (dy - sum(dy * y)) over n.
//
// Deterministic reductions (f32 only: these produce gradients):
//
//   mtc_reduce_to_f32(x, out, shape, chunks)
//       the sum of x down to a broadcast operand's shape (shape: a
//       ReduceToShape, shapes.cuh, by value). grid (ceil(outN / blockDim.x),
//       chunks), block a multiple of 32 up to 1024, chunks in [1, 65535]:
//       thread (o, c) sums output o over the reduced indices [redN c /
//       chunks, redN (c + 1) / chunks) in row-major order into out[c * outN
//       + o]. chunks == 1 writes the result itself (out = y); otherwise out is
//       [chunks, outN] scratch finished by mtc_sum_partials_f32 (accumulate
//       0). Coalesced when x's innermost kept dimension is contiguous (a bias
//       gradient); a reduction of contiguous rows is better the row form of
//       mtc_reduce (Sum).
//   mtc_sum_partials_f32(partial, out, chunks, n, accumulate)
//       out[j] = (accumulate ? out[j] : 0) + sum over c = 0..chunks-1, in that
//       order, of partial[c * n + j]; grid (ceil(n / blockDim.x)), block a
//       multiple of 32 up to 1024.
//
// Every sum has an order fixed by the shape and the launch geometry (never
// by the thread schedule) and uses no atomics: results are bit-identical
// from run to run.
//
//===----------------------------------------------------------------------===//
#include "common.cuh"
#include "fastmath.cuh"
#include "shapes.cuh"
#include "vector.cuh"

namespace {

using namespace mtc_cuda;

enum ReduceOp { kSum = 0, kMean = 1, kMax = 2 };

__device__ __forceinline__ float negInf() { return __int_as_float(0xff800000); }

//===----------------------------------------------------------------------===//
// reduce / reduceGrad
//===----------------------------------------------------------------------===//

template <typename T>
__device__ void reduceRows(const T *__restrict__ x, T *__restrict__ y,
                           int outer, int n, int op) {
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  if (row >= outer)
    return;
  const T *xr = x + static_cast<size_t>(row) * n;
  const bool vec = aligned16(xr);
  float r;
  if (op == kMax) {
    float m = negInf();
    forRow(xr, n, vec, [&](int, float v) { m = v > m ? v : m; });
    r = blockMax(m, scratch);
  } else {
    float s = 0.0f;
    forRow(xr, n, vec, [&](int, float v) { s += v; });
    r = blockSum(s, scratch);
    if (op == kMean)
      r /= n;
  }
  if (threadIdx.x == 0)
    y[row] = fromFloat<T>(r);
}

template <typename T>
__device__ void reduceStrided(const T *__restrict__ x, T *__restrict__ y,
                              int outer, int n, int inner, int op) {
  const long long col =
      static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= static_cast<long long>(outer) * inner)
    return;
  const long long o = col / inner, i = col % inner;
  const T *p = x + static_cast<size_t>(o) * n * inner + i;
  float r;
  if (op == kMax) {
    r = negInf();
    for (int k = 0; k < n; ++k) {
      const float v = toFloat(p[static_cast<size_t>(k) * inner]);
      r = v > r ? v : r;
    }
  } else {
    r = 0.0f;
    for (int k = 0; k < n; ++k)
      r += toFloat(p[static_cast<size_t>(k) * inner]);
    if (op == kMean)
      r /= n;
  }
  y[col] = fromFloat<T>(r);
}

/// The first index of the block's maximum over (value, index) pairs (ties to
/// the smaller index; NaN never wins, as no pair holds one). \p vals, \p idx:
/// 32 entries of shared memory each.
__device__ __forceinline__ int blockArgMax(float m, int arg, float *vals,
                                           int *idx, int none) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float om = __shfl_xor_sync(kFullMask, m, offset);
      const int oa = __shfl_xor_sync(kFullMask, arg, offset);
      if (om > m || (om == m && oa < arg)) {
        m = om;
        arg = oa;
      }
    }
    if (pass == 1)
      break;
    if (lane == 0) {
      vals[warp] = m;
      idx[warp] = arg;
    }
    __syncthreads();
    m = lane < warps ? vals[lane] : negInf();
    arg = lane < warps ? idx[lane] : none;
  }
  return arg;
}

template <typename T>
__device__ void reduceGradRows(const T *__restrict__ x,
                               const T *__restrict__ dy, T *__restrict__ dx,
                               int outer, int n, int op) {
  __shared__ float vals[32];
  __shared__ int idx[32];
  const int row = blockIdx.x;
  if (row >= outer)
    return;
  const size_t base = static_cast<size_t>(row) * n;
  const float g = toFloat(dy[row]);
  T *dr = dx + base;
  if (op != kMax) {
    const T v = fromFloat<T>(op == kMean ? g * (1.0f / n) : g);
    for (int j = threadIdx.x; j < n; j += blockDim.x)
      dr[j] = v;
    return;
  }
  const T *xr = x + base;
  float m = negInf();
  int arg = n; // none yet
  // A thread sees its elements in increasing j (packs, then the tail), so
  // `>` keeps its first maximal index.
  forRow(xr, n, aligned16(xr), [&](int j, float v) {
    if (v > m) {
      m = v;
      arg = j;
    }
  });
  arg = blockArgMax(m, arg, vals, idx, n);
  if (arg == n) // no element above -inf: runtime/cpu picks index 0
    arg = 0;
  const T gv = fromFloat<T>(g), zero = fromFloat<T>(0.0f);
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    dr[j] = j == arg ? gv : zero;
}

template <typename T>
__device__ void reduceGradStrided(const T *__restrict__ x,
                                  const T *__restrict__ dy, T *__restrict__ dx,
                                  int outer, int n, int inner, int op) {
  const long long col =
      static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= static_cast<long long>(outer) * inner)
    return;
  const long long o = col / inner, i = col % inner;
  const size_t base = static_cast<size_t>(o) * n * inner + i;
  const float g = toFloat(dy[col]);
  T *d = dx + base;
  if (op != kMax) {
    const T v = fromFloat<T>(op == kMean ? g * (1.0f / n) : g);
    for (int k = 0; k < n; ++k)
      d[static_cast<size_t>(k) * inner] = v;
    return;
  }
  const T *p = x + base;
  float m = negInf();
  int arg = 0;
  for (int k = 0; k < n; ++k) {
    const float v = toFloat(p[static_cast<size_t>(k) * inner]);
    if (v > m) {
      m = v;
      arg = k;
    }
  }
  const T gv = fromFloat<T>(g), zero = fromFloat<T>(0.0f);
  for (int k = 0; k < n; ++k)
    d[static_cast<size_t>(k) * inner] = k == arg ? gv : zero;
}

//===----------------------------------------------------------------------===//
// softmax / softmaxGrad
//===----------------------------------------------------------------------===//

/// Adds v to a running (max m, sum s of exp(. - m)).
__device__ __forceinline__ void onlineAdd(float v, float &m, float &s) {
  if (v > m) {
    s = s * fexp(m - v) + 1.0f; // fexp(-inf) = 0 for the first element
    m = v;
  } else if (m > negInf() || v != v) {
    s += fexp(v - m); // (-inf, -inf) adds nothing; NaN poisons the sum
  }
}

template <typename T>
__device__ void softmaxRows(const T *__restrict__ x, T *__restrict__ y,
                            int outer, int n) {
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  if (row >= outer)
    return;
  const T *xr = x + static_cast<size_t>(row) * n;
  T *yr = y + static_cast<size_t>(row) * n;
  const bool vec = aligned16(xr) && aligned16(yr);
  float m = negInf(), s = 0.0f;
  forRow(xr, n, vec, [&](int, float v) { onlineAdd(v, m, s); });
  const float M = blockMax(m, scratch);
  // A thread that saw nothing (s == 0) adds 0 even when m == M == -inf.
  const float inv =
      1.0f / blockSum(s == 0.0f ? 0.0f : s * fexp(m - M), scratch);
  mapRow(xr, yr, n, vec, [&](int, float v) { return fexp(v - M) * inv; });
}

template <typename T>
__device__ void softmaxStrided(const T *__restrict__ x, T *__restrict__ y,
                               int outer, int n, int inner) {
  const long long col =
      static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= static_cast<long long>(outer) * inner)
    return;
  const long long o = col / inner, i = col % inner;
  const size_t base = static_cast<size_t>(o) * n * inner + i;
  const T *p = x + base;
  T *q = y + base;
  float m = negInf(), s = 0.0f;
  for (int k = 0; k < n; ++k)
    onlineAdd(toFloat(p[static_cast<size_t>(k) * inner]), m, s);
  const float inv = 1.0f / s;
  for (int k = 0; k < n; ++k) {
    const size_t at = static_cast<size_t>(k) * inner;
    q[at] = fromFloat<T>(fexp(toFloat(p[at]) - m) * inv);
  }
}

template <typename T>
__device__ void softmaxGradRows(const T *__restrict__ y,
                                const T *__restrict__ dy, T *__restrict__ dx,
                                int outer, int n) {
  __shared__ float scratch[32];
  const int row = blockIdx.x;
  if (row >= outer)
    return;
  const size_t base = static_cast<size_t>(row) * n;
  const T *p = y + base, *g = dy + base;
  T *d = dx + base;
  const bool vec = aligned16(p) && aligned16(g) && aligned16(d);
  float dot = 0.0f;
  forRow2(p, g, n, vec, [&](int, float pv, float gv) { dot += pv * gv; });
  dot = blockSum(dot, scratch);
  mapRow2(p, g, d, n, vec,
          [&](int, float pv, float gv) { return pv * (gv - dot); });
}

template <typename T>
__device__ void softmaxGradStrided(const T *__restrict__ y,
                                   const T *__restrict__ dy, T *__restrict__ dx,
                                   int outer, int n, int inner) {
  const long long col =
      static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= static_cast<long long>(outer) * inner)
    return;
  const long long o = col / inner, i = col % inner;
  const size_t base = static_cast<size_t>(o) * n * inner + i;
  const T *p = y + base, *g = dy + base;
  T *d = dx + base;
  float dot = 0.0f;
  for (int k = 0; k < n; ++k) {
    const size_t at = static_cast<size_t>(k) * inner;
    dot += toFloat(p[at]) * toFloat(g[at]);
  }
  for (int k = 0; k < n; ++k) {
    const size_t at = static_cast<size_t>(k) * inner;
    d[at] = fromFloat<T>(toFloat(p[at]) * (toFloat(g[at]) - dot));
  }
}

//===----------------------------------------------------------------------===//
// reduceTo, partial sums
//===----------------------------------------------------------------------===//

__device__ void reduceTo(const float *__restrict__ x, float *__restrict__ out,
                         const ReduceToShape &s, int chunks) {
  const long long o =
      static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int c = blockIdx.y;
  if (o >= s.outN || c >= chunks)
    return;
  long long base = 0;
  for (long long rem = o, d = s.keptRank - 1; d >= 0; --d) {
    base += rem % s.keptSize[d] * s.keptStride[d];
    rem /= s.keptSize[d];
  }
  float sum = 0.0f;
  if (s.redRank == 0) {
    sum = c == 0 ? x[base] : 0.0f;
  } else {
    const long long first = s.redN * c / chunks;
    const long long last = s.redN * (c + 1) / chunks;
    const int in = s.redRank - 1;
    const long long innerSize = s.redSize[in], innerStride = s.redStride[in];
    // Decompose the reduced index once per run along the innermost reduced
    // dimension, then walk that run with a plain stride.
    for (long long t = first; t < last;) {
      long long off = 0, rem = t / innerSize;
      const long long i0 = t % innerSize;
      for (int d = in - 1; d >= 0; --d) {
        off += rem % s.redSize[d] * s.redStride[d];
        rem /= s.redSize[d];
      }
      const long long run = min(last - t, innerSize - i0);
      const float *p = x + base + off + i0 * innerStride;
      for (long long k = 0; k < run; ++k)
        sum += p[k * innerStride];
      t += run;
    }
  }
  out[static_cast<size_t>(c) * s.outN + o] = sum;
}

} // namespace

// Entries (written out: the emulator build finds them by their text).

extern "C" __global__ void __launch_bounds__(1024)
    mtc_reduce_to_f32(const float *x, float *out, mtc_cuda::ReduceToShape shape,
                      int chunks) {
  reduceTo(x, out, shape, chunks);
}

extern "C" __global__ void __launch_bounds__(1024)
    mtc_sum_partials_f32(const float *partial, float *out, int chunks,
                         long long n, int accumulate) {
  const long long j =
      static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n)
    return;
  float s = 0.0f;
  for (int c = 0; c < chunks; ++c)
    s += partial[static_cast<size_t>(c) * n + j];
  out[j] = accumulate ? out[j] + s : s; // as runtime/cpu's addPartials
}

extern "C" __global__ void __launch_bounds__(1024)
    mtc_reduce_f32(const float *x, float *y, int outer, int n, int op) {
  reduceRows(x, y, outer, n, op);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_reduce_strided_f32(const float *x, float *y, int outer, int n,
                           int inner, int op) {
  reduceStrided(x, y, outer, n, inner, op);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_reduce_grad_f32(const float *x, const float *dy, float *dx, int outer,
                        int n, int op) {
  reduceGradRows(x, dy, dx, outer, n, op);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_reduce_grad_strided_f32(const float *x, const float *dy, float *dx,
                                int outer, int n, int inner, int op) {
  reduceGradStrided(x, dy, dx, outer, n, inner, op);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_softmax_f32(const float *x, float *y, int outer, int n) {
  softmaxRows(x, y, outer, n);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_softmax_strided_f32(const float *x, float *y, int outer, int n,
                            int inner) {
  softmaxStrided(x, y, outer, n, inner);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_softmax_grad_f32(const float *y, const float *dy, float *dx, int outer,
                         int n) {
  softmaxGradRows(y, dy, dx, outer, n);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_softmax_grad_strided_f32(const float *y, const float *dy, float *dx,
                                 int outer, int n, int inner) {
  softmaxGradStrided(y, dy, dx, outer, n, inner);
}

extern "C" __global__ void __launch_bounds__(1024)
    mtc_reduce_bf16(const mtc_cuda::bf16 *x, mtc_cuda::bf16 *y, int outer,
                    int n, int op) {
  reduceRows(x, y, outer, n, op);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_reduce_strided_bf16(const mtc_cuda::bf16 *x, mtc_cuda::bf16 *y,
                            int outer, int n, int inner, int op) {
  reduceStrided(x, y, outer, n, inner, op);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_reduce_grad_bf16(const mtc_cuda::bf16 *x, const mtc_cuda::bf16 *dy,
                         mtc_cuda::bf16 *dx, int outer, int n, int op) {
  reduceGradRows(x, dy, dx, outer, n, op);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_reduce_grad_strided_bf16(const mtc_cuda::bf16 *x,
                                 const mtc_cuda::bf16 *dy, mtc_cuda::bf16 *dx,
                                 int outer, int n, int inner, int op) {
  reduceGradStrided(x, dy, dx, outer, n, inner, op);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_softmax_bf16(const mtc_cuda::bf16 *x, mtc_cuda::bf16 *y, int outer,
                     int n) {
  softmaxRows(x, y, outer, n);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_softmax_strided_bf16(const mtc_cuda::bf16 *x, mtc_cuda::bf16 *y,
                             int outer, int n, int inner) {
  softmaxStrided(x, y, outer, n, inner);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_softmax_grad_bf16(const mtc_cuda::bf16 *y, const mtc_cuda::bf16 *dy,
                          mtc_cuda::bf16 *dx, int outer, int n) {
  softmaxGradRows(y, dy, dx, outer, n);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_softmax_grad_strided_bf16(const mtc_cuda::bf16 *y,
                                  const mtc_cuda::bf16 *dy, mtc_cuda::bf16 *dx,
                                  int outer, int n, int inner) {
  softmaxGradStrided(y, dy, dx, outer, n, inner);
}
