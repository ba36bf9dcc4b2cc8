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
  Shape out;
  std::string err;
  ASSERT_TRUE(rules::broadcast({B, S, 256}, {256}, out, err));
  EXPECT_EQ(out, (Shape{B, S, 256}));
  ASSERT_TRUE(rules::broadcast({B, S, 256}, {}, out, err));
  EXPECT_EQ(out, (Shape{B, S, 256}));
  ASSERT_TRUE(rules::broadcast({B, S, 1}, {B, S, 64}, out, err));
  EXPECT_EQ(out, (Shape{B, S, 64}));
  // A static 1 stretches against a symbolic dimension.
  ASSERT_TRUE(rules::broadcast({1, S, 8}, {B, 1, 8}, out, err));
  EXPECT_EQ(out, (Shape{B, S, 8}));

  EXPECT_FALSE(rules::broadcast({B, S, 256}, {B, S, 128}, out, err));
  EXPECT_EQ(err, "cannot broadcast [B, S, 256] and [B, S, 128]");
  // B only matches B.
  EXPECT_FALSE(rules::broadcast({B, 8}, {S, 8}, out, err));
  EXPECT_EQ(err, "cannot broadcast [B, 8] and [S, 8]");
  EXPECT_FALSE(rules::broadcast({T, 8}, {B, 8}, out, err));
}

TEST(ShapeRules, MatMul) {
  Shape out;
  std::string err;
  ASSERT_TRUE(rules::matmul({B, S, 256}, {256, 512}, nullptr, out, err));
  EXPECT_EQ(out, (Shape{B, S, 512}));
  ASSERT_TRUE(rules::matmul({256}, {256, 8}, nullptr, out, err));
  EXPECT_EQ(out, (Shape{8}));
  // Batched: equal leading dimensions.
  ASSERT_TRUE(rules::matmul({B, 4, S, 32}, {B, 4, 32, S}, nullptr, out, err));
  EXPECT_EQ(out, (Shape{B, 4, S, S}));
  Shape bias = {512};
  ASSERT_TRUE(rules::matmul({B, S, 256}, {256, 512}, &bias, out, err));

  EXPECT_FALSE(rules::matmul({B, S, 256}, {128, 512}, nullptr, out, err));
  EXPECT_EQ(err, "matmul inner dimensions differ: [B, S, 256] @ [128, 512]");
  EXPECT_FALSE(rules::matmul({B, 4, S, 32}, {B, 2, 32, S}, nullptr, out, err));
  EXPECT_EQ(err, "batched matmul needs equal leading dimensions: "
                 "[B, 4, S, 32] @ [B, 2, 32, S]");
  EXPECT_FALSE(rules::matmul({B, S, 256}, {256}, nullptr, out, err));
  EXPECT_EQ(err, "matmul needs [.., K] @ [K, N], got [B, S, 256] @ [256]");
  EXPECT_FALSE(rules::matmul({}, {2, 2}, nullptr, out, err));
  Shape badBias = {256};
  EXPECT_FALSE(rules::matmul({B, S, 256}, {256, 512}, &badBias, out, err));
  EXPECT_EQ(err, "matmul bias must be [512], got [256]");
}

TEST(ShapeRules, AxisAndReduce) {
  size_t a = 0;
  std::string err;
  ASSERT_TRUE(rules::axis(-1, 3, a, err));
  EXPECT_EQ(a, 2u);
  ASSERT_TRUE(rules::axis(0, 3, a, err));
  EXPECT_EQ(a, 0u);
  EXPECT_FALSE(rules::axis(3, 3, a, err));
  EXPECT_EQ(err, "axis 3 is out of range for rank 3");
  EXPECT_FALSE(rules::axis(-4, 3, a, err));
  EXPECT_FALSE(rules::axis(0, 0, a, err));

  Shape out;
  ASSERT_TRUE(rules::reduce({B, S, 64}, -1, false, out, err));
  EXPECT_EQ(out, (Shape{B, S}));
  ASSERT_TRUE(rules::reduce({B, S, 64}, 2, true, out, err));
  EXPECT_EQ(out, (Shape{B, S, 1}));
  ASSERT_TRUE(rules::reduce({64}, 0, false, out, err));
  EXPECT_EQ(out, (Shape{}));
  EXPECT_FALSE(rules::reduce({B, S}, 2, false, out, err));
  EXPECT_EQ(err, "axis 2 is out of range for rank 2 of [B, S]");
}

TEST(ShapeRules, Embedding) {
  Shape out;
  std::string err;
  ASSERT_TRUE(rules::embedding({B, S}, {256, 64}, out, err));
  EXPECT_EQ(out, (Shape{B, S, 64}));
  EXPECT_FALSE(rules::embedding({B, S}, {256}, out, err));
  EXPECT_EQ(err, "embedding table must be [V, D], got [256]");
}

