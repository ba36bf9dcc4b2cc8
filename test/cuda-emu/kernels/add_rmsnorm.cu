//===- add_rmsnorm.cu - Fused residual add + RMSNorm (CUDA C) -------------===//
//
// Part of mtc. A demonstration kernel of the CUDA emulator
// (docs/cuda-emulator.md): the same text is compiled by NVRTC for sm_80/sm_90
// and, as host C++, run by test/cuda-emu/KernelsTest.cpp against a
// double-precision reference.
//
// One block per row (blockDim.x a multiple of 32, at most 1024):
//
//   h         = x + residual          rounded to the storage type
//   residual <- h
//   y         = h * rsqrt(mean(h^2) + eps) * w
//
// x, residual, y: [rows, ld] (row r at r * ld, D <= ld valid columns);
// w: [D]. Storage is f32 or bf16, arithmetic f32. The row of h waits in
// dynamic shared memory (D floats) between the two passes. Loads and stores
// are 16 bytes wide (float4: 4 f32 or 8 bf16) when ld and every pointer
// allow it, with a scalar tail for the last D % 4 (D % 8) columns; otherwise
// the whole row is scalar. The block reduction is a warp xor-shuffle sum,
// one partial per warp in shared memory, and a second shuffle sum.
//
//===----------------------------------------------------------------------===//
#include <cuda_bf16.h>

namespace {

template <typename T> struct Storage;
template <> struct Storage<float> {
  static constexpr int kVec = 4; ///< elements per 16-byte access
  static __device__ __forceinline__ float load(float v) { return v; }
  static __device__ __forceinline__ float store(float v) { return v; }
};
template <> struct Storage<__nv_bfloat16> {
  static constexpr int kVec = 8;
  static __device__ __forceinline__ float load(__nv_bfloat16 v) {
    return __bfloat162float(v);
  }
  static __device__ __forceinline__ __nv_bfloat16 store(float v) {
    return __float2bfloat16_rn(v);
  }
};

/// Sixteen bytes of T, moved as one float4.
template <typename T> struct Pack {
  union {
    float4 raw;
    T v[Storage<T>::kVec];
  };
  __device__ __forceinline__ Pack() {}
};

template <typename T> __device__ __forceinline__ Pack<T> load16(const T *p) {
  Pack<T> pk;
  pk.raw = *reinterpret_cast<const float4 *>(p);
  return pk;
}
template <typename T>
__device__ __forceinline__ void store16(T *p, const Pack<T> &pk) {
  *reinterpret_cast<float4 *>(p) = pk.raw;
}

__device__ __forceinline__ bool aligned16(const void *p) {
  return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

__device__ __forceinline__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// The sum of v over the block, returned to every thread.
__device__ float blockSum(float v) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warpSum(v);
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : 0.0f;
    s = warpSum(s);
    if (lane == 0)
      total = s;
  }
  __syncthreads();
  return total;
}

/// h: D floats of dynamic shared memory.
template <typename T>
__device__ void addRmsnorm(const T *__restrict__ x, T *__restrict__ residual,
                           const T *__restrict__ w, T *__restrict__ y, int rows,
                           int D, int ld, float eps, float *h) {
  constexpr int kVec = Storage<T>::kVec;
  const int row = blockIdx.x;
  if (row >= rows)
    return;
  const T *xr = x + static_cast<size_t>(row) * ld;
  T *rr = residual + static_cast<size_t>(row) * ld;
  T *yr = y + static_cast<size_t>(row) * ld;
  const bool vec = ld % kVec == 0 && aligned16(x) && aligned16(residual) &&
                   aligned16(w) && aligned16(y);
  const int chunks = vec ? D / kVec : 0;

  // Pass 1: h = x + residual, kept in shared memory; sum of squares.
  float squares = 0.0f;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int j = c * kVec;
    Pack<T> a = load16(xr + j), b = load16(rr + j), out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      out.v[k] = Storage<T>::store(Storage<T>::load(a.v[k]) +
                                   Storage<T>::load(b.v[k]));
      const float hk = Storage<T>::load(out.v[k]);
      h[j + k] = hk;
      squares += hk * hk;
    }
    store16(rr + j, out);
  }
  for (int j = chunks * kVec + threadIdx.x; j < D; j += blockDim.x) {
    const T hj =
        Storage<T>::store(Storage<T>::load(xr[j]) + Storage<T>::load(rr[j]));
    rr[j] = hj;
    const float hf = Storage<T>::load(hj);
    h[j] = hf;
    squares += hf * hf;
  }

  const float scale = rsqrtf(blockSum(squares) / D + eps);

  // Pass 2: y = h * scale * w. Each thread reads back the h it wrote.
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int j = c * kVec;
    Pack<T> wv = load16(w + j), out;
#pragma unroll
    for (int k = 0; k < kVec; ++k)
      out.v[k] =
          Storage<T>::store(h[j + k] * scale * Storage<T>::load(wv.v[k]));
    store16(yr + j, out);
  }
  for (int j = chunks * kVec + threadIdx.x; j < D; j += blockDim.x)
    yr[j] = Storage<T>::store(h[j] * scale * Storage<T>::load(w[j]));
}

} // namespace

extern "C" __global__ void __launch_bounds__(1024)
    add_rmsnorm_f32(const float *x, float *residual, const float *w, float *y,
                    int rows, int D, int ld, float eps) {
  extern __shared__ __align__(16) unsigned char smem[];
  addRmsnorm(x, residual, w, y, rows, D, ld, eps,
             reinterpret_cast<float *>(smem));
}

extern "C" __global__ void __launch_bounds__(1024)
    add_rmsnorm_bf16(const __nv_bfloat16 *x, __nv_bfloat16 *residual,
                     const __nv_bfloat16 *w, __nv_bfloat16 *y, int rows, int D,
                     int ld, float eps) {
  extern __shared__ __align__(16) unsigned char smem[];
  addRmsnorm(x, residual, w, y, rows, D, ld, eps,
             reinterpret_cast<float *>(smem));
}
