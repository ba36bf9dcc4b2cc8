//===- StreamPlanTest.cpp - Byte rules, sizes and the bundle step ---------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "compiler/Analysis/MemoryModel.h"
#include "compiler/Driver/CompileModel.h"
#include "lib/Bundle/Plan.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace mtc;

namespace {

/// The bytes \p text parses to, or -1 (and a test failure) on an error.
int64_t bytesOf(llvm::StringRef text) {
  llvm::Expected<int64_t> v = analysis::parseByteSize(text);
  if (!v) {
    ADD_FAILURE() << text.str() << ": " << llvm::toString(v.takeError());
    return -1;
  }
  return *v;
}

/// tiny-llama streamed at 64 MiB, 2 micro-batches of [4, 64], \p policy.
CompileOptions tinyStreamOptions(RecomputePolicy policy) {
  CompileOptions opts;
  opts.recompute = policy;
  opts.stream.enabled = true;
  opts.stream.deviceMemory = 64ll << 20;
  opts.stream.batch = 4;
  opts.stream.seq = 64;
  opts.stream.microBatches = 2;
  return opts;
}

/// Bundle JSON \p text with its first \p from replaced by \p to does not
/// read back, with an error containing \p message.
void expectRejected(const std::string &text, const std::string &from,
                    const std::string &to, const std::string &message) {
  std::string bad = text;
  size_t at = bad.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  bad.replace(at, from.size(), to);
  Expected<bundle::Bundle> out = bundle::fromJson(bad);
  EXPECT_FALSE(out.ok()) << from;
  EXPECT_NE(out.message().find(message), std::string::npos) << out.message();
}

} // namespace

TEST(StreamPlan, ParseByteSize) {
  EXPECT_EQ(bytesOf("64MiB"), 64ll << 20);
  EXPECT_EQ(bytesOf("2GiB"), 2ll << 30);
  EXPECT_EQ(bytesOf("512KiB"), 512ll << 10);
  EXPECT_EQ(bytesOf("1.5GiB"), 3ll << 29);
  EXPECT_EQ(bytesOf("1048576"), 1048576);
  EXPECT_EQ(bytesOf("8 gb"), 8ll << 30);
  for (const char *bad : {"", "MiB", "12XB", "-1MiB", "1.5", "1e3", "lots",
                          "99999999999999999999GiB", "1.2.3MiB"}) {
    llvm::Expected<int64_t> v = analysis::parseByteSize(bad);
    ASSERT_FALSE(v) << bad;
    std::string err = llvm::toString(v.takeError());
    EXPECT_NE(err.find("invalid size"), std::string::npos) << bad;
  }
}

TEST(StreamPlan, FormatByteSize) {
  EXPECT_EQ(analysis::formatByteSize(412ll << 20), "412 MiB");
  EXPECT_EQ(analysis::formatByteSize(2ll << 30), "2 GiB");
  EXPECT_EQ(analysis::formatByteSize(100), "100 B");
  EXPECT_EQ(analysis::formatByteSize(1536), "1.5 KiB");
  EXPECT_EQ(analysis::formatByteSize((301ll << 20) + 1, true), "301.1 MiB");
  EXPECT_EQ(analysis::formatByteSize((301ll << 20) + 1, false), "301 MiB");
  EXPECT_EQ(analysis::formatByteSize(int64_t(1) << 62), "4294967296 GiB");
}

TEST(StreamPlan, ByteRules) {
  EXPECT_EQ(bundle::align64(0), 0);
  EXPECT_EQ(bundle::align64(1), 64);
  EXPECT_EQ(bundle::align64(64), 64);
  EXPECT_EQ(bundle::tensorBytes(int64_t(17)), 128);
  EXPECT_EQ(bundle::alignOffset(257), 512);
  EXPECT_EQ(bundle::tensorBytes(Shape{kDimB, kDimS, 3}, 2, 5), 128);
  EXPECT_EQ(bundle::tensorBytes(Shape{kDimT, 8}, 2, 5, 10), 320);
  // q [B, S, Hq, D]: one float per (b, s, head).
  EXPECT_EQ(bundle::attentionLseBytes(Shape{kDimB, kDimS, 8, 32}, 2, 5), 320);
}

