//===- RandomTest.cpp - Unit tests of runtime/train/Random ----------------===//
//
// Part of mtc. Philox known answers, determinism whatever the thread count,
// and distribution moments.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Random.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mtc::train;

namespace {

TEST(Philox, KnownAnswers) {
  // Random123's kat_vectors for philox4x32_10.
  auto z = philox4x32({0, 0, 0, 0}, 0, 0);
  EXPECT_EQ(z[0], 0x6627e8d5u);
  EXPECT_EQ(z[1], 0xe169c58du);
  EXPECT_EQ(z[2], 0xbc57ac4cu);
  EXPECT_EQ(z[3], 0x9b00dbd8u);
  auto f = philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                      0xffffffffu, 0xffffffffu);
  EXPECT_EQ(f[0], 0x408f276du);
  EXPECT_EQ(f[1], 0x41c83b0eu);
  EXPECT_EQ(f[2], 0xa20bc7c6u);
  EXPECT_EQ(f[3], 0x6d5451fdu);
}

void moments(const std::vector<float> &x, double &mean, double &var) {
  double s = 0, s2 = 0;
  for (float f : x)
    s += f;
  mean = s / x.size();
  for (float f : x)
    s2 += (f - mean) * (f - mean);
  var = s2 / x.size();
}

TEST(InitNormal, IndependentOfThreadsAndChunking) {
  const size_t n = 300007;
  std::vector<float> a(n), b(n), c(n);
  initNormal(a.data(), n, 0.0f, 0.02f, 42, 7, nullptr);
  ThreadPool pool(4);
  initNormal(b.data(), n, 0.0f, 0.02f, 42, 7, &pool);
  EXPECT_EQ(a, b);
  // A suffix drawn on its own is not the same stream position, but element i
  // of the full draw only depends on i: drawing a prefix gives a prefix.
  std::vector<float> prefix(1001);
  initNormal(prefix.data(), prefix.size(), 0.0f, 0.02f, 42, 7);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), a.begin()));
  initNormal(c.data(), n, 0.0f, 0.02f, 42, 8);
  EXPECT_NE(a, c); // another stream
  initNormal(c.data(), n, 0.0f, 0.02f, 43, 7);
  EXPECT_NE(a, c); // another seed
}

TEST(InitNormal, Moments) {
  const size_t n = 1 << 20;
  std::vector<float> x(n);
  initNormal(x.data(), n, 1.5f, 2.0f, 1, 0);
  double mean, var;
  moments(x, mean, var);
  EXPECT_NEAR(mean, 1.5, 0.01);
  EXPECT_NEAR(var, 4.0, 0.03);
  // Fraction within one sigma ~ 68.27%.
  size_t inside = 0;
  for (float f : x)
    inside += std::fabs(f - 1.5f) < 2.0f;
  EXPECT_NEAR(double(inside) / n, 0.6827, 0.005);
  for (float f : x)
    ASSERT_TRUE(std::isfinite(f));
}

TEST(InitUniform, MomentsAndRange) {
  const size_t n = 1 << 20;
  std::vector<float> x(n), y(n);
  initUniform(x.data(), n, -0.5f, 1.5f, 9, 3);
  ThreadPool pool(3);
  initUniform(y.data(), n, -0.5f, 1.5f, 9, 3, &pool);
  EXPECT_EQ(x, y);
  double mean, var;
  moments(x, mean, var);
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(var, 4.0 / 12.0, 0.003);
  for (float f : x) {
    ASSERT_GE(f, -0.5f);
    ASSERT_LT(f, 1.5f);
  }
}

TEST(Rng, SequentialAndResumable) {
  Rng a(5), b(5), c(6);
  std::vector<uint32_t> xs;
  for (int i = 0; i < 10; ++i)
    xs.push_back(a.next32());
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(b.next32(), xs[i]);
  EXPECT_NE(c.next32(), xs[0]);
  // Restore from the position.
  Rng r(5);
  r.setPosition(7);
  EXPECT_EQ(r.next32(), xs[7]);
  EXPECT_EQ(a.position(), 10u);
}

TEST(Rng, BelowIsUniform) {
  Rng r(1);
  std::vector<int> counts(7, 0);
  const int n = 70000;
  for (int i = 0; i < n; ++i) {
    uint64_t k = r.below(7);
    ASSERT_LT(k, 7u);
    counts[k]++;
  }
  for (int c : counts)
    EXPECT_NEAR(c, n / 7, 400);
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    double z = r.normal();
    s += z;
    s2 += z * z;
  }
  EXPECT_NEAR(s / n, 0.0, 0.02);
  EXPECT_NEAR(s2 / n, 1.0, 0.02);
  for (int i = 0; i < 1000; ++i) {
    double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

} // namespace
