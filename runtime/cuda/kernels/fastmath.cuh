//===- fastmath.cuh - runtime/cpu's exp and tanh on the GPU -----*- CUDA
//-*-===//
//
// Part of mtc. The CPU kernels (runtime/cpu/FastMath.h) compute exp with
// detail::fexp and tanh with detail::ftanh, not with libm; their edge
// behaviour is part of the semantics a CUDA kernel must reproduce: fexp is
// exactly 0 below -87.3 (masked scores, sigmoid's far tail) and +inf above
// 88.7 (already from 88.38 on, where 2^n overflows), ftanh is exactly +-1 at
// saturation. These are the same algorithms, term by term (Cody-Waite
// reduction plus the Cephes polynomials), so the GPU agrees with the CPU to
// a few ulp everywhere instead of only where CUDA's expf/tanhf and the CPU's
// approximations happen to agree. nvcc may contract the products into FMAs,
// which only makes the reduction more accurate.
//
// Used by elementwise.cu (Exp, Silu, Sigmoid, Tanh, GeluTanh, Softcap) and
// reduce.cu (softmax).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_KERNELS_FASTMATH_CUH
#define MTC_RUNTIME_CUDA_KERNELS_FASTMATH_CUH

namespace mtc_cuda {

/// exp(x) as runtime/cpu's detail::fexp (~2 ulp; 0 below -87.3, +inf above
/// 88.7, NaN stays NaN).
__device__ __forceinline__ float fexp(float x) {
  // Comparisons false for NaN: NaN is clamped to a finite value here (so the
  // float-to-int conversion below stays defined) and restored at the end.
  float xc = x < 88.7f ? x : 88.7f;
  xc = xc > -87.3f ? xc : -87.3f;
  const float t = xc * 1.44269504088896341f + 12582912.0f; // round to int
  const float n = t - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * (r * r) + r + 1.0f;
  const float scale = __int_as_float((static_cast<int>(n) + 127) << 23);
  float res = e * scale;
  res = x < -87.3f ? 0.0f : res;
  res = x > 88.7f ? __int_as_float(0x7f800000) : res; // +inf
  return x != x ? x : res;
}

/// tanh(x) as runtime/cpu's detail::ftanh: x + x^3 P(x^2) for |x| < 0.625,
/// else sign(x) (1 - 2 / (exp(2|x|) + 1)).
__device__ __forceinline__ float ftanh(float x) {
  const float ax = fabsf(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = copysignf(1.0f - 2.0f / (fexp(2.0f * ax) + 1.0f), x);
  return ax < 0.625f ? small : big;
}

} // namespace mtc_cuda

#endif // MTC_RUNTIME_CUDA_KERNELS_FASTMATH_CUH