TEST(StreamPlan, RecomputeCostAndHostActivations) {
  // Two layer kinds; the cost is per forward-loop instance and micro-batch:
  // recomputed FLOPs at the FLOP rate, plus host checkpoints out and back.
  analysis::ModelCost cost;
  analysis::LayerCost a, b;
  a.name = "A";
  a.recomputeFlops = 3000;
  a.checkpointBytes = 100;
  a.boundaryBytes = 64;
  b.name = "B";
  b.recomputeFlops = 0;
  b.checkpointBytes = 500;
  b.boundaryBytes = 64;
  cost.layers = {a, b};
  analysis::PlanChoices choices;
  choices.microBatches = 2;
  choices.forwardLoops = {{"A", 4}, {"B", 1}};
  analysis::DeviceRates rates{1000.0, 100.0};
  // Device checkpoints: 4 x 2 x 3 s.
  EXPECT_DOUBLE_EQ(analysis::recomputeCostSeconds(cost, choices, rates), 24.0);
  // Host checkpoints add 2 x bytes / rate per instance and micro-batch:
  // A 4 x 2 x (3 + 2) + B 1 x 2 x 10.
  choices.checkpointsOnHost = true;
  EXPECT_DOUBLE_EQ(analysis::recomputeCostSeconds(cost, choices, rates), 60.0);

  // Host checkpoints with M > 1: the activations wait in host memory; the
  // device keeps 4 activation slots and 2 staging slots whatever M is.
  for (int64_t m : {2, 8}) {
    choices.microBatches = m;
    analysis::MemoryPlan p = analysis::planMemory(cost, choices);
    auto find = [&](const std::string &name) -> const bundle::PlanBuffer * {
      for (const bundle::PlanBuffer &buf : p.buffers)
        if (buf.name == name)
          return &buf;
      return nullptr;
    };
    ASSERT_NE(find("activations.host"), nullptr);
    EXPECT_EQ(find("activations.host")->bytes, m * 64);
    EXPECT_EQ(find("activations.host")->space, "host");
    EXPECT_EQ(find("activations")->bytes, 4 * 64);
    EXPECT_EQ(find("checkpoints")->bytes, 2 * 500);
  }
  // One micro-batch: activations stay on the device (ping-pong).
  choices.microBatches = 1;
  analysis::MemoryPlan one = analysis::planMemory(cost, choices);
  for (const bundle::PlanBuffer &buf : one.buffers) {
    EXPECT_NE(buf.name, "activations.host");
    if (buf.name == "activations")
      EXPECT_EQ(buf.bytes, 2 * 64);
  }
}

TEST(StreamPlan, SegmentCheckpointing) {
  // Segments of k: ceil(count / k) checkpoints per loop and micro-batch,
  // count - ceil(count / k) extra forwards.
  EXPECT_EQ(analysis::segmentCount(5, 1), 5);
  EXPECT_EQ(analysis::segmentCount(5, 2), 3);
  EXPECT_EQ(analysis::segmentCount(6, 3), 2);
  EXPECT_EQ(analysis::segmentExtraForwards(5, 2), 2);
  EXPECT_EQ(analysis::segmentExtraForwards(5, 5), 4);
  EXPECT_EQ(analysis::segmentExtraForwards(5, 1), 0);

  analysis::ModelCost cost;
  analysis::LayerCost a;
  a.name = "A";
  a.forwardFlops = a.recomputeFlops = 3000;
  a.checkpointBytes = a.boundaryBytes = 64;
  a.weightBytes = 1024;
  cost.layers = {a};
  analysis::PlanChoices choices;
  choices.microBatches = 2;
  choices.forwardLoops = {{"A", 5}};
  analysis::DeviceRates rates{1000.0, 100.0};
  auto find = [](const analysis::MemoryPlan &p, const std::string &name) {
    for (const bundle::PlanBuffer &buf : p.buffers)
      if (buf.name == name)
        return buf.bytes;
    return int64_t(-1);
  };
  analysis::MemoryPlan whole = analysis::planMemory(cost, choices);
  EXPECT_EQ(find(whole, "checkpoints"), 5 * 2 * 64);
  EXPECT_EQ(find(whole, "segment"), -1);
  // k = 3: segments [0, 3) and [3, 5); three weight slots; the segment
  // buffer holds 3 inputs of both micro-batches.
  choices.checkpointEvery = 3;
  analysis::MemoryPlan seg = analysis::planMemory(cost, choices);
  EXPECT_EQ(find(seg, "checkpoints"), 2 * 2 * 64);
  EXPECT_EQ(find(seg, "segment"), 3 * 2 * 64);
  EXPECT_EQ(find(seg, "weights.2"), 1024);
  EXPECT_EQ(find(seg, "weights.3"), -1);
  // Cost: 5 x 2 x 3 s of full recomputation plus (5 - 2) x 2 x 3 s of
  // recomputed segment forwards; with host checkpoints 2 x 64 / 100 s for
  // each of the 2 x 2 kept checkpoints only.
  EXPECT_DOUBLE_EQ(analysis::recomputeCostSeconds(cost, choices, rates),
                   30.0 + 18.0);
  choices.checkpointsOnHost = true;
  EXPECT_DOUBLE_EQ(analysis::recomputeCostSeconds(cost, choices, rates),
                   30.0 + 18.0 + 4 * 1.28);
  analysis::MemoryPlan host = analysis::planMemory(cost, choices);
  EXPECT_EQ(find(host, "checkpoints.host"), 2 * 2 * 64);
}

