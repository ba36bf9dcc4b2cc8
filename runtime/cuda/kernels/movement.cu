//===- movement.cu - Transpose, slice, concat, pad (CUDA C) ---------------===//
//
// Part of mtc. The CUDA counterparts of runtime/cpu/Movement.cpp. These are
// copies: exact, type-agnostic, so an entry exists per element size. _f32
// moves 4-byte elements (f32, int32), _bf16 moves 2-byte elements (bf16,
// f16). Sizes and indices are 64-bit; every tensor is dense and row-major.
//
// Entries (E = the element, 4 or 2 bytes):
//
//   transpose_f32 / transpose_bf16(const E *x, E *y, TransposeShape s)
//     y = x transposed by s.perm: y dim i is x dim perm[i] (cpu::transpose).
//     TransposeShape (shapes.cuh), by value: { int rank (1..8); int
//     perm[8]; long long shape[8] } -- shape is x's; entries past rank are
//     ignored.
//   slice_f32 / slice_bf16(const E *x, E *y, long long outer, long long n,
//                          long long inner, long long start, long long end)
//     y[outer, end - start, inner] = x[outer, n, inner][:, start:end, :].
//   concat_f32 / concat_bf16(E *y, ConcatParts parts, long long outer,
//                            long long inner)
//     y[outer, sum(size), inner] = the parts [outer, size[i], inner] placed
//     one after another along the middle axis. ConcatParts (shapes.cuh),
//     by value: { const void *part[8]; long long size[8]; int count (1..8) }
//     -- a part of size 0 may be null.
//   pad_f32 / pad_bf16(const E *x, E *y, long long outer, long long n,
//                      long long inner, long long start, long long end)
//     y[outer, n, inner]: x[outer, end - start, inner] at [start, end) of the
//     middle axis, zeros elsewhere (the VJP of slice).
//   broadcast_rows_f32 / broadcast_rows_bf16(const E *x, E *y,
//                                            long long rows, long long n)
//     y[rows, n] = the row x[n] repeated (matmul's bias, written into y
//     before the GEMM adds the product with beta = 1).
//
// Launch (every entry): grid (any >= 1, e.g. min(ceil(total / 256), 65535),
// total = y's element count), block (any, 1..1024; 256): a grid-stride loop
// over y's elements, each written by exactly one thread. No dynamic shared
// memory. Nothing outside x's and y's extents is read or written.
//
// Width: slice, concat, pad and broadcast_rows move 16-byte words when
// inner * sizeof(E) (n * sizeof(E) for broadcast_rows) is a multiple of 16
// and every pointer is 16-byte aligned (then every run of `inner` elements
// is too); transpose does so when the innermost y dim is the innermost x
// dim and its bytes and the pointers allow it. Otherwise
// element by element. The choice is uniform over the launch.
//
//===----------------------------------------------------------------------===//
#include "common.cuh"
#include "shapes.cuh"

