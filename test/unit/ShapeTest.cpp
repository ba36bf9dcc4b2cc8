//===- ShapeTest.cpp - Unit tests of the shape rules ----------------------===//
//
// Part of mtc. Each rule of lib/Support/Shape.h with accepted and rejected
// shapes; the messages are the ones users see (after "shape mismatch in ...").
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Shape.h"

#include <gtest/gtest.h>

using namespace mtc;

namespace {

/// Passes when \p r is ok; otherwise fails with the rule's message.
template <typename R> testing::AssertionResult accepted(const R &r) {
  if (r.ok())
    return testing::AssertionSuccess();
  return testing::AssertionFailure() << r.message();
}

/// The result of an accepted rule (a default value after a reported failure).
template <typename T> T value(Expected<T> r) {
  EXPECT_TRUE(accepted(r));
  return r.ok() ? std::move(r).value() : T();
}

/// The message of a rejected rule (empty after a reported failure).
template <typename R> std::string rejected(const R &r) {
  EXPECT_FALSE(r.ok()) << "the rule accepted its input";
  return r.message();
}

constexpr Dim B = kDimB;
constexpr Dim S = kDimS;
constexpr Dim T = kDimT;

TEST(ShapeFormat, DimsAndShapes) {
  EXPECT_EQ(formatDim(B), "B");
  EXPECT_EQ(formatDim(S), "S");
  EXPECT_EQ(formatDim(T), "T");
  EXPECT_EQ(formatDim(256), "256");
  EXPECT_EQ(formatShape({}), "[]");
  EXPECT_EQ(formatShape({B, S, 256}), "[B, S, 256]");
  EXPECT_EQ(symbolicDimByName("B"), B);
  EXPECT_EQ(symbolicDimByName("S"), S);
  EXPECT_EQ(symbolicDimByName("T"), T);
  EXPECT_EQ(symbolicDimByName("dim"), 0);
  EXPECT_TRUE(isSymbolic(B));
  EXPECT_FALSE(isSymbolic(1));
  EXPECT_STREQ(dtypeName(DType::F32), "f32");
  EXPECT_STREQ(dtypeName(DType::BF16), "bf16");
  EXPECT_STREQ(dtypeName(DType::I32), "i32");
}

TEST(ShapeRules, Broadcast) {
  EXPECT_EQ(value(rules::broadcast({B, S, 256}, {256})), (Shape{B, S, 256}));
  EXPECT_EQ(value(rules::broadcast({B, S, 256}, {})), (Shape{B, S, 256}));
  EXPECT_EQ(value(rules::broadcast({B, S, 1}, {B, S, 64})), (Shape{B, S, 64}));
  // A static 1 stretches against a symbolic dimension.
  EXPECT_EQ(value(rules::broadcast({1, S, 8}, {B, 1, 8})), (Shape{B, S, 8}));

  EXPECT_EQ(rejected(rules::broadcast({B, S, 256}, {B, S, 128})),
            "cannot broadcast [B, S, 256] and [B, S, 128]");
  // B only matches B.
  EXPECT_EQ(rejected(rules::broadcast({B, 8}, {S, 8})),
            "cannot broadcast [B, 8] and [S, 8]");
  EXPECT_FALSE(rules::broadcast({T, 8}, {B, 8}).ok());
}

TEST(ShapeRules, MatMul) {
  EXPECT_EQ(value(rules::matmul({B, S, 256}, {256, 512}, nullptr)),
            (Shape{B, S, 512}));
  EXPECT_EQ(value(rules::matmul({256}, {256, 8}, nullptr)), (Shape{8}));
  // Batched: equal leading dimensions.
  EXPECT_EQ(value(rules::matmul({B, 4, S, 32}, {B, 4, 32, S}, nullptr)),
            (Shape{B, 4, S, S}));
  Shape bias = {512};
  EXPECT_TRUE(accepted(rules::matmul({B, S, 256}, {256, 512}, &bias)));

  EXPECT_EQ(rejected(rules::matmul({B, S, 256}, {128, 512}, nullptr)),
            "matmul inner dimensions differ: [B, S, 256] @ [128, 512]");
  EXPECT_EQ(rejected(rules::matmul({B, 4, S, 32}, {B, 2, 32, S}, nullptr)),
            "batched matmul needs equal leading dimensions: "
            "[B, 4, S, 32] @ [B, 2, 32, S]");
  EXPECT_EQ(rejected(rules::matmul({B, S, 256}, {256}, nullptr)),
            "matmul needs [.., K] @ [K, N], got [B, S, 256] @ [256]");
  EXPECT_FALSE(rules::matmul({}, {2, 2}, nullptr).ok());
  Shape badBias = {256};
  EXPECT_EQ(rejected(rules::matmul({B, S, 256}, {256, 512}, &badBias)),
            "matmul bias must be [512], got [256]");
}

TEST(ShapeRules, AxisAndReduce) {
  EXPECT_EQ(value(rules::axis(-1, 3)), 2u);
  EXPECT_EQ(value(rules::axis(0, 3)), 0u);
  EXPECT_EQ(rejected(rules::axis(3, 3)), "axis 3 is out of range for rank 3");
  EXPECT_FALSE(rules::axis(-4, 3).ok());
  EXPECT_FALSE(rules::axis(0, 0).ok());

  EXPECT_EQ(value(rules::reduce({B, S, 64}, -1, false)), (Shape{B, S}));
  EXPECT_EQ(value(rules::reduce({B, S, 64}, 2, true)), (Shape{B, S, 1}));
  EXPECT_EQ(value(rules::reduce({64}, 0, false)), (Shape{}));
  EXPECT_EQ(rejected(rules::reduce({B, S}, 2, false)),
            "axis 2 is out of range for rank 2 of [B, S]");
}

TEST(ShapeRules, Embedding) {
  EXPECT_EQ(value(rules::embedding({B, S}, {256, 64})), (Shape{B, S, 64}));
  EXPECT_EQ(rejected(rules::embedding({B, S}, {256})),
            "embedding table must be [V, D], got [256]");
}

TEST(ShapeRules, Reshape) {
  EXPECT_TRUE(accepted(rules::reshape({B, S, 256}, {B, S, 8, 32})));
  EXPECT_TRUE(accepted(rules::reshape({B, S, 8, 32}, {B, S, 256})));
  EXPECT_TRUE(accepted(rules::reshape({B, S, 4}, {S, B, 2, 2}))); // multiset
  EXPECT_TRUE(accepted(rules::reshape({}, {1, 1})));

  EXPECT_EQ(rejected(rules::reshape({B, S, 256}, {B, S, 8, 16})),
            "cannot reshape [B, S, 256] to [B, S, 8, 16]: element "
            "counts differ (256 vs 128)");
  EXPECT_EQ(
      rejected(rules::reshape({B, S, 256}, {B, 256})),
      "cannot reshape [B, S, 256] to [B, 256]: symbolic dimensions differ");
  EXPECT_FALSE(rules::reshape({B, S}, {B, S, S}).ok());
  EXPECT_FALSE(rules::reshape({B, 8}, {T, 8}).ok());
}

TEST(ShapeRules, Transpose) {
  EXPECT_EQ(value(rules::transpose({B, S, 4, 32}, {0, 2, 1, 3})),
            (Shape{B, 4, S, 32}));
  EXPECT_EQ(value(rules::transpose({256, 64}, {1, 0})), (Shape{64, 256}));
  EXPECT_EQ(rejected(rules::transpose({256, 64}, {0, 0})),
            "transpose permutation [0, 0] is not a permutation of the axes "
            "of [256, 64]");
  EXPECT_FALSE(rules::transpose({256, 64}, {0, 1, 2}).ok());
  EXPECT_FALSE(rules::transpose({256, 64}, {0, 2}).ok());
}

TEST(ShapeRules, Split) {
  std::vector<Shape> out = value(rules::split({B, S, 384}, {256, 64, 64}, -1));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], (Shape{B, S, 256}));
  EXPECT_EQ(out[2], (Shape{B, S, 64}));

  EXPECT_EQ(rejected(rules::split({B, S, 384}, {256, 64}, -1)),
            "split sizes [256, 64] add up to 320, but axis 2 of "
            "[B, S, 384] is 384");
  EXPECT_EQ(rejected(rules::split({B, S, 384}, {384}, 1)),
            "cannot split the symbolic dimension S of [B, S, 384]");
  EXPECT_FALSE(rules::split({B, S, 4}, {0, 4}, -1).ok());
  EXPECT_FALSE(rules::split({B, S, 4}, {4}, 3).ok());
}

