//===- softmax.cu - Row softmax (CUDA C) ----------------------------------===//
//
// Part of mtc. A demonstration kernel of the CUDA emulator
// (docs/cuda-emulator.md), compiled by NVRTC and run on the CPU by
// test/cuda-emu/KernelsTest.cpp.
//
// y[r, :] = softmax(x[r, :]) over n columns, f32, one block per row
// (blockDim.x a multiple of 32): a block max, exp(x - max) written to y and
// summed, a block sum, y scaled by its inverse. The max is reduced with xor
// shuffles, the sum with down shuffles and a lane-0 broadcast (__shfl_sync).
//
//===----------------------------------------------------------------------===//

namespace {

__device__ __forceinline__ float warpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Lane 0 gets the sum; the others a partial one.
__device__ __forceinline__ float warpSumToLane0(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

/// Combines one value per warp through shared memory; every thread gets the
/// result. `sum` picks + over max.
__device__ float blockReduce(float v, bool sum) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = sum ? warpSumToLane0(v) : warpMax(v);
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  const float identity = sum ? 0.0f : -__int_as_float(0x7f800000);
  v = lane < warps ? partial[lane] : identity;
  v = sum ? __shfl_sync(0xffffffffu, warpSumToLane0(v), 0) : warpMax(v);
  __syncthreads(); // partial[] is free again for the next call
  return v;
}

} // namespace

extern "C" __global__ void __launch_bounds__(1024)
    softmax_f32(const float *__restrict__ x, float *__restrict__ y, int rows,
                int n) {
  const int row = blockIdx.x;
  if (row >= rows)
    return;
  const float *xr = x + static_cast<size_t>(row) * n;
  float *yr = y + static_cast<size_t>(row) * n;

  float m = -__int_as_float(0x7f800000);
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    m = fmaxf(m, xr[j]);
  m = blockReduce(m, /*sum=*/false);

  float s = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = expf(xr[j] - m);
    yr[j] = e;
    s += e;
  }
  const float inv = 1.0f / blockReduce(s, /*sum=*/true);
  for (int j = threadIdx.x; j < n; j += blockDim.x)
    yr[j] *= inv;
}