TEST(StreamPlan, MixedRecomputation) {
  // The first S instances of the stack (over the forward loops in order)
  // keep their layer's checkpoint, the others their input (boundaryBytes).
  analysis::PlanChoices choices;
  choices.forwardLoops = {{"A", 4}, {"B", 3}};
  EXPECT_EQ(analysis::keptCheckpoints(choices, 0, 4), 4); // -1: every one
  choices.selectiveLayers = 5;
  EXPECT_EQ(analysis::keptCheckpoints(choices, 0, 4), 4);
  EXPECT_EQ(analysis::keptCheckpoints(choices, 4, 3), 1);
  choices.selectiveLayers = 2;
  EXPECT_EQ(analysis::keptCheckpoints(choices, 0, 4), 2);
  EXPECT_EQ(analysis::keptCheckpoints(choices, 4, 3), 0);

  analysis::ModelCost cost;
  analysis::LayerCost a, b;
  a.name = "A";
  a.forwardFlops = 5000;
  a.recomputeFlops = 1000;
  a.checkpointBytes = 640;
  a.boundaryBytes = 64;
  b = a;
  b.name = "B";
  b.checkpointBytes = 320;
  cost.layers = {a, b};
  choices.microBatches = 2;
  choices.checkpointsOnHost = true;
  choices.selectiveLayers = 5; // A 0..3 and B 4 selective, B 5..6 full
  auto find = [](const analysis::MemoryPlan &p, const std::string &name) {
    for (const bundle::PlanBuffer &buf : p.buffers)
      if (buf.name == name)
        return buf.bytes;
    return int64_t(-1);
  };
  analysis::MemoryPlan mixed = analysis::planMemory(cost, choices);
  EXPECT_EQ(find(mixed, "checkpoints.host"), 2 * (4 * 640 + 320 + 2 * 64));
  EXPECT_EQ(find(mixed, "checkpoints"), 2 * 640); // staging: the largest
  // Cost per instance and micro-batch: selective 1 s + 2 x 640 / 100 s,
  // full 5 s + 2 x 64 / 100 s (A) and 1 s + 6.4 s (B selective).
  analysis::DeviceRates rates{1000.0, 100.0};
  EXPECT_DOUBLE_EQ(analysis::recomputeCostSeconds(cost, choices, rates),
                   2 * (4 * (1 + 12.8) + (1 + 6.4) + 2 * (5 + 1.28)));
  // S = 0: everything is the input alone, like a full plan.
  choices.selectiveLayers = 0;
  analysis::MemoryPlan none = analysis::planMemory(cost, choices);
  EXPECT_EQ(find(none, "checkpoints.host"), 2 * 7 * 64);
  EXPECT_EQ(find(none, "checkpoints"), 2 * 64);
}