TEST(ShapeRules, Concat) {
  EXPECT_EQ(value(rules::concat({{B, S, 64}, {B, S, 32}}, -1)),
            (Shape{B, S, 96}));
  EXPECT_EQ(rejected(rules::concat({{B, S, 64}, {B, 4, 32}}, -1)),
            "cannot concatenate [B, S, 64] and [B, 4, 32] along axis 2");
  EXPECT_FALSE(rules::concat({{B, S, 64}, {B, S, 64}}, 1).ok());
  EXPECT_FALSE(rules::concat({}, 0).ok());
  EXPECT_FALSE(rules::concat({{B, 64}, {B, 2, 64}}, 0).ok());
}

TEST(ShapeRules, Slice) {
  EXPECT_EQ(value(rules::slice({B, S, 64}, -1, 16, 48)), (Shape{B, S, 32}));
  EXPECT_EQ(rejected(rules::slice({B, S, 64}, -1, 16, 80)),
            "slice [16, 80) is out of range for axis 2 of [B, S, 64]");
  EXPECT_FALSE(rules::slice({B, S, 64}, -1, 16, 16).ok());
  EXPECT_FALSE(rules::slice({B, S, 64}, 1, 0, 1).ok());
}

TEST(ShapeRules, Norm) {
  Shape b = {256};
  EXPECT_TRUE(accepted(rules::norm({B, S, 256}, {256}, nullptr)));
  EXPECT_TRUE(accepted(rules::norm({B, S, 256}, {256}, &b)));
  EXPECT_EQ(rejected(rules::norm({B, S, 256}, {128}, nullptr)),
            "weight [128] does not match the last dimension of "
            "[B, S, 256]");
  Shape badB = {128};
  EXPECT_FALSE(rules::norm({B, S, 256}, {256}, &badB).ok());
  EXPECT_FALSE(rules::norm({}, {}, nullptr).ok());
}

