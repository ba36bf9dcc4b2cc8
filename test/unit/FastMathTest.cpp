//===- FastMathTest.cpp - fexp and ftanh on every kind of input -----------===//
//
// Part of mtc.
//
// The CPU kernels' vectorisable exp and tanh (runtime/cpu/FastMath.h) against
// the C library: special values (NaN, +-inf, overflow, underflow, signed
// zeros) give what std::exp / std::tanh give, and finite inputs stay within
// a few ulp. Diverging training (a huge --lr) feeds NaN and inf through these
// functions, so the special values must take a defined path: test/unit's
// CMakeLists.txt also builds this file alone with UndefinedBehaviorSanitizer
// (mtc-fastmath-ubsan, CTest test FastMathUBSan), where a float-to-int
// conversion of NaN or inf aborts the test.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/FastMath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

using mtc::cpu::detail::expSumRow;
using mtc::cpu::detail::fexp;
using mtc::cpu::detail::ftanh;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Inputs through a volatile, so that nothing is folded at compile time and
/// the conversions run (and are instrumented) as in the kernels.
float opaque(float x) {
  volatile float v = x;
  return v;
}

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

TEST(FastMath, ExpSpecialValues) {
  EXPECT_TRUE(std::isnan(fexp(opaque(kNaN))));
  EXPECT_TRUE(std::isnan(fexp(opaque(-kNaN))));
  EXPECT_TRUE(std::isnan(fexp(opaque(fromBits(0x7fa00001u))))); // signalling
  EXPECT_EQ(fexp(opaque(kInf)), kInf);
  EXPECT_EQ(fexp(opaque(-kInf)), 0.0f);
  EXPECT_EQ(fexp(opaque(std::numeric_limits<float>::max())), kInf);
  EXPECT_EQ(fexp(opaque(1e30f)), kInf);
  EXPECT_EQ(fexp(opaque(89.0f)), kInf);
  EXPECT_EQ(fexp(opaque(-std::numeric_limits<float>::max())), 0.0f);
  EXPECT_EQ(fexp(opaque(-1e30f)), 0.0f);
  EXPECT_EQ(fexp(opaque(-88.0f)), 0.0f);
  EXPECT_EQ(fexp(opaque(0.0f)), 1.0f);
  EXPECT_EQ(fexp(opaque(-0.0f)), 1.0f);
  // Tiny arguments: exp(x) rounds to 1.
  EXPECT_EQ(fexp(opaque(std::numeric_limits<float>::denorm_min())), 1.0f);
  EXPECT_EQ(fexp(opaque(-std::numeric_limits<float>::min())), 1.0f);
  EXPECT_EQ(fexp(opaque(1e-30f)), 1.0f);
}

TEST(FastMath, TanhSpecialValues) {
  EXPECT_TRUE(std::isnan(ftanh(opaque(kNaN))));
  EXPECT_EQ(ftanh(opaque(kInf)), 1.0f);
  EXPECT_EQ(ftanh(opaque(-kInf)), -1.0f);
  EXPECT_EQ(ftanh(opaque(1e30f)), 1.0f);
  EXPECT_EQ(ftanh(opaque(-1e30f)), -1.0f);
  EXPECT_EQ(ftanh(opaque(0.0f)), 0.0f);
  EXPECT_EQ(ftanh(opaque(-0.0f)), 0.0f);
  EXPECT_EQ(ftanh(opaque(1e-30f)), 1e-30f);
}

/// Every 4099th float bit pattern (both signs, every exponent): NaN in, NaN
/// out; otherwise within 3 ulp of std::exp in the normal range and exactly
/// 0 / inf where fexp flushes (below -87.3, above 88.7). Between 88.37 and
/// 88.7 the scale 2^128 already overflows, so fexp may give inf where exp
/// is still just below FLT_MAX (as it always has).
TEST(FastMath, ExpMatchesLibmOnFloatSweep) {
  int64_t checked = 0;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
    float x = opaque(fromBits(static_cast<uint32_t>(b)));
    float got = fexp(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(got)) << "bits " << b;
      continue;
    }
    if (x < -87.3f) {
      ASSERT_EQ(got, 0.0f) << x;
      continue;
    }
    if (x > 88.7f) {
      ASSERT_EQ(got, kInf) << x;
      continue;
    }
    double want = std::exp(double(x));
    if (x > 88.37f && got == kInf)
      continue;
    float ulp = std::nextafter(static_cast<float>(want), kInf) -
                static_cast<float>(want);
    ASSERT_LE(std::fabs(got - want), 3.0 * ulp) << "x = " << x;
    ++checked;
  }
  EXPECT_GT(checked, 100000);
}

TEST(FastMath, TanhMatchesLibmOnFloatSweep) {
  for (uint64_t b = 0; b <= 0xffffffffu; b += 4099) {
    float x = opaque(fromBits(static_cast<uint32_t>(b)));
    float got = ftanh(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(got)) << "bits " << b;
      continue;
    }
    double want = std::tanh(double(x));
    ASSERT_NEAR(got, want, 3e-7 * std::fabs(want) + 1e-45) << "x = " << x;
  }
}

/// The row reduction of the softmax and cross-entropy kernels: a NaN or an
/// infinite score makes the sum NaN or inf (as the loss of a diverged run
/// must), and stores what fexp gives for each element.
TEST(FastMath, ExpSumRowWithNonFiniteScores) {
  std::vector<float> x(40, 0.5f), e(40);
  x[3] = kNaN;
  EXPECT_TRUE(std::isnan(expSumRow(x.data(), 40, 0.0f, e.data())));
  EXPECT_TRUE(std::isnan(e[3]));
  EXPECT_EQ(e[4], fexp(0.5f));
  x[3] = kInf;
  EXPECT_EQ(expSumRow(x.data(), 40, 0.0f, nullptr), double(kInf));
  x[3] = -kInf;
  double s = expSumRow(x.data(), 40, 0.0f, e.data());
  EXPECT_EQ(e[3], 0.0f);
  EXPECT_NEAR(s, 39 * std::exp(0.5), 1e-4);
  // Subtracting an infinite maximum (every score -inf, a fully masked row, or
  // inf - inf) gives NaN, not a crash.
  std::fill(x.begin(), x.end(), kInf);
  EXPECT_TRUE(std::isnan(expSumRow(x.data(), 40, kInf, e.data())));
}

} // namespace
