//===- LinearCrossEntropyTest.cpp - Chunked LM head + loss ------*- C++ -*-===//
//
// Part of mtc. The chunked kernels must equal the unfused composition
// (matmul, softcap, cross-entropy and their gradients) when the rows span
// several chunks, for both weight layouts, with and without softcap, and
// with ignored targets.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace mtc::cpu;

namespace {

struct Case {
  bool transposeW;
  double softcap;
};

class LinearCrossEntropyTest : public ::testing::TestWithParam<Case> {};

TEST_P(LinearCrossEntropyTest, MatchesUnfusedAcrossChunks) {
  const Case c = GetParam();
  const int64_t V = 65536, D = 8;
  const int64_t chunk = linearCrossEntropyChunk(V);
  const int64_t n = 2 * chunk + 5; // three chunks, the last one partial
  ASSERT_EQ(chunk, 16);
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n * D), w(D * V);
  for (float &v : x)
    v = nd(rng);
  for (float &v : w)
    v = 0.5f * nd(rng);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i)
    targets[i] = (i % 7 == 3) ? -1 : static_cast<int32_t>(rng() % V);

  // Unfused reference: logits, softcap, loss and gradients.
  std::vector<float> logits(n * V);
  gemm(false, c.transposeW, n, V, D, 1.0f, x.data(), w.data(), 0.0f,
       logits.data());
  if (c.softcap > 0)
    unary(Unary::Softcap, logits.data(), logits.data(), n * V,
          static_cast<float>(c.softcap));
  int64_t countRef = 0;
  double lossRef =
      crossEntropy(logits.data(), targets.data(), n, V, -1, &countRef);
  std::vector<float> dl(n * V);
  crossEntropyGrad(logits.data(), targets.data(), 0.75f, dl.data(), n, V, -1);
  if (c.softcap > 0)
    for (int64_t i = 0; i < n * V; ++i) {
      float t = static_cast<float>(logits[i] / c.softcap);
      dl[i] *= 1.0f - t * t;
    }
  std::vector<float> dxRef(n * D), dwRef(D * V, 0.0f);
  gemm(false, !c.transposeW, n, D, V, 1.0f, dl.data(), w.data(), 0.0f,
       dxRef.data());
  if (c.transposeW)
    gemm(true, false, V, D, n, 1.0f, dl.data(), x.data(), 0.0f, dwRef.data());
  else
    gemm(true, false, D, V, n, 1.0f, x.data(), dl.data(), 0.0f, dwRef.data());

  int64_t count = 0;
  double loss =
      linearCrossEntropy(x.data(), w.data(), c.transposeW, targets.data(), n, D,
                         V, -1, c.softcap, &count);
  EXPECT_EQ(count, countRef);
  EXPECT_NEAR(loss, lossRef, 1e-6 * std::fabs(lossRef));

  std::vector<float> dx(n * D), dw(D * V, 0.0f);
  linearCrossEntropyGrad(x.data(), w.data(), c.transposeW, targets.data(),
                         0.75f, dx.data(), dw.data(), n, D, V, -1, c.softcap);
  float dxMax = 0, dwMax = 0;
  for (float v : dxRef)
    dxMax = std::max(dxMax, std::fabs(v));
  for (float v : dwRef)
    dwMax = std::max(dwMax, std::fabs(v));
  for (int64_t i = 0; i < n * D; ++i)
    ASSERT_NEAR(dx[i], dxRef[i], 1e-5f * dxMax) << "dx " << i;
  for (int64_t i = 0; i < D * V; ++i)
    ASSERT_NEAR(dw[i], dwRef[i], 1e-5f * dwMax) << "dw " << i;

  // The logits for generation are the unfused ones.
  std::vector<float> gen(n * V);
  linearLogits(x.data(), w.data(), c.transposeW, n, D, V, c.softcap,
               gen.data());
  for (int64_t i = 0; i < n * V; i += 997)
    ASSERT_NEAR(gen[i], logits[i], 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Layouts, LinearCrossEntropyTest,
                         ::testing::Values(Case{false, 0.0}, Case{true, 0.0},
                                           Case{true, 30.0}, Case{false, 2.0}));

TEST(LinearCrossEntropy, AllIgnoredGivesZeroLossAndGradient) {
  const int64_t n = 4, D = 3, V = 5;
  std::vector<float> x(n * D, 1.0f), w(D * V, 0.5f), dx(n * D, 9.0f),
      dw(D * V, 0.0f);
  std::vector<int32_t> targets(n, -1);
  int64_t count = 7;
  EXPECT_EQ(linearCrossEntropy(x.data(), w.data(), false, targets.data(), n, D,
                               V, -1, 0.0, &count),
            0.0);
  EXPECT_EQ(count, 0);
  linearCrossEntropyGrad(x.data(), w.data(), false, targets.data(), 1.0f,
                         dx.data(), dw.data(), n, D, V, -1, 0.0);
  for (float v : dx)
    EXPECT_EQ(v, 0.0f);
  for (float v : dw)
    EXPECT_EQ(v, 0.0f);
}

} // namespace
