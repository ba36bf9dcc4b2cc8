//===- rope.cu - Rotary position embedding (CUDA C) -----------------------===//
//
// Part of mtc. The CUDA counterpart of cpu::rope (runtime/cpu/Attention.cpp),
// with the same semantics: rotate-half over the first `rot` dims of every
// head, pairs (i, i + rot/2), position s + posOffset.
//
// Entries (T = float for _f32, bf16 for _bf16):
//
//   rope_f32 / rope_bf16(const T *x, T *y, const double *invFreq,
//                        int rows, int S, int H, int D, int rot,
//                        long long posOffset, int inverse)
//     x, y     [B, S, H, D] contiguous; rows = B * S. y may alias x (in
//              place); otherwise they must not overlap.
//     invFreq  [rot / 2] doubles in device memory: cpu::ropeInvFreq(p, rot),
//              the frequencies with llama3 scaling already applied, computed
//              on the host exactly as the CPU backend does.
//     rot      cpu::ropeRotaryDims(p, D): even, 0 <= rot <= D.
//     inverse  nonzero: rotate by -angle (the inverse and the VJP).
//   grid  (rows): one block per (b, s)
//   block (any, 1..1024; 128 is a good choice)
//   dynamic shared memory: rot * sizeof(float) bytes (the cos and sin rows)
//
//   rope_freqs_f64(double *table, RopeFreqChunk chunk)
//     table[chunk.first + i] = chunk.value[i] for i < chunk.count
//     (shapes.cuh): how the host's cpu::ropeInvFreq table reaches device
//     memory without a host copy (runtime/cuda/ops/Rope.cpp); grid 1, block
//     kRopeFreqChunk (256), no dynamic shared memory.
//
// Guarantees: y[i] = x[i] c - x[i + h] s and y[i + h] = x[i + h] c + x[i] s
// for i < h = rot / 2, with c = (float)cos(a), s = (float)(+-sin(a)) and
// a = (double)(s + posOffset) * invFreq[i] computed in double, as the CPU
// backend's table; the products in fp32 (the GPU may contract them into
// FMAs: fp32 results agree with the CPU to a few ulp of |x[i]| + |x[i+h]|).
// Dims >= rot are copied unchanged (skipped when y == x). bf16 loads widen
// to fp32, stores round to nearest even. Every element is read and written
// by one thread, which reads both elements of a pair before writing either:
// the in-place case is safe and the result independent of the schedule.
//
//===----------------------------------------------------------------------===//
#include "common.cuh"
#include "shapes.cuh"

namespace {

using namespace mtc_cuda;

template <typename T>
__device__ __forceinline__ void
ropeRow(const T *x, T *y, const double *invFreq, int S, int H, int D, int rot,
        long long posOffset, bool inverse, float *table) {
  const long long row = blockIdx.x;
  const int half = rot / 2;
  float *cosT = table, *sinT = table + half;
  // One angle per pair, in double as the CPU's table: both backends then
  // round the same cos / sin to fp32.
  const double pos = static_cast<double>(row % S + posOffset);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const double a = pos * invFreq[i];
    const double sn = sin(a);
    cosT[i] = static_cast<float>(cos(a));
    sinT[i] = static_cast<float>(inverse ? -sn : sn);
  }
  __syncthreads();

  const T *xr = x + row * H * D;
  T *yr = y + row * H * D;
  const int pairs = H * half;
  for (int k = threadIdx.x; k < pairs; k += blockDim.x) {
    const int h = k / half, i = k - h * half;
    const long long at = static_cast<long long>(h) * D + i;
    const float a = toFloat(xr[at]), b = toFloat(xr[at + half]);
    const float c = cosT[i], s = sinT[i];
    yr[at] = fromFloat<T>(a * c - b * s);
    yr[at + half] = fromFloat<T>(b * c + a * s);
  }
  if (xr == yr || rot == D)
    return;
  const int pass = D - rot, copies = H * pass;
  for (int k = threadIdx.x; k < copies; k += blockDim.x) {
    const int h = k / pass, i = k - h * pass;
    const long long at = static_cast<long long>(h) * D + rot + i;
    yr[at] = xr[at];
  }
}

} // namespace

extern "C" __global__ void rope_f32(const float *x, float *y,
                                    const double *invFreq, int rows, int S,
                                    int H, int D, int rot, long long posOffset,
                                    int inverse) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (static_cast<int>(blockIdx.x) >= rows)
    return;
  ropeRow<float>(x, y, invFreq, S, H, D, rot, posOffset, inverse != 0,
                 reinterpret_cast<float *>(smem));
}

extern "C" __global__ void rope_bf16(const mtc_cuda::bf16 *x, mtc_cuda::bf16 *y,
                                     const double *invFreq, int rows, int S,
                                     int H, int D, int rot, long long posOffset,
                                     int inverse) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (static_cast<int>(blockIdx.x) >= rows)
    return;
  ropeRow<mtc_cuda::bf16>(x, y, invFreq, S, H, D, rot, posOffset, inverse != 0,
                          reinterpret_cast<float *>(smem));
}

extern "C" __global__ void rope_freqs_f64(double *table,
                                          mtc_cuda::RopeFreqChunk chunk) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < chunk.count)
    table[chunk.first + i] = chunk.value[i];
}