TEST(ShapeRules, Rope) {
  EXPECT_TRUE(accepted(rules::rope({B, S, 8, 64}, 1.0)));
  EXPECT_TRUE(accepted(rules::rope({B, S, 8, 64}, 0.5)));
  EXPECT_TRUE(accepted(rules::rope({B, S, 8, 64}, 0.25)));
  EXPECT_EQ(rejected(rules::rope({B, S, 256}, 1.0)),
            "rope expects [B, S, H, D], got [B, S, 256]");
  // transformers' partial rotary: int(10 * 0.3) = 3 frequencies rotate 4
  // dims; int(10 * 0.05) = 0 frequencies is no rotation at all.
  EXPECT_TRUE(accepted(rules::rope({B, S, 8, 10}, 0.3)));
  EXPECT_EQ(rules::ropeDims(0.3, 10).freq, 3);
  EXPECT_EQ(rules::ropeDims(0.3, 10).rotary, 4);
  EXPECT_EQ(rules::ropeDims(0.6, 16).freq, 9);
  EXPECT_EQ(rules::ropeDims(0.6, 16).rotary, 10);
  EXPECT_EQ(rejected(rules::rope({B, S, 8, 10}, 0.05)),
            "rope fraction 0.05 of the 10 dimensions of [B, S, 8, 10] "
            "gives no rotary frequency (int(D * fraction) must be at least "
            "1)");
  EXPECT_FALSE(rules::rope({B, S, 8, 64}, 0.0).ok());
  EXPECT_FALSE(rules::rope({B, S, 8, 64}, 1.5).ok());
  EXPECT_FALSE(rules::rope({B, S, 8, 3}, 1.0).ok());
}

TEST(ShapeRules, Attention) {
  EXPECT_EQ(
      value(rules::attention({B, S, 8, 32}, {B, S, 8, 32}, {B, S, 8, 32})),
      (Shape{B, S, 8, 32}));
  // Grouped-query: 2 key/value heads serve 8 query heads.
  EXPECT_EQ(
      value(rules::attention({B, S, 8, 32}, {B, S, 2, 32}, {B, S, 2, 32})),
      (Shape{B, S, 8, 32}));

  EXPECT_EQ(
      rejected(rules::attention({B, S, 8, 32}, {B, S, 3, 32}, {B, S, 3, 32})),
      "attention key/value heads 3 do not divide query heads 8: "
      "q [B, S, 8, 32], k [B, S, 3, 32]");
  EXPECT_EQ(
      rejected(rules::attention({B, S, 8, 32}, {B, S, 8, 16}, {B, S, 8, 16})),
      "attention q [B, S, 8, 32] and k [B, S, 8, 16] differ in "
      "batch, sequence or head size");
  EXPECT_FALSE(
      rules::attention({B, S, 8, 32}, {B, S, 8, 32}, {B, S, 4, 32}).ok());
  EXPECT_EQ(rejected(rules::attention({B, S, 256}, {B, S, 256}, {B, S, 256})),
            "attention expects q, k and v as [B, S, H, D], got "
            "[B, S, 256], [B, S, 256] and [B, S, 256]");
}

TEST(ShapeRules, CrossEntropy) {
  EXPECT_TRUE(accepted(rules::crossEntropy({B, S, 256}, {B, S})));
  EXPECT_EQ(rejected(rules::crossEntropy({B, S}, {B, S})),
            "cross_entropy logits must be [B, S, V], got [B, S]");
  EXPECT_EQ(rejected(rules::crossEntropy({B, S, 256}, {S, B})),
            "cross_entropy targets [S, B] do not match logits "
            "[B, S, 256]");
}

TEST(ShapeRules, Moe) {
  EXPECT_TRUE(accepted(rules::moe({B, S, 64}, {64, 8}, 8)));
  EXPECT_EQ(rejected(rules::moe({B, S, 64}, {64, 4}, 8)),
            "moe router must be [64, 8] for input [B, S, 64] and 8 "
            "experts, got [64, 4]");
  EXPECT_FALSE(rules::moe({B, S, 64}, {32, 8}, 8).ok());
  EXPECT_EQ(rejected(rules::moe({S, 64}, {64, 8}, 8)),
            "moe input must be [B, S, D], got [S, 64]");
}

} // namespace
