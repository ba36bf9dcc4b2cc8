//===- OptimizerTest.cpp - Unit tests of runtime/train/Optimizer ----------===//
//
// Part of mtc. AdamW against a naive scalar (double) reference, thread-count
// independence, deterministic sums of squares and the clipping scale.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Optimizer.h"
#include "runtime/train/Random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace mtc::train;

namespace {

struct State {
  std::vector<float> p, m, v, g;
  explicit State(size_t n, uint64_t seed) : p(n), m(n, 0.0f), v(n, 0.0f), g(n) {
    initNormal(p.data(), n, 0.0f, 1.0f, seed, 0);
  }
  AdamWTensor tensor(bool decay) {
    return {p.data(), m.data(), v.data(), g.data(), p.size(), decay};
  }
};

/// The textbook AdamW (PyTorch formulation) in double precision.
void naiveAdamW(std::vector<double> &p, std::vector<double> &m,
                std::vector<double> &v, const std::vector<float> &g,
                const AdamWConfig &c, int64_t t, double lr, double scale,
                bool decay) {
  double bc1 = 1 - std::pow(double(c.beta1), double(t));
  double bc2 = 1 - std::pow(double(c.beta2), double(t));
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = double(g[i]) * scale;
    m[i] = c.beta1 * m[i] + (1 - double(c.beta1)) * gi;
    v[i] = c.beta2 * v[i] + (1 - double(c.beta2)) * gi * gi;
    if (decay)
      p[i] *= 1 - lr * c.weightDecay;
    double mhat = m[i] / bc1, vhat = v[i] / bc2;
    p[i] -= lr * mhat / (std::sqrt(vhat) + c.eps);
  }
}

TEST(AdamW, MatchesNaiveReference) {
  const size_t n = 200003; // several chunks and a ragged tail
  AdamWConfig cfg;
  cfg.weightDecay = 0.1f;
  for (bool decay : {true, false}) {
    State s(n, 7);
    std::vector<double> p(s.p.begin(), s.p.end()), m(n, 0), v(n, 0);
    ThreadPool pool(3);
    AdamW opt(cfg, &pool);
    for (int64_t t = 1; t <= 5; ++t) {
      initNormal(s.g.data(), n, 0.0f, 0.5f, 99, static_cast<uint64_t>(t));
      float lr = 1e-3f * static_cast<float>(t);
      float scale = t == 3 ? 0.25f : 1.0f;
      opt.step({s.tensor(decay)}, t, lr, scale);
      naiveAdamW(p, m, v, s.g, cfg, t, lr, scale, decay);
    }
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
      double err = std::fabs(s.p[i] - p[i]) / std::max(1.0, std::fabs(p[i]));
      worst = std::max(worst, err);
    }
    EXPECT_LT(worst, 1e-6) << "decay " << decay;
  }
}

TEST(AdamW, FirstStepMovesByLr) {
  // At t = 1, m_hat = g and v_hat = g^2: every parameter moves by ~lr.
  AdamWConfig cfg;
  cfg.weightDecay = 0;
  std::vector<float> p = {1, 2, 3}, m(3), v(3), g = {0.5f, -4.0f, 1e-3f};
  AdamW opt(cfg, nullptr);
  opt.step(AdamWTensor{p.data(), m.data(), v.data(), g.data(), 3, true}, 1,
           0.01f);
  EXPECT_NEAR(p[0], 0.99f, 1e-6);
  EXPECT_NEAR(p[1], 2.01f, 1e-6);
  EXPECT_NEAR(p[2], 2.99f, 1e-5);
}

TEST(AdamW, DecoupledDecayWithZeroGradient) {
  AdamWConfig cfg;
  cfg.weightDecay = 0.5f;
  std::vector<float> p = {2.0f}, m = {0}, v = {0}, g = {0};
  AdamW opt(cfg, nullptr);
  opt.step(AdamWTensor{p.data(), m.data(), v.data(), g.data(), 1, true}, 1,
           0.1f);
  EXPECT_FLOAT_EQ(p[0], 2.0f * (1 - 0.1f * 0.5f));
  std::vector<float> q = {2.0f};
  opt.step(AdamWTensor{q.data(), m.data(), v.data(), g.data(), 1, false}, 1,
           0.1f);
  EXPECT_EQ(q[0], 2.0f);
}