TEST(ShapeRules, Reshape) {
  std::string err;
  EXPECT_TRUE(rules::reshape({B, S, 256}, {B, S, 8, 32}, err));
  EXPECT_TRUE(rules::reshape({B, S, 8, 32}, {B, S, 256}, err));
  EXPECT_TRUE(rules::reshape({B, S, 4}, {S, B, 2, 2}, err)); // multiset
  EXPECT_TRUE(rules::reshape({}, {1, 1}, err));

  EXPECT_FALSE(rules::reshape({B, S, 256}, {B, S, 8, 16}, err));
  EXPECT_EQ(err, "cannot reshape [B, S, 256] to [B, S, 8, 16]: element "
                 "counts differ (256 vs 128)");
  EXPECT_FALSE(rules::reshape({B, S, 256}, {B, 256}, err));
  EXPECT_EQ(
      err,
      "cannot reshape [B, S, 256] to [B, 256]: symbolic dimensions differ");
  EXPECT_FALSE(rules::reshape({B, S}, {B, S, S}, err));
  EXPECT_FALSE(rules::reshape({B, 8}, {T, 8}, err));
}

TEST(ShapeRules, Transpose) {
  Shape out;
  std::string err;
  ASSERT_TRUE(rules::transpose({B, S, 4, 32}, {0, 2, 1, 3}, out, err));
  EXPECT_EQ(out, (Shape{B, 4, S, 32}));
  ASSERT_TRUE(rules::transpose({256, 64}, {1, 0}, out, err));
  EXPECT_EQ(out, (Shape{64, 256}));
  EXPECT_FALSE(rules::transpose({256, 64}, {0, 0}, out, err));
  EXPECT_EQ(err,
            "transpose permutation [0, 0] is not a permutation of the axes "
            "of [256, 64]");
  EXPECT_FALSE(rules::transpose({256, 64}, {0, 1, 2}, out, err));
  EXPECT_FALSE(rules::transpose({256, 64}, {0, 2}, out, err));
}

TEST(ShapeRules, Split) {
  std::vector<Shape> out;
  std::string err;
  ASSERT_TRUE(rules::split({B, S, 384}, {256, 64, 64}, -1, out, err));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], (Shape{B, S, 256}));
  EXPECT_EQ(out[2], (Shape{B, S, 64}));

  EXPECT_FALSE(rules::split({B, S, 384}, {256, 64}, -1, out, err));
  EXPECT_EQ(err, "split sizes [256, 64] add up to 320, but axis 2 of "
                 "[B, S, 384] is 384");
  EXPECT_FALSE(rules::split({B, S, 384}, {384}, 1, out, err));
  EXPECT_EQ(err, "cannot split the symbolic dimension S of [B, S, 384]");
  EXPECT_FALSE(rules::split({B, S, 4}, {0, 4}, -1, out, err));
  EXPECT_FALSE(rules::split({B, S, 4}, {4}, 3, out, err));
}

TEST(ShapeRules, Concat) {
  Shape out;
  std::string err;
  ASSERT_TRUE(rules::concat({{B, S, 64}, {B, S, 32}}, -1, out, err));
  EXPECT_EQ(out, (Shape{B, S, 96}));
  EXPECT_FALSE(rules::concat({{B, S, 64}, {B, 4, 32}}, -1, out, err));
  EXPECT_EQ(err, "cannot concatenate [B, S, 64] and [B, 4, 32] along axis 2");
  EXPECT_FALSE(rules::concat({{B, S, 64}, {B, S, 64}}, 1, out, err));
  EXPECT_FALSE(rules::concat({}, 0, out, err));
  EXPECT_FALSE(rules::concat({{B, 64}, {B, 2, 64}}, 0, out, err));
}

TEST(ShapeRules, Slice) {
  Shape out;
  std::string err;
  ASSERT_TRUE(rules::slice({B, S, 64}, -1, 16, 48, out, err));
  EXPECT_EQ(out, (Shape{B, S, 32}));
  EXPECT_FALSE(rules::slice({B, S, 64}, -1, 16, 80, out, err));
  EXPECT_EQ(err, "slice [16, 80) is out of range for axis 2 of [B, S, 64]");
  EXPECT_FALSE(rules::slice({B, S, 64}, -1, 16, 16, out, err));
  EXPECT_FALSE(rules::slice({B, S, 64}, 1, 0, 1, out, err));
}

