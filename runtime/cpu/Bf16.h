//===- Bf16.h - bf16 storage for the fp32 CPU kernels ----------*- C++ -*-===//
//
// Part of mtc. Under a bf16 step plan the CPU device stores weights and
// activations as bf16 (the top 16 bits of an IEEE fp32) and computes in fp32
// (docs/cuda.md, "Precisions"; docs/runtime.md, "bf16 plans on the CPU
// device"). These are the conversions at that boundary: widening is exact,
// narrowing rounds to nearest even, as the CUDA kernels' stores
// (`__float2bfloat16_rn`) and the device's f32 -> bf16 copies do; a NaN stays
// a quiet NaN of the same sign, infinities stay infinite.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CPU_BF16_H
#define MTC_RUNTIME_CPU_BF16_H

#include <cstdint>
#include <cstring>

namespace mtc::cpu {

/// \p x rounded to the nearest bf16 (ties to even), as its 16 bits.
inline uint16_t toBF16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep the sign, force quiet
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// The fp32 value of the bf16 bits \p h (exact).
inline float fromBF16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

/// \p n bf16 values of \p src widened to fp32 into \p dst (exact).
void widenBF16(const uint16_t *src, float *dst, int64_t n);
/// \p n fp32 values of \p src rounded to bf16 into \p dst (nearest even).
void narrowToBF16(const float *src, uint16_t *dst, int64_t n);
/// \p n fp32 values of \p src rounded to bf16 and widened back into \p dst
/// (the value a bf16 store and load would give; \p dst may be \p src).
void roundThroughBF16(const float *src, float *dst, int64_t n);

} // namespace mtc::cpu

#endif // MTC_RUNTIME_CPU_BF16_H
