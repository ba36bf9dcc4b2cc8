//===- fused.cuh - What the kernels of mt.fused regions share ----*- C++ -*-===//
//
// Part of mtc. The compiler emits one CUDA C kernel per distinct mt.fused
// region (compiler/Target/CudaKernels.h); the emitted text includes this
// header and writes each region's ops as calls of the functions below, with
// the formulas of the library kernels (elementwise.cu) and so of the CPU
// runtime (runtime/cpu/Elementwise.cpp): fexp/ftanh from fastmath.cuh,
// sigmoid = 1 / (1 + fexp(-x)), erff, logf, sqrtf. Storage is f32 or bf16
// (common.cuh's toFloat / fromFloat), arithmetic fp32.
//
// Every function f of lib/Bundle/UnaryFns.def has two here, named after its
// enumerator in lowerCamelCase: f(x) and fGrad(x, dy) = dy * f'(x), with the
// parameter last for those that take one (softcap(x, cap)); a fused region
// calls them by those names.
//
// Element kernels walk [0, n) in steps of V consecutive elements per thread
// (V = 16 bytes of the narrowest stored type: 4 when every element-indexed
// tensor is f32, 8 with a bf16 one); loadElems / storeElems move the V
// elements of an element-indexed tensor with 16-byte loads and stores when
// the pointer is 16-byte aligned and the step is whole, else one element at
// a time (the tail).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_KERNELS_FUSED_CUH
#define MTC_RUNTIME_CUDA_KERNELS_FUSED_CUH

#include "common.cuh"
#include "fastmath.cuh"
#include "vector.cuh"

namespace mtc_fused {

using mtc_cuda::bf16;
using mtc_cuda::fexp;
using mtc_cuda::fromFloat;
using mtc_cuda::ftanh;
using mtc_cuda::toFloat;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

__device__ __forceinline__ float neg(float x) { return -x; }
__device__ __forceinline__ float exp(float x) { return fexp(x); }
__device__ __forceinline__ float log(float x) { return logf(x); }
__device__ __forceinline__ float tanh(float x) { return ftanh(x); }
__device__ __forceinline__ float sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ float square(float x) { return x * x; }
__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + fexp(-x));
}
__device__ __forceinline__ float silu(float x) { return x * sigmoid(x); }
__device__ __forceinline__ float relu(float x) { return x > 0.0f ? x : 0.0f; }
__device__ __forceinline__ float rsqrt(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ float geluErf(float x) {
  return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
}
__device__ __forceinline__ float geluTanh(float x) {
  return 0.5f * x * (1.0f + ftanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float softcap(float x, float p) {
  return p * ftanh(x / p);
}
__device__ __forceinline__ float relu2(float x) {
  const float r = relu(x);
  return r * r;
}

/// dy * f'(x) for unary_grad's kinds.
__device__ __forceinline__ float negGrad(float, float g) { return -g; }
__device__ __forceinline__ float expGrad(float x, float g) {
  return g * fexp(x);
}
__device__ __forceinline__ float logGrad(float x, float g) { return g / x; }
__device__ __forceinline__ float siluGrad(float x, float g) {
  const float s = sigmoid(x);
  return g * s * (1.0f + x * (1.0f - s));
}
__device__ __forceinline__ float reluGrad(float x, float g) {
  return x > 0.0f ? g : 0.0f;
}
__device__ __forceinline__ float sigmoidGrad(float x, float g) {
  const float s = sigmoid(x);
  return g * s * (1.0f - s);
}
__device__ __forceinline__ float tanhGrad(float x, float g) {
  const float t = ftanh(x);
  return g * (1.0f - t * t);
}
__device__ __forceinline__ float rsqrtGrad(float x, float g) {
  const float r = 1.0f / sqrtf(x);
  return g * (-0.5f * r * r * r);
}
__device__ __forceinline__ float sqrtGrad(float x, float g) {
  return g * (0.5f / sqrtf(x));
}
__device__ __forceinline__ float squareGrad(float x, float g) {
  return g * (2.0f * x);
}
__device__ __forceinline__ float geluErfGrad(float x, float g) {
  const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
  const float pdf = kInvSqrt2Pi * fexp(-0.5f * x * x);
  return g * (cdf + x * pdf);
}
__device__ __forceinline__ float geluTanhGrad(float x, float g) {
  const float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  const float t = ftanh(u);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * x * x);
  return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
}
__device__ __forceinline__ float softcapGrad(float x, float g, float p) {
  const float t = ftanh(x / p);
  return g * (1.0f - t * t);
}
__device__ __forceinline__ float relu2Grad(float x, float g) {
  return g * (2.0f * relu(x));
}

/// Whether every pointer of the list is 16-byte aligned.
__device__ __forceinline__ bool aligned16() { return true; }
template <typename P, typename... R>
__device__ __forceinline__ bool aligned16(const P *p, const R *...rest) {
  return mtc_cuda::aligned16(p) && aligned16(rest...);
}

/// v[j] = p[base + j] for j < V (elements at or past n read as 0); 16-byte
/// loads when \p vec and the whole step lies below n.
template <int V, typename T>
__device__ __forceinline__ void loadElems(const T *__restrict__ p,
                                          long long base, long long n,
                                          bool vec, float (&v)[V]) {
  constexpr int kPack = 16 / sizeof(T);
  static_assert(V % kPack == 0, "a step is whole 16-byte packs");
  if (vec && base + V <= n) {
#pragma unroll
    for (int q = 0; q < V / kPack; ++q) {
      const mtc_cuda::Pack<T> pk = mtc_cuda::load16(p + base + q * kPack);
#pragma unroll
      for (int j = 0; j < kPack; ++j)
        v[q * kPack + j] = toFloat(pk.v[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j)
      v[j] = base + j < n ? toFloat(p[base + j]) : 0.0f;
  }
}

/// p[base + j] = v[j] for j < V and base + j < n, as loadElems.
template <int V, typename T>
__device__ __forceinline__ void storeElems(T *__restrict__ p, long long base,
                                           long long n, bool vec,
                                           const float (&v)[V]) {
  constexpr int kPack = 16 / sizeof(T);
  static_assert(V % kPack == 0, "a step is whole 16-byte packs");
  if (vec && base + V <= n) {
#pragma unroll
    for (int q = 0; q < V / kPack; ++q) {
      mtc_cuda::Pack<T> pk;
#pragma unroll
      for (int j = 0; j < kPack; ++j)
        pk.v[j] = fromFloat<T>(v[q * kPack + j]);
      mtc_cuda::store16(p + base + q * kPack, pk);
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (base + j < n)
        p[base + j] = fromFloat<T>(v[j]);
  }
}

} // namespace mtc_fused

#endif // MTC_RUNTIME_CUDA_KERNELS_FUSED_CUH
