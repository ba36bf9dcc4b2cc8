//===- StepTimeTest.cpp - The predicted step time of a plan ---------------===//
//
// Part of mtc. analysis::estimateStepTime: the streams of a step on a GPU
// (overlapped) and on the CPU device (copies on the compute cores); and the
// choice `--recompute auto` makes on a GPU from the step simulation.
//
//===----------------------------------------------------------------------===//

#include "compiler/Analysis/StepTime.h"
#include "compiler/Driver/CompileModel.h"
#include "lib/Sim/Profile.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace mtc;

namespace {

/// One layer kind of 8 instances: 1 GB of weights, 2 GB of gradients,
/// 1 TFLOP of forward per micro-batch; selective keeps 4 GB of checkpoint
/// per instance and micro-batch and recomputes 10 GFLOP, full keeps 0.25
/// GB and recomputes the forward.
analysis::ModelCost model(bool selective) {
  analysis::ModelCost cost;
  analysis::LayerCost l;
  l.name = "Block";
  l.count = 8;
  l.params = 500'000'000;
  l.weightBytes = 1'000'000'000;
  l.gradBytes = 2'000'000'000;
  l.boundaryBytes = 250'000'000;
  l.forwardFlops = 1'000'000'000'000;
  l.checkpointBytes = selective ? 4'000'000'000 : 250'000'000;
  l.recomputeFlops = selective ? 10'000'000'000 : l.forwardFlops;
  cost.layers = {l};
  cost.tokens = 4096;
  return cost;
}

analysis::PlanChoices choices(bool host) {
  analysis::PlanChoices c;
  c.microBatches = 4;
  c.checkpointsOnHost = host;
  c.forwardLoops = {{"Block", 8}};
  return c;
}

/// A GPU: 1 PFLOP/s at full efficiency, \p link bytes/s each way at half
/// duplex, AdamW at 1 TB/s.
analysis::StepRates gpu(double link) {
  analysis::StepRates r;
  r.name = "test-gpu";
  r.peakFlops = 1e15;
  r.h2dBytesPerSecond = r.d2hBytesPerSecond = link;
  r.duplexFactor = 0.5;
  r.optimizerBytesPerSecond = 1e12;
  r.copiesShareCompute = false;
  return r;
}

} // namespace

TEST(StepTime, SharedLink) {
  // Alone each way; both at once at half duplex: the shorter runs at half
  // rate beside the longer, the rest of the longer alone.
  EXPECT_DOUBLE_EQ(analysis::sharedLinkSeconds(2, 0, 0.5), 2);
  EXPECT_DOUBLE_EQ(analysis::sharedLinkSeconds(2, 2, 0.5), 4);
  EXPECT_DOUBLE_EQ(analysis::sharedLinkSeconds(1, 3, 0.5), 4);
  EXPECT_DOUBLE_EQ(analysis::sharedLinkSeconds(1, 3, 1.0), 3);
}

TEST(StepTime, StreamsOfAGpuStep) {
  analysis::StepTimeEstimate e =
      analysis::estimateStepTime(model(false), choices(true), gpu(50e9));
  // Compute: 8 x 4 x (3 + 1) TFLOP at 1 PFLOP/s.
  EXPECT_NEAR(e.computeSeconds, 0.128, 1e-12);
  EXPECT_DOUBLE_EQ(e.recomputeFlops, 32e12);
  // h2d: 2 x 8 - 2 resident loads of 1 GB, 8 x 4 checkpoints of 0.25 GB
  // and 2 x 8 x 4 activations of 0.25 GB; d2h: 8 gradients of 2 GB and the
  // same checkpoints and activations.
  EXPECT_DOUBLE_EQ(e.h2dBytes, 14e9 + 8e9 + 16e9);
  EXPECT_DOUBLE_EQ(e.d2hBytes, 16e9 + 8e9 + 16e9);
  EXPECT_DOUBLE_EQ(e.linkSeconds,
                   analysis::sharedLinkSeconds(38e9 / 50e9, 40e9 / 50e9, 0.5));
  // AdamW: 28 B x 4 G parameters at 1 TB/s.
  EXPECT_DOUBLE_EQ(e.optimizerSeconds, 0.112);
  EXPECT_EQ(e.bound, "d2h");
  // The longest stream plus the first load and the last gradient return.
  EXPECT_DOUBLE_EQ(e.stepSeconds, e.linkSeconds + 1e9 / 50e9 + 2e9 / 50e9);
}

