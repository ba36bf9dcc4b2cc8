//===- Float16.h - bf16 and fp16 types for the CUDA emulator ----*- C++ -*-===//
//
// Part of mtc. __nv_bfloat16 / __nv_bfloat162 (cuda_bf16.h) and __half /
// __half2 (cuda_fp16.h) for kernels compiled as host C++. Every conversion
// is bit-identical to the toolkit headers' host implementation, which is also
// what the GPU's cvt instructions compute:
//
//   float -> bf16, fp16   round to nearest, ties to even; subnormals kept;
//                         overflow rounds to infinity; every NaN becomes the
//                         canonical 0x7fff (sign and payload dropped)
//   bf16 -> float         exact (the 16 bits shifted left)
//   fp16 -> float         exact; every NaN becomes 0x7fffffff
//   double -> bf16        rounded once (round-to-odd to float, then RNE)
//
// Arithmetic on bf16/fp16 values is done in float and rounded once; for +, -,
// * and / of two 8-bit (11-bit) significands float's 24 bits make that equal
// to a single correctly rounded operation, i.e. to the GPU's result.
// test/cuda-emu/Float16Test.cpp checks the conversions against a separate
// reference over dense samples of all 2^32 float bit patterns (and against
// the installed cuda_bf16.h / cuda_fp16.h when the toolkit is present).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_CUDA_EMU_FLOAT16_H
#define MTC_CUDA_EMU_FLOAT16_H

#include "cuda_emu/Vector.h"

#include <cmath>
#include <cstring>

namespace mtc::emu::detail {

inline unsigned int floatBits(float f) {
  unsigned int u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bitsFloat(unsigned int u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// float -> bf16 bits, round to nearest even. Adding 0x7fff plus the lowest
/// kept bit rounds the discarded half up exactly when it is above the tie, or
/// a tie with an odd kept part; a carry into the exponent is the correct
/// result (up to infinity).
inline unsigned short floatToBf16Rn(float f) {
  unsigned int u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return 0x7fff;
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// float -> bf16 bits, round toward zero (NaN -> 0x7fff).
inline unsigned short floatToBf16Rz(float f) {
  unsigned int u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return 0x7fff;
  return static_cast<unsigned short>(u >> 16);
}

inline float bf16ToFloat(unsigned short h) {
  return bitsFloat(static_cast<unsigned int>(h) << 16);
}

/// double -> bf16 bits with a single rounding: the double is first rounded
/// to float with round-to-odd (truncate, then set the lowest bit if anything
/// was lost), which makes the second, round-to-nearest-even step exact.
inline unsigned short doubleToBf16Rn(double d) {
  float f = static_cast<float>(d);
  double back = f;
  if (back != d && !std::isnan(d)) {
    unsigned int u = floatBits(f);
    if (std::fabs(back) > std::fabs(d))
      u -= 1; // rounded away from zero: step back toward it
    f = bitsFloat(u | 1u);
  }
  return floatToBf16Rn(f);
}

/// float -> fp16 bits, round to nearest even.
inline unsigned short floatToHalfRn(float f) {
  unsigned int u = floatBits(f);
  unsigned int sign = (u >> 16) & 0x8000u;
  unsigned int a = u & 0x7fffffffu;
  if (a > 0x7f800000u)
    return 0x7fff;      // NaN
  if (a >= 0x477ff000u) // >= 65520 (the tie above 65504 rounds to even: inf)
    return static_cast<unsigned short>(sign | 0x7c00u);
  if (a >= 0x38800000u) { // normal fp16: rebias the exponent, round 13 bits
    unsigned int r = a - 0x38000000u;
    return static_cast<unsigned short>(sign |
                                       ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  // Subnormal fp16 (or zero): the value in units of 2^-24, rounded.
  unsigned int e = a >> 23;
  if (e < 102) // below 2^-25: rounds to zero
    return static_cast<unsigned short>(sign);
  unsigned int m = (a & 0x7fffffu) | 0x800000u;
  unsigned int shift = 126 - e; // 14..24
  unsigned int q = m >> shift;
  unsigned int rem = m & ((1u << shift) - 1);
  unsigned int half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u)))
    ++q;
  return static_cast<unsigned short>(sign | q);
}

/// fp16 bits -> float, exact; NaN -> 0x7fffffff.
inline float halfToFloat(unsigned short h) {
  unsigned int sign = (static_cast<unsigned int>(h) & 0x8000u) << 16;
  unsigned int e = (h >> 10) & 0x1fu;
  unsigned int m = h & 0x3ffu;
  if (e == 0x1f)
    return bitsFloat(m ? 0x7fffffffu : (sign | 0x7f800000u));
  if (e == 0) // zero or subnormal: m * 2^-24, exact in float
    return bitsFloat(sign | floatBits(static_cast<float>(m) * 0x1p-24f));
  return bitsFloat(sign | ((e + 112) << 23) | (m << 13));
}

} // namespace mtc::emu::detail

//===----------------------------------------------------------------------===//
// bf16
//===----------------------------------------------------------------------===//

struct __nv_bfloat16_raw {
  unsigned short x;
};
struct __nv_bfloat162_raw {
  unsigned short x, y;
};

/// bfloat16: 1 sign, 8 exponent, 7 mantissa bits.
struct alignas(2) __nv_bfloat16 {
  unsigned short __x;

  __nv_bfloat16() = default;
  constexpr __nv_bfloat16(__nv_bfloat16_raw r) : __x(r.x) {}
  __nv_bfloat16(float f) : __x(mtc::emu::detail::floatToBf16Rn(f)) {}
  __nv_bfloat16(double d) : __x(mtc::emu::detail::doubleToBf16Rn(d)) {}
  __nv_bfloat16(int v) : __nv_bfloat16(static_cast<double>(v)) {}
  __nv_bfloat16(unsigned int v) : __nv_bfloat16(static_cast<double>(v)) {}
  operator float() const { return mtc::emu::detail::bf16ToFloat(__x); }
  constexpr operator __nv_bfloat16_raw() const { return {__x}; }
};

struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  constexpr __nv_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) : x(a), y(b) {}
  constexpr __nv_bfloat162(__nv_bfloat162_raw r)
      : x(__nv_bfloat16_raw{r.x}), y(__nv_bfloat16_raw{r.y}) {}
  constexpr operator __nv_bfloat162_raw() const { return {x.__x, y.__x}; }
};

typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rz(float f) {
  return __nv_bfloat16_raw{mtc::emu::detail::floatToBf16Rz(f)};
}
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline short __bfloat16_as_short(__nv_bfloat16 h) {
  return static_cast<short>(h.__x);
}
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
  return __nv_bfloat16_raw{u};
}
inline __nv_bfloat16 __short_as_bfloat16(short s) {
  return __nv_bfloat16_raw{static_cast<unsigned short>(s)};
}
inline __nv_bfloat162 __float2bfloat162_rn(float f) {
  return {__nv_bfloat16(f), __nv_bfloat16(f)};
}
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return {__nv_bfloat16(a), __nv_bfloat16(b)};
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 v) {
  return {__nv_bfloat16(v.x), __nv_bfloat16(v.y)};
}
inline float2 __bfloat1622float2(__nv_bfloat162 v) {
  return {float(v.x), float(v.y)};
}
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) {
  return {a, b};
}
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 v) { return v.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 v) { return v.y; }
inline float __low2float(__nv_bfloat162 v) { return float(v.x); }
inline float __high2float(__nv_bfloat162 v) { return float(v.y); }

inline __nv_bfloat16 operator+(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(float(a) + float(b));
}
inline __nv_bfloat16 operator-(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(float(a) - float(b));
}
inline __nv_bfloat16 operator*(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(float(a) * float(b));
}
inline __nv_bfloat16 operator/(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(float(a) / float(b));
}
inline __nv_bfloat16 operator-(__nv_bfloat16 a) {
  return __nv_bfloat16_raw{static_cast<unsigned short>(a.__x ^ 0x8000u)};
}
inline __nv_bfloat16 &operator+=(__nv_bfloat16 &a, __nv_bfloat16 b) {
  return a = a + b;
}
inline __nv_bfloat16 &operator-=(__nv_bfloat16 &a, __nv_bfloat16 b) {
  return a = a - b;
}
inline __nv_bfloat16 &operator*=(__nv_bfloat16 &a, __nv_bfloat16 b) {
  return a = a * b;
}
inline __nv_bfloat16 &operator/=(__nv_bfloat16 &a, __nv_bfloat16 b) {
  return a = a / b;
}
inline bool operator==(__nv_bfloat16 a, __nv_bfloat16 b) {
  return float(a) == float(b);
}
inline bool operator!=(__nv_bfloat16 a, __nv_bfloat16 b) {
  return float(a) != float(b);
}
inline bool operator<(__nv_bfloat16 a, __nv_bfloat16 b) {
  return float(a) < float(b);
}
inline bool operator>(__nv_bfloat16 a, __nv_bfloat16 b) {
  return float(a) > float(b);
}
inline bool operator<=(__nv_bfloat16 a, __nv_bfloat16 b) {
  return float(a) <= float(b);
}
inline bool operator>=(__nv_bfloat16 a, __nv_bfloat16 b) {
  return float(a) >= float(b);
}
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return a + b; }
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return a - b; }
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return a * b; }
inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return -a; }

//===----------------------------------------------------------------------===//
// fp16
//===----------------------------------------------------------------------===//

struct __half_raw {
  unsigned short x;
};
struct __half2_raw {
  unsigned short x, y;
};

/// IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits.
struct alignas(2) __half {
  unsigned short __x;

  __half() = default;
  constexpr __half(__half_raw r) : __x(r.x) {}
  __half(float f) : __x(mtc::emu::detail::floatToHalfRn(f)) {}
  operator float() const { return mtc::emu::detail::halfToFloat(__x); }
  constexpr operator __half_raw() const { return {__x}; }
};

struct alignas(4) __half2 {
  __half x, y;
  __half2() = default;
  constexpr __half2(__half a, __half b) : x(a), y(b) {}
  constexpr __half2(__half2_raw r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}
  constexpr operator __half2_raw() const { return {x.__x, y.__x}; }
};

typedef __half half;
typedef __half2 half2;

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return float(h); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) { return __half_raw{u}; }
inline __half2 __floats2half2_rn(float a, float b) {
  return {__half(a), __half(b)};
}
inline __half2 __float22half2_rn(float2 v) {
  return {__half(v.x), __half(v.y)};
}
inline float2 __half22float2(__half2 v) { return {float(v.x), float(v.y)}; }
inline float __low2float(__half2 v) { return float(v.x); }
inline float __high2float(__half2 v) { return float(v.y); }

inline __half __hadd(__half a, __half b) { return __half(float(a) + float(b)); }
inline __half __hsub(__half a, __half b) { return __half(float(a) - float(b)); }
inline __half __hmul(__half a, __half b) { return __half(float(a) * float(b)); }
inline __half __hneg(__half a) {
  return __half_raw{static_cast<unsigned short>(a.__x ^ 0x8000u)};
}

#endif // MTC_CUDA_EMU_FLOAT16_H
