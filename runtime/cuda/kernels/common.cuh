//===- common.cuh - What every mtc CUDA kernel shares -----------*- C++ -*-===//
//
// Part of mtc. Included by every library kernel (runtime/cuda/kernels/*.cu)
// and by the kernels the compiler emits for fused regions. Valid CUDA C for
// NVRTC (the runtime hands it over as an in-memory header) and for the CPU
// emulator (runtime/cuda/emu): see docs/cuda-emulator.md for the rules.
//
// Storage types: a tensor is stored as f32 or bf16; kernels compute in fp32.
// `Load<T>` / `Store<T>` convert at the boundary (bf16 stores round to
// nearest even), so one kernel template serves both storage types.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_KERNELS_COMMON_CUH
#define MTC_RUNTIME_CUDA_KERNELS_COMMON_CUH

#include <cuda_bf16.h>

namespace mtc_cuda {

typedef __nv_bfloat16 bf16;

/// Storage to fp32 and back.
__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(bf16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ bf16 fromFloat<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarpSize = 32;

/// The sum / max of \p v over the 32 lanes of a full warp (every lane gets
/// it). Reduction order is fixed (xor butterfly), so results are
/// deterministic.
__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

/// The sum of \p v over the block (blockDim.x a multiple of 32, at most
/// 1024), returned to every thread. \p scratch holds 32 floats of shared
/// memory; the call contains the barriers it needs and may be repeated.
__device__ __forceinline__ float blockSum(float v, float *scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warpSum(v);
  __syncthreads(); // scratch may still be read by a previous call
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warpSum(v);
}

/// The maximum of \p v over the block; as blockSum.
__device__ __forceinline__ float blockMax(float v, float *scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : __int_as_float(0xff800000); // -inf
  return warpMax(v);
}

} // namespace mtc_cuda

#endif // MTC_RUNTIME_CUDA_KERNELS_COMMON_CUH