TEST(StepTime, CpuDeviceAddsCopiesToCompute) {
  analysis::StepRates cpu = analysis::cpuDeviceStepRates();
  EXPECT_TRUE(cpu.copiesShareCompute);
  analysis::StepTimeEstimate e =
      analysis::estimateStepTime(model(true), choices(true), cpu);
  EXPECT_DOUBLE_EQ(e.stepSeconds,
                   e.computeSeconds + e.h2dSeconds + e.d2hSeconds);
  EXPECT_EQ(e.optimizerSeconds, 0);
}

TEST(StepTime, MoreLinkBandwidthNeverMakesHostCheckpointsWorse) {
  // Monotone: as the link gets faster neither plan gets slower, and the
  // selective plan with host checkpoints (which moves more bytes) gains at
  // least as much as full recomputation does.
  double lastSelective = 1e300, lastFull = 1e300, lastGap = 1e300;
  for (double link : {5e9, 12e9, 25e9, 55e9, 150e9, 300e9, 1e12, 1e13}) {
    double sel =
        analysis::estimateStepTime(model(true), choices(true), gpu(link))
            .stepSeconds;
    double full =
        analysis::estimateStepTime(model(false), choices(true), gpu(link))
            .stepSeconds;
    EXPECT_LE(sel, lastSelective) << link;
    EXPECT_LE(full, lastFull) << link;
    EXPECT_LE(sel - full, lastGap + 1e-12) << link;
    lastSelective = sel;
    lastFull = full;
    lastGap = sel - full;
  }
  // PCIe-like: the checkpoints bind and full recomputation wins; a fast
  // link makes the recomputation what costs and selective wins.
  EXPECT_GT(analysis::estimateStepTime(model(true), choices(true), gpu(25e9))
                .stepSeconds,
            analysis::estimateStepTime(model(false), choices(true), gpu(25e9))
                .stepSeconds);
  EXPECT_LT(analysis::estimateStepTime(model(true), choices(true), gpu(1e13))
                .stepSeconds,
            analysis::estimateStepTime(model(false), choices(true), gpu(1e13))
                .stepSeconds);
}

TEST(StepTime, MoreFlopsNeverMakesAPlanSlower) {
  double last = 1e300;
  for (double peak : {1e13, 1e14, 1e15, 1e16}) {
    analysis::StepRates r = gpu(55e9);
    r.peakFlops = peak;
    double t =
        analysis::estimateStepTime(model(false), choices(true), r).stepSeconds;
    EXPECT_LE(t, last) << peak;
    last = t;
  }
}

TEST(StepTime, GpuRatesComeFromTheProfile) {
  Expected<sim::Profile> p = sim::loadProfile("h200");
  ASSERT_TRUE(static_cast<bool>(p)) << p.message();
  analysis::StepRates r = analysis::gpuStepRates(*p, bundle::Precision::BF16);
  EXPECT_EQ(r.name, "h200");
  EXPECT_DOUBLE_EQ(r.peakFlops, p->device.peakFlopsBF16);
  EXPECT_DOUBLE_EQ(r.h2dBytesPerSecond, p->link.h2dBandwidth);
  EXPECT_DOUBLE_EQ(r.duplexFactor, p->link.duplexFactor);
  EXPECT_DOUBLE_EQ(r.optimizerBytesPerSecond, p->host.adamwBytesPerS);
  EXPECT_FALSE(r.copiesShareCompute);
  EXPECT_DOUBLE_EQ(analysis::gpuStepRates(*p, bundle::Precision::F32).peakFlops,
                   p->device.peakFlopsFP32);
  // The profile's GEMM efficiency: a small op runs below the peak.
  EXPECT_GT(r.computeSeconds(1e9, 1e9), 1e9 / r.peakFlops);
}

