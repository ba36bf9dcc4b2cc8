//===- FastMath.h - Private helpers of the CPU kernels ----------*- C++ -*-===//
//
// Part of mtc. Included by runtime/cpu/*.cpp only (not part of the contract).
//
// fexp: exp(x) for float that the compiler can vectorise (no libm call):
// Cody-Waite reduction x = n ln2 + r, |r| <= ln2 / 2, exp(r) = 1 + r +
// r^2 P(r) with the Cephes expf coefficients (max. rel. error ~2 ulp),
// scaled by 2^n through the exponent bits. Exactly 0 for x < -87.3
// (including -inf: masked scores give 0) and +inf above 88.7; NaN stays NaN
// (without undefined behaviour: NaN never reaches the float-to-int cast).
// ftanh: built on fexp (see below).
//
// MTC_CLONES: hot loops are compiled for AVX-512, AVX2+FMA and the baseline
// and dispatched at load time (the build itself uses no -march flag). On one
// machine the same clone always runs, so results stay bit-reproducible.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CPU_FASTMATH_H
#define MTC_RUNTIME_CPU_FASTMATH_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__clang__)
#define MTC_CLONES                                                             \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MTC_CLONES
#endif
#define MTC_INLINE inline __attribute__((always_inline))

namespace mtc::cpu::detail {

MTC_INLINE float fexp(float x) {
  // Clamp with comparisons that are false for NaN, so that NaN becomes a
  // finite 88.7 here (the result is fixed up below) instead of reaching the
  // float-to-int conversion, which is undefined for NaN. The same values as
  // std::min(std::max(x, -87.3f), 88.7f) for every other input.
  float xc = x < 88.7f ? x : 88.7f;
  xc = xc > -87.3f ? xc : -87.3f;
  float t = xc * 1.44269504088896341f + 12582912.0f; // round to nearest int
  float n = t - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float e = p * (r * r) + r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  float res = e * scale;
  res = x < -87.3f ? 0.0f : res;
  res = x > 88.7f ? std::numeric_limits<float>::infinity() : res;
  res = x != x ? x : res;
  return res;
}

/// tanh(x), vectorisable (Cephes tanhf): x + x^3 P(x^2) for |x| < 0.625,
/// else sign(x) (1 - 2 / (exp(2|x|) + 1)); ~2 ulp, exact +-1 at saturation.
MTC_INLINE float ftanh(float x) {
  float ax = std::fabs(x);
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = p * z * x + x;
  float big = 1.0f - 2.0f / (fexp(2.0f * ax) + 1.0f);
  big = std::copysign(big, x);
  return ax < 0.625f ? small : big;
}

// Row reductions that vectorise without reassociation flags: 16 float lanes
// over blocks of 256 elements, each block's lanes added in a fixed order into
// a double total. The order depends only on n (never on threads or the ISA
// clone), and the float part sums at most 16 terms per lane.
constexpr int64_t kLanes = 16, kBlock = 256;

MTC_INLINE double laneTotal(const float *s) {
  float r = 0.0f;
  for (int l = 0; l < kLanes; ++l)
    r += s[l];
  return double(r);
}

MTC_INLINE double sumRow(const float *x, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t e = std::min(n, b + kBlock), i = b;
    float s[kLanes] = {};
    for (; i + kLanes <= e; i += kLanes)
      for (int l = 0; l < kLanes; ++l)
        s[l] += x[i + l];
    for (int l = 0; i < e; ++i, ++l)
      s[l] += x[i];
    total += laneTotal(s);
  }
  return total;
}

MTC_INLINE double dotRow(const float *x, const float *y, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t e = std::min(n, b + kBlock), i = b;
    float s[kLanes] = {};
    for (; i + kLanes <= e; i += kLanes)
      for (int l = 0; l < kLanes; ++l)
        s[l] += x[i + l] * y[i + l];
    for (int l = 0; i < e; ++i, ++l)
      s[l] += x[i] * y[i];
    total += laneTotal(s);
  }
  return total;
}

/// Sum of (x - c)^2.
MTC_INLINE double sqDevRow(const float *x, float c, int64_t n) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t e = std::min(n, b + kBlock), i = b;
    float s[kLanes] = {};
    for (; i + kLanes <= e; i += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        float d = x[i + l] - c;
        s[l] += d * d;
      }
    for (int l = 0; i < e; ++i, ++l) {
      float d = x[i] - c;
      s[l] += d * d;
    }
    total += laneTotal(s);
  }
  return total;
}

MTC_INLINE float maxRow(const float *x, int64_t n) {
  float m[kLanes];
  for (int l = 0; l < kLanes; ++l)
    m[l] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l)
      m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
  for (int l = 0; i < n; ++i, ++l)
    m[l] = x[i] > m[l] ? x[i] : m[l];
  float r = m[0];
  for (int l = 1; l < kLanes; ++l)
    r = m[l] > r ? m[l] : r;
  return r;
}

/// sum_i exp(x_i - sub); stores the exps to e (may alias x) if e != null.
MTC_INLINE double expSumRow(const float *x, int64_t n, float sub, float *e) {
  double total = 0.0;
  for (int64_t b = 0; b < n; b += kBlock) {
    int64_t end = std::min(n, b + kBlock), i = b;
    float s[kLanes] = {};
    if (e) {
      for (; i + kLanes <= end; i += kLanes)
        for (int l = 0; l < kLanes; ++l) {
          float v = fexp(x[i + l] - sub);
          e[i + l] = v;
          s[l] += v;
        }
      for (int l = 0; i < end; ++i, ++l) {
        float v = fexp(x[i] - sub);
        e[i] = v;
        s[l] += v;
      }
    } else {
      for (; i + kLanes <= end; i += kLanes)
        for (int l = 0; l < kLanes; ++l)
          s[l] += fexp(x[i + l] - sub);
      for (int l = 0; i < end; ++i, ++l)
        s[l] += fexp(x[i] - sub);
    }
    total += laneTotal(s);
  }
  return total;
}

} // namespace mtc::cpu::detail

#endif // MTC_RUNTIME_CPU_FASTMATH_H