namespace {

using mtc_cuda::ConcatParts;
using mtc_cuda::TransposeShape;

typedef unsigned short E2;
typedef unsigned int E4;
typedef uint4 E16;

__device__ __forceinline__ bool aligned16(const void *p) {
  return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

template <typename E> __device__ __forceinline__ E zero() { return E(0); }
template <> __device__ __forceinline__ E16 zero<E16>() {
  return make_uint4(0, 0, 0, 0);
}

__device__ __forceinline__ long long gridStart() {
  return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long gridStride() {
  return static_cast<long long>(gridDim.x) * blockDim.x;
}

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

/// y's dims with their x strides, in units of E, padded to 8 dims with
/// trailing dims of size 1. Every loop over them has a fixed trip count and
/// unrolls, so the plan lives in registers (no local memory).
struct TransposePlan {
  long long size[8], xStride[8];
};

template <typename E>
__device__ __forceinline__ void transposeCopy(const E *x, E *y,
                                              const TransposePlan &p) {
  long long total = 1;
#pragma unroll
  for (int d = 0; d < 8; ++d)
    total *= p.size[d];
  for (long long e = gridStart(); e < total; e += gridStride()) {
    long long rem = e, from = 0;
#pragma unroll
    for (int d = 7; d > 0; --d) {
      if (p.size[d] == 1) // padding and unit dims: no 64-bit division
        continue;
      const long long i = rem % p.size[d];
      rem /= p.size[d];
      from += i * p.xStride[d];
    }
    from += rem * p.xStride[0];
    y[e] = x[from];
  }
}

template <typename E>
__device__ __forceinline__ void transposeEntry(const E *x, E *y,
                                               const TransposeShape &s) {
  TransposePlan p;
  long long lastSize = 1;
  int lastFrom = -1;
#pragma unroll
  for (int d = 0; d < 8; ++d) {
    // y dim d is x dim perm[d]; its x stride is the product of the x dims
    // after that one. Constant indices only, selected by predicates.
    const bool live = d < s.rank;
    const int xd = live ? s.perm[d] : -1;
    long long size = 1, stride = 1;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (j == xd)
        size = s.shape[j];
      if (live && j > xd && j < s.rank)
        stride *= s.shape[j];
    }
    p.size[d] = size;
    p.xStride[d] = live ? stride : 0;
    if (d == s.rank - 1) {
      lastSize = size;
      lastFrom = xd;
    }
  }
  // The innermost dim stays innermost: move it in 16-byte words if it can
  // (the other strides are multiples of its size).
  constexpr int kVec = 16 / sizeof(E);
  if (lastFrom == s.rank - 1 && lastSize % kVec == 0 && aligned16(x) &&
      aligned16(y)) {
#pragma unroll
    for (int d = 0; d < 8; ++d) {
      if (d == s.rank - 1)
        p.size[d] /= kVec;
      else
        p.xStride[d] /= kVec;
    }
    transposeCopy(reinterpret_cast<const E16 *>(x), reinterpret_cast<E16 *>(y),
                  p);
    return;
  }
  transposeCopy(x, y, p);
}

//===----------------------------------------------------------------------===//
// slice, pad, concat: [outer, n, inner] along the middle axis
//===----------------------------------------------------------------------===//

template <typename E>
__device__ __forceinline__ void sliceCopy(const E *x, E *y, long long outer,
                                          long long n, long long inner,
                                          long long start, long long end) {
  const long long run = (end - start) * inner, total = outer * run;
  for (long long e = gridStart(); e < total; e += gridStride()) {
    const long long o = e / run, r = e - o * run;
    y[e] = x[(o * n + start) * inner + r];
  }
}

template <typename E>
__device__ __forceinline__ void padCopy(const E *x, E *y, long long outer,
                                        long long n, long long inner,
                                        long long start, long long end) {
  const long long row = n * inner, total = outer * row;
  const long long lo = start * inner, hi = end * inner, run = hi - lo;
  for (long long e = gridStart(); e < total; e += gridStride()) {
    const long long o = e / row, r = e - o * row;
    y[e] = r >= lo && r < hi ? x[o * run + (r - lo)] : zero<E>();
  }
}

template <typename E>
__device__ __forceinline__ void concatCopy(E *y, const ConcatParts &parts,
                                           long long outer, long long inner) {
  long long rows = 0;
  for (int i = 0; i < parts.count; ++i)
    rows += parts.size[i];
  const long long row = rows * inner, total = outer * row;
  for (long long e = gridStart(); e < total; e += gridStride()) {
    const long long o = e / row;
    long long r = e - o * row;
    int i = 0;
    while (r >= parts.size[i] * inner) { // r < row: some part holds it
      r -= parts.size[i] * inner;
      ++i;
    }
    const E *src = static_cast<const E *>(parts.part[i]);
    y[e] = src[o * parts.size[i] * inner + r];
  }
}

template <typename E>
__device__ __forceinline__ bool wideRuns(long long inner, const void *a,
                                         const void *b) {
  return (inner * static_cast<long long>(sizeof(E))) % 16 == 0 &&
         aligned16(a) && aligned16(b);
}

template <typename E>
__device__ __forceinline__ void sliceEntry(const E *x, E *y, long long outer,
                                           long long n, long long inner,
                                           long long start, long long end) {
  if (wideRuns<E>(inner, x, y))
    sliceCopy(reinterpret_cast<const E16 *>(x), reinterpret_cast<E16 *>(y),
              outer, n, inner * sizeof(E) / 16, start, end);
  else
    sliceCopy(x, y, outer, n, inner, start, end);
}

template <typename E>
__device__ __forceinline__ void padEntry(const E *x, E *y, long long outer,
                                         long long n, long long inner,
                                         long long start, long long end) {
  if (wideRuns<E>(inner, x, y))
    padCopy(reinterpret_cast<const E16 *>(x), reinterpret_cast<E16 *>(y), outer,
            n, inner * sizeof(E) / 16, start, end);
  else
    padCopy(x, y, outer, n, inner, start, end);
}

template <typename E>
__device__ __forceinline__ void concatEntry(E *y, const ConcatParts &parts,
                                            long long outer, long long inner) {
  bool wide = wideRuns<E>(inner, y, y);
  for (int i = 0; i < parts.count; ++i)
    wide = wide && (parts.size[i] == 0 || aligned16(parts.part[i]));
  if (wide)
    concatCopy(reinterpret_cast<E16 *>(y), parts, outer,
               inner * static_cast<long long>(sizeof(E)) / 16);
  else
    concatCopy(y, parts, outer, inner);
}

template <typename E>
__device__ __forceinline__ void broadcastRowsCopy(const E *x, E *y,
                                                  long long rows, long long n) {
  const long long total = rows * n;
  for (long long e = gridStart(); e < total; e += gridStride())
    y[e] = x[e % n];
}

template <typename E>
__device__ __forceinline__ void
broadcastRowsEntry(const E *x, E *y, long long rows, long long n) {
  if (wideRuns<E>(n, x, y))
    broadcastRowsCopy(reinterpret_cast<const E16 *>(x),
                      reinterpret_cast<E16 *>(y), rows,
                      n * static_cast<long long>(sizeof(E)) / 16);
  else
    broadcastRowsCopy(x, y, rows, n);
}

} // namespace

extern "C" __global__ void transpose_f32(const E4 *x, E4 *y,
                                         mtc_cuda::TransposeShape s) {
  transposeEntry(x, y, s);
}
extern "C" __global__ void transpose_bf16(const E2 *x, E2 *y,
                                          mtc_cuda::TransposeShape s) {
  transposeEntry(x, y, s);
}

extern "C" __global__ void slice_f32(const E4 *x, E4 *y, long long outer,
                                     long long n, long long inner,
                                     long long start, long long end) {
  sliceEntry(x, y, outer, n, inner, start, end);
}
extern "C" __global__ void slice_bf16(const E2 *x, E2 *y, long long outer,
                                      long long n, long long inner,
                                      long long start, long long end) {
  sliceEntry(x, y, outer, n, inner, start, end);
}

extern "C" __global__ void concat_f32(E4 *y, mtc_cuda::ConcatParts parts,
                                      long long outer, long long inner) {
  concatEntry(y, parts, outer, inner);
}
extern "C" __global__ void concat_bf16(E2 *y, mtc_cuda::ConcatParts parts,
                                       long long outer, long long inner) {
  concatEntry(y, parts, outer, inner);
}

extern "C" __global__ void pad_f32(const E4 *x, E4 *y, long long outer,
                                   long long n, long long inner,
                                   long long start, long long end) {
  padEntry(x, y, outer, n, inner, start, end);
}
extern "C" __global__ void pad_bf16(const E2 *x, E2 *y, long long outer,
                                    long long n, long long inner,
                                    long long start, long long end) {
  padEntry(x, y, outer, n, inner, start, end);
}

extern "C" __global__ void broadcast_rows_f32(const E4 *x, E4 *y,
                                              long long rows, long long n) {
  broadcastRowsEntry(x, y, rows, n);
}
extern "C" __global__ void broadcast_rows_bf16(const E2 *x, E2 *y,
                                               long long rows, long long n) {
  broadcastRowsEntry(x, y, rows, n);
}