TEST(StreamPlan, MixedBundleRoundTrip) {
  // --selective-layers 2 of tiny-llama's 4 instances: the layer carries
  // backward_full, the step selective_layers, and both survive the JSON.
  CompileOptions opts = tinyStreamOptions(RecomputePolicy::Selective);
  opts.stream.selectiveLayers = 2;
  std::ostringstream errs;
  bundle::Bundle b;
  ASSERT_TRUE(compileModelFile("examples/tiny-llama.mt", opts, errs, b))
      << errs.str();
  ASSERT_TRUE(b.step);
  EXPECT_EQ(b.step->recompute, "selective");
  EXPECT_EQ(b.step->selectiveLayers, 2);
  ASSERT_NE(b.layer("Block"), nullptr);
  EXPECT_EQ(b.layer("Block")->functions.count("backward_full"), 1u);
  std::string text = bundle::toJson(b);
  Expected<bundle::Bundle> back = bundle::fromJson(text);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->step->selectiveLayers, 2);
  EXPECT_EQ(bundle::toJson(*back), text);
  auto rejects = [&](const std::string &from, const std::string &to,
                     const std::string &message) {
    expectRejected(text, from, to, message);
  };
  rejects("\"recompute\": \"selective\"", "\"recompute\": \"none\"",
          "selective_layers 2 needs recompute 'selective', got 'none'");
  rejects("\"selective_layers\": 2", "\"selective_layers\": -1",
          "selective_layers");
  rejects("\"backward_full\"", "\"backward_fully\"",
          "a layer has only 'forward', 'backward' and 'backward_full' "
          "functions");
  // Without the flag no layer carries backward_full.
  opts.stream.selectiveLayers = -1;
  bundle::Bundle pure;
  ASSERT_TRUE(compileModelFile("examples/tiny-llama.mt", opts, errs, pure))
      << errs.str();
  EXPECT_EQ(pure.layer("Block")->functions.count("backward_full"), 0u);
  EXPECT_EQ(pure.step->selectiveLayers, -1);
  EXPECT_EQ(bundle::toJson(pure).find("selective_layers"), std::string::npos);
}

TEST(StreamPlan, BundleStepRoundTrip) {
  CompileOptions opts = tinyStreamOptions(RecomputePolicy::Auto);
  std::ostringstream errs;
  bundle::Bundle b;
  ASSERT_TRUE(compileModelFile("examples/tiny-llama.mt", opts, errs, b))
      << errs.str();
  ASSERT_TRUE(b.step);
  EXPECT_EQ(b.step->deviceBudget, 64ll << 20);
  EXPECT_LE(b.step->devicePeak, b.step->deviceBudget);
  ASSERT_NE(b.step->buffer("workspace"), nullptr);
  std::string text = bundle::toJson(b);
  Expected<bundle::Bundle> back = bundle::fromJson(text);
  ASSERT_TRUE(back.ok()) << back.message();
  ASSERT_TRUE(back->step);
  EXPECT_EQ(bundle::toJson(*back), text);
  EXPECT_EQ(back->step->program.size(), b.step->program.size());

  auto rejects = [&](const std::string &from, const std::string &to,
                     const std::string &message) {
    expectRejected(text, from, to, message);
  };
  rejects("\"op\": \"load_model_weights\"", "\"op\": \"teleport\"",
          "unknown command 'teleport'");
  rejects("\"kind\": \"workspace\"", "\"kind\": \"cache\"",
          "field 'kind' must be one of");
  rejects("\"micro_batches\": 2", "\"micro_batches\": \"2\"",
          "field 'micro_batches' must be an integer");
  rejects("\"layer\": \"Block\"", "\"layer\": \"Nope\"",
          "names no layer of the model: 'Nope'");
  rejects("\"op_index\": 2", "\"op_index\": 3",
          "op_index 3 is not an apply_layers of layer 'Block'");
  rejects("\"offset\": 525312", "\"offset\": 256", "device buffers overlap");
  rejects("\"batch\": 4,", "\"batch\": 4, \"colour\": 1,",
          "unknown field 'colour'");
}