namespace {

/// `--recompute auto` for an 8B Llama (Llama-3-8B's shape, bf16) at 16
/// micro-batches of [4, 1024] in 13 GiB, priced on \p gpu.
std::vector<RecomputeCandidate> autoCandidates(const sim::Profile &gpu) {
  CompileOptions opts;
  opts.recompute = RecomputePolicy::Auto;
  opts.overrides = {{"vocab", 128256}, {"dim", 4096}, {"n_layers", 32},
                    {"n_heads", 32},   {"n_kv", 8},   {"ffn", 14336},
                    {"theta", 500000}};
  opts.stream.enabled = true;
  opts.stream.deviceMemory = 13ll << 30;
  opts.stream.batch = 4;
  opts.stream.seq = 1024;
  opts.stream.microBatches = 16;
  opts.stream.precision = bundle::Precision::BF16;
  opts.gpu = gpu;
  mlir::MLIRContext context;
  CompiledModel out;
  std::ostringstream errs;
  EXPECT_TRUE(compileModelFile("examples/tiny-llama.mt", opts, errs,
                               CompileStage::Differentiated, context, out))
      << errs.str();
  return out.recomputeCandidates;
}

/// The candidate \p policy of \p cs (fits), or null.
const RecomputeCandidate *find(const std::vector<RecomputeCandidate> &cs,
                               const std::string &policy) {
  for (const RecomputeCandidate &c : cs)
    if (c.recompute == policy && c.fits)
      return &c;
  return nullptr;
}

} // namespace

TEST(StepTime, AutoOnAGpuFollowsTheSimulatedLink) {
  // On the h200's PCIe link, selective's host checkpoints bind and auto
  // keeps full; as the link gets faster selective's simulated step never
  // gets longer, and once it is chosen it stays chosen.
  Expected<sim::Profile> h200 = sim::loadProfile("h200");
  ASSERT_TRUE(static_cast<bool>(h200)) << h200.message();
  double lastSelective = 1e300;
  bool selectiveChosen = false;
  for (double scale : {1.0, 2.0, 4.0, 16.0}) {
    sim::Profile p = *h200;
    p.link.h2dBandwidth *= scale;
    p.link.d2hBandwidth *= scale;
    std::vector<RecomputeCandidate> cs = autoCandidates(p);
    const RecomputeCandidate *sel = find(cs, "selective");
    const RecomputeCandidate *full = find(cs, "full");
    ASSERT_TRUE(sel && full) << scale;
    EXPECT_EQ(sel->checkpoints, "host");
    EXPECT_LE(sel->estimate.stepSeconds, lastSelective * (1 + 1e-9)) << scale;
    lastSelective = sel->estimate.stepSeconds;
    if (scale == 1.0) {
      EXPECT_TRUE(full->chosen);
      EXPECT_GT(sel->estimate.stepSeconds, full->estimate.stepSeconds);
    }
    if (selectiveChosen)
      EXPECT_TRUE(sel->chosen) << scale;
    selectiveChosen = sel->chosen;
  }
  // 16x PCIe (~NVLink-C2C class): the checkpoints no longer bind.
  EXPECT_TRUE(selectiveChosen);
}

TEST(StepTime, MixedRecomputationPerInstance) {
  // The first S instances selective (recompute 10 GFLOP, copy 4 GB each way
  // per micro-batch), the others full (recompute the forward, copy their
  // 0.25 GB input): S = 0 is full, S = 8 is selective, and S in between
  // lies between them, in recomputed FLOPs and in bytes.
  analysis::PlanChoices c = choices(true);
  analysis::StepTimeEstimate all =
      analysis::estimateStepTime(model(true), c, gpu(50e9));
  analysis::StepTimeEstimate full =
      analysis::estimateStepTime(model(false), c, gpu(50e9));
  c.selectiveLayers = 8;
  analysis::StepTimeEstimate s8 =
      analysis::estimateStepTime(model(true), c, gpu(50e9));
  EXPECT_DOUBLE_EQ(s8.stepSeconds, all.stepSeconds);
  c.selectiveLayers = 0;
  analysis::StepTimeEstimate s0 =
      analysis::estimateStepTime(model(true), c, gpu(50e9));
  EXPECT_DOUBLE_EQ(s0.recomputeFlops, full.recomputeFlops);
  EXPECT_DOUBLE_EQ(s0.d2hBytes, full.d2hBytes);
  c.selectiveLayers = 3;
  analysis::StepTimeEstimate s3 =
      analysis::estimateStepTime(model(true), c, gpu(50e9));
  EXPECT_DOUBLE_EQ(s3.recomputeFlops, 4 * (3 * 10e9 + 5 * 1e12));
  EXPECT_DOUBLE_EQ(s3.d2hBytes - full.d2hBytes, 4 * 3 * (4e9 - 0.25e9));
  EXPECT_LT(s3.recomputeFlops, full.recomputeFlops);
  EXPECT_GT(s3.recomputeFlops, all.recomputeFlops);
}