TEST(ShapeRules, Norm) {
  std::string err;
  Shape b = {256};
  EXPECT_TRUE(rules::norm({B, S, 256}, {256}, nullptr, err));
  EXPECT_TRUE(rules::norm({B, S, 256}, {256}, &b, err));
  EXPECT_FALSE(rules::norm({B, S, 256}, {128}, nullptr, err));
  EXPECT_EQ(err, "weight [128] does not match the last dimension of "
                 "[B, S, 256]");
  Shape badB = {128};
  EXPECT_FALSE(rules::norm({B, S, 256}, {256}, &badB, err));
  EXPECT_FALSE(rules::norm({}, {}, nullptr, err));
}

TEST(ShapeRules, Rope) {
  std::string err;
  EXPECT_TRUE(rules::rope({B, S, 8, 64}, 1.0, err));
  EXPECT_TRUE(rules::rope({B, S, 8, 64}, 0.5, err));
  EXPECT_TRUE(rules::rope({B, S, 8, 64}, 0.25, err));
  EXPECT_FALSE(rules::rope({B, S, 256}, 1.0, err));
  EXPECT_EQ(err, "rope expects [B, S, H, D], got [B, S, 256]");
  // round(0.3 * 10) = 3 is odd.
  EXPECT_FALSE(rules::rope({B, S, 8, 10}, 0.3, err));
  EXPECT_EQ(err, "rope rotates 3 of the 10 dimensions of [B, S, 8, 10], "
                 "which must be even and positive");
  EXPECT_FALSE(rules::rope({B, S, 8, 64}, 0.0, err));
  EXPECT_FALSE(rules::rope({B, S, 8, 64}, 1.5, err));
  EXPECT_FALSE(rules::rope({B, S, 8, 3}, 1.0, err));
}

TEST(ShapeRules, Attention) {
  Shape out;
  std::string err;
  ASSERT_TRUE(
      rules::attention({B, S, 8, 32}, {B, S, 8, 32}, {B, S, 8, 32}, out, err));
  EXPECT_EQ(out, (Shape{B, S, 8, 32}));
  // Grouped-query: 2 key/value heads serve 8 query heads.
  ASSERT_TRUE(
      rules::attention({B, S, 8, 32}, {B, S, 2, 32}, {B, S, 2, 32}, out, err));
  EXPECT_EQ(out, (Shape{B, S, 8, 32}));

  EXPECT_FALSE(
      rules::attention({B, S, 8, 32}, {B, S, 3, 32}, {B, S, 3, 32}, out, err));
  EXPECT_EQ(err, "attention key/value heads 3 do not divide query heads 8: "
                 "q [B, S, 8, 32], k [B, S, 3, 32]");
  EXPECT_FALSE(
      rules::attention({B, S, 8, 32}, {B, S, 8, 16}, {B, S, 8, 16}, out, err));
  EXPECT_EQ(err, "attention q [B, S, 8, 32] and k [B, S, 8, 16] differ in "
                 "batch, sequence or head size");
  EXPECT_FALSE(
      rules::attention({B, S, 8, 32}, {B, S, 8, 32}, {B, S, 4, 32}, out, err));
  EXPECT_FALSE(
      rules::attention({B, S, 256}, {B, S, 256}, {B, S, 256}, out, err));
  EXPECT_EQ(err, "attention expects q, k and v as [B, S, H, D], got "
                 "[B, S, 256], [B, S, 256] and [B, S, 256]");
}

TEST(ShapeRules, CrossEntropy) {
  std::string err;
  EXPECT_TRUE(rules::crossEntropy({B, S, 256}, {B, S}, err));
  EXPECT_FALSE(rules::crossEntropy({B, S}, {B, S}, err));
  EXPECT_EQ(err, "cross_entropy logits must be [B, S, V], got [B, S]");
  EXPECT_FALSE(rules::crossEntropy({B, S, 256}, {S, B}, err));
  EXPECT_EQ(err, "cross_entropy targets [S, B] do not match logits "
                 "[B, S, 256]");
}

TEST(ShapeRules, Moe) {
  std::string err;
  EXPECT_TRUE(rules::moe({B, S, 64}, {64, 8}, 8, err));
  EXPECT_FALSE(rules::moe({B, S, 64}, {64, 4}, 8, err));
  EXPECT_EQ(err, "moe router must be [64, 8] for input [B, S, 64] and 8 "
                 "experts, got [64, 4]");
  EXPECT_FALSE(rules::moe({B, S, 64}, {32, 8}, 8, err));
  EXPECT_FALSE(rules::moe({S, 64}, {64, 8}, 8, err));
  EXPECT_EQ(err, "moe input must be [B, S, D], got [S, 64]");
}

} // namespace
