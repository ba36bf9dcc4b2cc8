//===- GradBf16Test.cpp - bf16 gradients: conversion, norm, update -------===//
//
// Part of mtc. The numerics of `--grad-dtype bf16` (docs/training.md,
// "Gradient dtype"): train::roundToBf16 rounds as the device copy does
// (device::convertF32ToBF16), the sum of squares of bf16 gradients equals
// the sum over the widened values bit for bit (the norm is that of what
// AdamW reads), and AdamW with bf16 gradients equals AdamW with the rounded
// fp32 ones, so the plain executor (rounding in place) and a step plan
// (bf16 in host memory) train identically.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/CpuDevice.h"
#include "runtime/train/Optimizer.h"
#include "runtime/train/Random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace mtc;
using namespace mtc::train;

namespace {

float widen(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// Gradient-like values: normal at several scales, with ties, denormals,
/// zeros of both signs, infinities and a NaN.
std::vector<float> gradientValues(size_t n, uint64_t seed) {
  std::vector<float> g(n);
  initNormal(g.data(), n, 0.0f, 1e-3f, seed, 0);
  for (size_t i = 0; i < n; i += 97) { // exactly between two bf16 values
    uint32_t u = (bitsOf(g[i]) & 0xffff0000u) | 0x8000u;
    std::memcpy(&g[i], &u, 4);
  }
  const float specials[] = {0.0f,           -0.0f,         1e-40f, -1e-40f,
                            3.0e38f,        -3.0e38f,      1.0f,   -1.00390625f,
                            1.0f + 0x1p-8f, 1.0f + 0x1p-9f};
  for (size_t i = 0; i < sizeof specials / sizeof *specials && i < n; ++i)
    g[i * 13 % n] = specials[i];
  return g;
}

} // namespace

TEST(GradBf16, RoundingIsTheDeviceConversion) {
  std::vector<float> g = gradientValues(200003, 3);
  g[5] = INFINITY;
  g[6] = -INFINITY;
  g[7] = std::nanf("");
  std::vector<uint16_t> h(g.size());
  device::convertF32ToBF16(g.data(), h.data(), static_cast<int64_t>(g.size()));
  std::vector<float> rounded = g;
  ThreadPool pool(3);
  roundToBf16(rounded.data(), rounded.size(), &pool);
  int64_t wrong = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (bitsOf(rounded[i]) != bitsOf(widen(h[i])) && ++wrong <= 10)
      ADD_FAILURE() << std::hex << "fp32 0x" << bitsOf(g[i]) << " rounded to 0x"
                    << bitsOf(rounded[i]) << ", the device gives 0x"
                    << (uint32_t(h[i]) << 16);
  EXPECT_EQ(wrong, 0);
  // Ties go to even, the result is a bf16 (low half zero), and rounding
  // again changes nothing.
  float tieDown = 1.0f + 0x1p-8f, tieUp = 1.0f + 3 * 0x1p-8f;
  roundToBf16(&tieDown, 1);
  roundToBf16(&tieUp, 1);
  EXPECT_EQ(tieDown, 1.0f);
  EXPECT_EQ(tieUp, 1.0f + 4 * 0x1p-8f);
  for (float f : rounded)
    ASSERT_EQ(bitsOf(f) & 0xffffu, std::isnan(f) ? bitsOf(f) & 0xffffu : 0u);
  std::vector<float> twice = rounded;
  roundToBf16(twice.data(), twice.size());
  EXPECT_EQ(std::memcmp(twice.data(), rounded.data(), 4 * g.size()), 0);
}

TEST(GradBf16, NormIsThatOfTheRoundedValues) {
  // Over several 64K-element chunks, and any thread count: the bf16 sum of
  // squares equals the fp32 sum over the widened values bit for bit.
  for (size_t n : {size_t(1), size_t(7), size_t(65536), size_t(300001)}) {
    std::vector<float> g = gradientValues(n, n);
    std::vector<uint16_t> h(n);
    device::convertF32ToBF16(g.data(), h.data(), static_cast<int64_t>(n));
    std::vector<float> widened(n);
    for (size_t i = 0; i < n; ++i)
      widened[i] = widen(h[i]);
    const double want = sumOfSquares(widened.data(), n);
    EXPECT_EQ(sumOfSquaresBf16(h.data(), n), want) << n;
    for (unsigned threads : {2u, 5u}) {
      ThreadPool pool(threads);
      EXPECT_EQ(sumOfSquaresBf16(h.data(), n, &pool), want) << n;
    }
    // What rounding costs the norm: at most 2^-8 relative per value (finite
    // values), so at most about 2^-8 of the norm.
    const double exact = sumOfSquares(g.data(), n);
    if (std::isfinite(exact) && exact > 0) {
      EXPECT_LE(std::fabs(std::sqrt(want) - std::sqrt(exact)),
                0x1p-8 * std::sqrt(exact))
          << n;
    }
  }
}

TEST(GradBf16, AdamWWithBf16GradientsEqualsRoundedFp32) {
  // The deferred update of a step plan (bf16 gradients in host memory) and
  // of the plain executor (fp32 sums rounded in place): identical.
  const size_t n = 200001;
  std::vector<float> p(n), m(n, 0.0f), v(n, 0.0f);
  initNormal(p.data(), n, 0.0f, 0.02f, 9, 0);
  std::vector<float> p2 = p, m2 = m, v2 = v;
  ThreadPool pool(3);
  AdamW opt(AdamWConfig{}, &pool);
  for (int64_t t = 1; t <= 3; ++t) {
    std::vector<float> g = gradientValues(n, 40 + static_cast<uint64_t>(t));
    std::vector<uint16_t> h(n);
    device::convertF32ToBF16(g.data(), h.data(), static_cast<int64_t>(n));
    roundToBf16(g.data(), n, &pool);
    double norm = std::sqrt(sumOfSquaresBf16(h.data(), n, &pool));
    ASSERT_EQ(norm, std::sqrt(sumOfSquares(g.data(), n, &pool)));
    // clipped, 2 micro-batches
    float scale = static_cast<float>(clipScale(norm, 1.0) / 2);
    AdamWTensor bf16{p.data(), m.data(), v.data(), nullptr, n, true, h.data()};
    AdamWTensor fp32{p2.data(), m2.data(), v2.data(), g.data(), n, true};
    opt.step({bf16}, t, 1e-3f, scale);
    opt.step({fp32}, t, 1e-3f, scale);
  }
  EXPECT_EQ(std::memcmp(p.data(), p2.data(), 4 * n), 0);
  EXPECT_EQ(std::memcmp(m.data(), m2.data(), 4 * n), 0);
  EXPECT_EQ(std::memcmp(v.data(), v2.data(), 4 * n), 0);
}