TEST(AdamW, SameResultForAnyThreadCount) {
  const size_t n = 300001;
  std::vector<std::vector<float>> results;
  for (unsigned threads : {1u, 2u, 5u}) {
    State a(n, 3), b(n / 3, 4);
    ThreadPool pool(threads);
    AdamW opt(AdamWConfig{}, &pool);
    for (int64_t t = 1; t <= 3; ++t) {
      initNormal(a.g.data(), a.g.size(), 0, 1, 5, t);
      initNormal(b.g.data(), b.g.size(), 0, 1, 6, t);
      opt.step({a.tensor(true), b.tensor(false)}, t, 3e-4f, 0.5f);
    }
    a.p.insert(a.p.end(), b.p.begin(), b.p.end());
    a.p.insert(a.p.end(), a.v.begin(), a.v.end());
    results.push_back(a.p);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(SumOfSquares, DeterministicAndAccurate) {
  const size_t n = 1000003;
  std::vector<float> x(n);
  initUniform(x.data(), n, -1.0f, 1.0f, 11, 0);
  double ref = 0;
  long double exact = 0;
  for (float f : x)
    exact += static_cast<long double>(f) * f;
  ref = static_cast<double>(exact);
  double serial = sumOfSquares(x.data(), n, nullptr);
  EXPECT_NEAR(serial, ref, 1e-12 * ref);
  for (unsigned threads : {2u, 3u, 8u}) {
    ThreadPool pool(threads);
    EXPECT_EQ(sumOfSquares(x.data(), n, &pool), serial) << threads;
  }
  EXPECT_EQ(sumOfSquares(x.data(), 0), 0.0);
  float three[3] = {1, 2, 3};
  EXPECT_EQ(sumOfSquares(three, 3), 14.0);
}

TEST(Clipping, Scale) {
  EXPECT_EQ(clipScale(5.0, 1.0), 1.0 / (5.0 + 1e-6));
  EXPECT_EQ(clipScale(0.5, 1.0), 1.0);
  // At or just under the limit nothing is clipped (maxNorm / (norm + 1e-6)
  // would be just under 1 there).
  EXPECT_EQ(clipScale(1.0, 1.0), 1.0);
  EXPECT_EQ(clipScale(1.0 - 5e-7, 1.0), 1.0);
  EXPECT_LT(clipScale(1.0 + 1e-9, 1.0), 1.0);
  EXPECT_EQ(clipScale(5.0, 0.0), 1.0); // clipping off
  EXPECT_EQ(clipScale(NAN, 1.0), 1.0);
  EXPECT_EQ(clipScale(INFINITY, 1.0), 1.0);
}

TEST(Clipping, ScaleInsideUpdateEqualsScaledGradients) {
  // Clipping inside the update == updating with pre-scaled gradients.
  const size_t n = 1000;
  State a(n, 1), b(n, 1);
  initNormal(a.g.data(), n, 0, 3, 2, 0);
  for (size_t i = 0; i < n; ++i)
    b.g[i] = a.g[i];
  double norm = std::sqrt(sumOfSquares(a.g.data(), n));
  float scale = static_cast<float>(clipScale(norm, 1.0));
  ASSERT_LT(scale, 1.0f);
  for (float &g : b.g)
    g *= scale;
  AdamW opt(AdamWConfig{}, nullptr);
  opt.step({a.tensor(true)}, 1, 1e-3f, scale);
  opt.step({b.tensor(true)}, 1, 1e-3f, 1.0f);
  EXPECT_EQ(a.p, b.p);
  EXPECT_EQ(a.m, b.m);
}

TEST(ThreadPool, RunsEveryTaskOnce) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.numThreads(), 4u);
  for (int round = 0; round < 50; ++round) {
    std::vector<int> hits(1000, 0);
    pool.parallelFor(hits.size(), [&](size_t i) { hits[i]++; });
    for (int h : hits)
      ASSERT_EQ(h, 1);
  }
  pool.parallelFor(0, [](size_t) { FAIL(); });
}

} // namespace
