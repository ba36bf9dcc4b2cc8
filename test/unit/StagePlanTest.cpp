//===- StagePlanTest.cpp - The host stage plan (lib/Bundle/Plan.h) --------===//
//
// Part of mtc. bundle::planStage: which model-level values of a step cross a
// layer loop (and so wait in host memory), where they live there, and the
// layout of the device slot each stage segment runs in.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Plan.h"

#include <gtest/gtest.h>

namespace mtc::bundle {
namespace {

/// forward_backward's shape: tokens (0), targets (1);
///   op 0: param_ref -> 2           (the embedding table)
///   op 1: embedding(0, 2) -> 3
///   op 2: apply_layers(3) -> 4
///   op 3: loss(4, 1) -> 5, 6       (the loss and its input gradient)
///   op 4: apply_layers_grad(6) -> 7
///   op 5: embedding_grad(7, 0) -> 8
StageProgram llamaLike() {
  StageProgram p;
  p.args = {0, 1};
  p.valueBytes = {100, 100, 4096, 640, 640, 4, 640, 640, 4096};
  auto op = [&](std::vector<int> in, std::vector<int> out, int64_t scratch,
                bool layers = false, bool persistent = false) {
    StageOp o;
    o.operands = std::move(in);
    o.results = std::move(out);
    o.scratch = scratch;
    o.layers = layers;
    o.persistent = persistent;
    p.ops.push_back(o);
  };
  op({}, {2}, 0, false, true);
  op({0, 2}, {3}, 640);
  op({3}, {4}, 0, true);
  op({4, 1}, {5, 6}, 1000);
  op({6}, {7}, 0, true);
  op({7, 0}, {8}, 4096);
  return p;
}

TEST(StagePlanTest, CarriesWhatCrossesALayerLoop) {
  StagePlan plan = planStage(llamaLike());
  ASSERT_EQ(plan.segments.size(), 3u);
  // The loops' inputs and results wait in host memory; the parameter view,
  // the loss and the arguments do not.
  EXPECT_EQ(plan.hostOffset[3], 0);
  EXPECT_EQ(plan.hostOffset[4], 640);
  EXPECT_EQ(plan.hostOffset[6], 1280);
  EXPECT_EQ(plan.hostOffset[7], 1920);
  for (int v : {0, 1, 2, 5, 8})
    EXPECT_EQ(plan.hostOffset[v], -1) << v;
  EXPECT_EQ(plan.hostBytes, 4 * 640);

  const StagePlan::Segment &first = plan.segments[0];
  EXPECT_EQ(first.begin, 0);
  EXPECT_EQ(first.end, 2);
  EXPECT_TRUE(first.in.empty());
  EXPECT_EQ(first.out, std::vector<int>({3}));
  EXPECT_EQ(first.args, std::vector<int>({0}));
  // The op scratch plus the token ids it reads (align64(100) = 128).
  EXPECT_EQ(first.scratch, 640 + 128);

  const StagePlan::Segment &loss = plan.segments[1];
  EXPECT_EQ(loss.in, std::vector<int>({4}));
  EXPECT_EQ(loss.out, std::vector<int>({6}));
  EXPECT_EQ(loss.inOffset, std::vector<int64_t>({0}));
  EXPECT_EQ(loss.outOffset, std::vector<int64_t>({640}));
  EXPECT_EQ(loss.bytes(), 640 + 640 + 1000 + 128);

  const StagePlan::Segment &last = plan.segments[2];
  EXPECT_EQ(last.in, std::vector<int>({7}));
  EXPECT_TRUE(last.out.empty());
  EXPECT_EQ(plan.slotBytes, 640 + 4096 + 128);
  EXPECT_EQ(plan.segment(5), &plan.segments[2]);
  EXPECT_EQ(plan.segment(4), nullptr);
}

TEST(StagePlanTest, OrderFollowsDefinitionNotValueIds) {
  // The same program with its values numbered backwards: every list and
  // offset follows the definition order, so the layout is the same.
  StageProgram a = llamaLike();
  StageProgram b = a;
  const int n = static_cast<int>(a.valueBytes.size());
  auto flip = [&](int v) { return n - 1 - v; };
  for (int &v : b.args)
    v = flip(v);
  for (StageOp &op : b.ops) {
    for (int &v : op.operands)
      v = flip(v);
    for (int &v : op.results)
      v = flip(v);
  }
  for (int v = 0; v < n; ++v)
    b.valueBytes[flip(v)] = a.valueBytes[v];
  StagePlan pa = planStage(a), pb = planStage(b);
  EXPECT_EQ(pa.hostBytes, pb.hostBytes);
  EXPECT_EQ(pa.slotBytes, pb.slotBytes);
  for (int v = 0; v < n; ++v)
    EXPECT_EQ(pa.hostOffset[v], pb.hostOffset[flip(v)]) << v;
  for (size_t s = 0; s < pa.segments.size(); ++s) {
    ASSERT_EQ(pa.segments[s].out.size(), pb.segments[s].out.size());
    for (size_t q = 0; q < pa.segments[s].out.size(); ++q)
      EXPECT_EQ(flip(pa.segments[s].out[q]), pb.segments[s].out[q]);
    EXPECT_EQ(pa.segments[s].outOffset, pb.segments[s].outOffset);
  }
}

TEST(StagePlanTest, AdjacentLoopsPassThroughHostMemory) {
  // Two loops back to back (interleaved layer kinds): the first loop's
  // result is the second one's input, carried without a stage between.
  StageProgram p;
  p.args = {0};
  p.valueBytes = {64, 256, 256, 256, 4};
  StageOp embed{{0}, {1}, 256, false, false};
  StageOp local{{1}, {2}, 0, true, false};
  StageOp global{{2}, {3}, 0, true, false};
  StageOp loss{{3}, {4}, 64, false, false};
  p.ops = {embed, local, global, loss};
  StagePlan plan = planStage(p);
  ASSERT_EQ(plan.segments.size(), 2u);
  EXPECT_EQ(plan.hostOffset[1], 0);
  EXPECT_EQ(plan.hostOffset[2], 256);
  EXPECT_EQ(plan.hostOffset[3], 512);
  EXPECT_EQ(plan.segments[1].in, std::vector<int>({3}));
}

} // namespace
} // namespace mtc::bundle
