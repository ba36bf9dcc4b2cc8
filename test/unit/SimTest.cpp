//===- SimTest.cpp - The step simulator (lib/Sim) ---------------*- C++ -*-===//
//
// Part of mtc. Hardware profiles (parsing, errors, the built-in ones, the
// efficiency curves) and the event simulation on toy step plans whose
// timelines are computed by hand in the comments: a copy hidden under
// compute, copies exposed, an optimizer-bound step, the duplex penalty,
// segment checkpointing, bf16 gradients and the conversion pool; and
// monotonicity over random profiles and plans (a faster link, device or
// host is never slower); the cost rules of the optional per-kind memory
// bandwidths and measured GEMM shapes.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Bundle.h"
#include "lib/Sim/Cost.h"
#include "lib/Sim/Profile.h"
#include "lib/Sim/Simulator.h"
#include "lib/Sim/Timeline.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc::sim {
namespace {

using bundle::Bundle;
using bundle::Function;
using bundle::Op;
using bundle::PlanCommand;

const char *kProfile = R"({
  "name": "toy", "description": "round numbers", "source": "test",
  "device": {"memory_bytes": 1000000000,
             "peak_flops": {"bf16": 2e9, "fp32": 1e9},
             "gemm_efficiency": [{"flops": 1, "efficiency": 1}],
             "attention_efficiency": [{"flops": 1, "efficiency": 1}],
             "memory_bandwidth": 1e18, "launch_latency_s": 0},
  "link": {"h2d_bandwidth": 4e7, "d2h_bandwidth": 4e7, "duplex_factor": 1,
           "copy_latency_s": 0},
  "host": {"cores": 4, "memory_bandwidth": 1e18, "adamw_bytes_per_s": 1e18}
})";

Profile toyProfile() {
  Expected<Profile> p = parseProfile(kProfile, "toy.json");
  EXPECT_TRUE(p.ok()) << p.message();
  return *p;
}

Op op(std::string name, std::vector<int> operands, std::vector<int> results,
      std::string symbol = "") {
  Op o;
  o.name = std::move(name);
  o.operands = std::move(operands);
  o.results = std::move(results);
  o.symbol = std::move(symbol);
  return o;
}

PlanCommand cmd(std::string name, std::map<std::string, bundle::Attr> attrs,
                std::vector<PlanCommand> body = {}) {
  PlanCommand c;
  c.op = std::move(name);
  c.attrs = std::move(attrs);
  c.body = std::move(body);
  return c;
}

/// `count` instances of a layer of one [100, 100] fp32 weight (10,000
/// params: 40,000 bytes per load) on micro-batches of [1, 50]: its forward
/// is one matmul (2 x 50 x 100 x 100 = 1 MFLOP: 1 ms at 1 GFLOP/s), its
/// backward a matmul and a weight_grad (2 ms). No model-level parameters,
/// no stages: the program is the two loops.
Bundle toyBundle(int64_t count, int64_t micro = 1, int64_t depth = 2) {
  Bundle b;
  b.model = "Toy";
  bundle::Layer l;
  l.name = "Block";
  l.count = count;
  l.params = {bundle::Param{"w", {100, 100}, DType::F32, "normal", {0.02}}};
  Function f;
  f.values = {{{kDimB, kDimS, 100}, DType::F32},
              {{100, 100}, DType::F32},
              {{kDimB, kDimS, 100}, DType::F32}};
  f.args = {0};
  f.ops = {op("param_ref", {}, {1}, "w"), op("matmul", {0, 1}, {2})};
  f.results = {2};
  l.functions["forward"] = f;
  Function g;
  g.values = {{{kDimB, kDimS, 100}, DType::F32},
              {{kDimB, kDimS, 100}, DType::F32},
              {{100, 100}, DType::F32},
              {{kDimB, kDimS, 100}, DType::F32},
              {{100, 100}, DType::F32}};
  g.args = {0, 1};
  g.ops = {op("param_ref", {}, {2}, "w"), op("matmul", {1, 2}, {3}),
           op("weight_grad", {0, 1}, {4}), op("param_grad", {4}, {}, "w")};
  g.results = {3};
  l.functions["backward"] = g;
  b.layers.push_back(l);
  Function fb;
  fb.values = {{{kDimB, kDimS, 100}, DType::F32},
               {{kDimB, kDimS, 100}, DType::F32},
               {{kDimB, kDimS, 100}, DType::F32}};
  fb.args = {0};
  fb.ops = {op("apply_layers", {0}, {1}, "Block"),
            op("apply_layers_grad", {1}, {2}, "Block")};
  fb.ops[0].attrs = fb.ops[1].attrs = {{"first", int64_t(0)}, {"count", count}};
  fb.results = {2};
  b.functions["forward_backward"] = fb;
  auto step = std::make_shared<bundle::StepPlan>();
  step->batch = 1;
  step->seq = 50;
  step->microBatches = micro;
  step->prefetchDepth = depth;
  step->precision = "fp32";
  const int64_t ahead = depth - 1;
  step->program = {cmd("load_model_weights", {}),
                   cmd("layers",
                       {{"layer", std::string("Block")},
                        {"first", int64_t(0)},
                        {"count", count},
                        {"direction", std::string("forward")},
                        {"op_index", int64_t(0)}},
                       {cmd("optimizer_update", {{"ahead", ahead}}),
                        cmd("prefetch", {{"ahead", ahead}}),
                        cmd("save", {{"to", std::string("device")}}),
                        cmd("wait_weights", {}), cmd("compute", {})}),
                   cmd("layers",
                       {{"layer", std::string("Block")},
                        {"first", int64_t(0)},
                        {"count", count},
                        {"direction", std::string("backward")},
                        {"op_index", int64_t(1)}},
                       {cmd("prefetch", {{"ahead", ahead}}),
                        cmd("restore", {{"from", std::string("device")}}),
                        cmd("wait_weights", {}), cmd("compute", {}),
                        cmd("grad_return", {})}),
                   cmd("return_model_grads", {})};
  b.step = step;
  return b;
}

/// toyBundle with segment checkpointing every \p every instances (recompute
/// full); with \p hostCheckpoints the kept checkpoints wait in host memory
/// (the forward saves to and the backward restores from "host").
Bundle toySegmentBundle(int64_t count, int64_t every, bool hostCheckpoints) {
  Bundle b =
      toyBundle(count, /*micro=*/1, /*depth=*/std::max<int64_t>(2, every));
  b.step->recompute = "full";
  b.step->checkpointEvery = every;
  if (hostCheckpoints) {
    b.step->checkpoints = "host";
    b.step->buffers.push_back(
        {"checkpoints.host", "checkpoints", "host", 2 * 20032, -1});
    for (PlanCommand &c : b.step->program)
      for (PlanCommand &x : c.body) {
        if (x.op == "save")
          x.attrs["to"] = std::string("host");
        if (x.op == "restore")
          x.attrs["from"] = std::string("host");
      }
  }
  return b;
}

SimResult simulate(const Bundle &b, const Profile &p, bool spans = false) {
  SimOptions o;
  o.clip = false;
  o.keepSpans = spans;
  Expected<SimResult> r = simulateStep(b, p, o);
  EXPECT_TRUE(r.ok()) << r.message();
  return r.ok() ? *r : SimResult{};
}

TEST(SimProfile, ParsesEveryField) {
  Profile p = toyProfile();
  EXPECT_EQ(p.name, "toy");
  EXPECT_EQ(p.device.memoryBytes, 1000000000);
  EXPECT_DOUBLE_EQ(p.peakFlops("bf16"), 2e9);
  EXPECT_DOUBLE_EQ(p.peakFlops("fp32"), 1e9);
  EXPECT_DOUBLE_EQ(p.link.h2dBandwidth, 4e7);
  EXPECT_EQ(p.host.cores, 4);
  // convert_bytes_per_s defaults to memory_bandwidth / cores.
  EXPECT_DOUBLE_EQ(p.host.convertBytesPerS, 1e18 / 4);
}

TEST(SimProfile, EfficiencyIsLogLinearAndClamped) {
  EfficiencyCurve c;
  c.points = {{1e6, 0.1}, {1e8, 0.5}, {1e12, 0.9}};
  EXPECT_DOUBLE_EQ(c.at(1), 0.1);
  EXPECT_DOUBLE_EQ(c.at(1e6), 0.1);
  EXPECT_NEAR(c.at(1e7), 0.3, 1e-12); // halfway in log10
  EXPECT_NEAR(c.at(1e10), 0.7, 1e-12);
  EXPECT_DOUBLE_EQ(c.at(1e15), 0.9);
}

/// parseProfile of kProfile with \p from replaced by \p to.
std::string profileError(const std::string &from, const std::string &to) {
  std::string text = kProfile;
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  Expected<Profile> p = parseProfile(text, "bad.json");
  EXPECT_FALSE(p.ok());
  return p.ok() ? "" : p.message();
}

TEST(SimProfile, ErrorsNameTheFileTheFieldAndTheProblem) {
  EXPECT_EQ(profileError("\"fp32\": 1e9", "\"fp32\": -1"),
            "bad.json: field 'device.peak_flops.fp32': expected a number >= "
            "1e+06 and <= 1e+18, got -1");
  EXPECT_EQ(profileError("\"name\": \"toy\", ", ""),
            "bad.json: field 'name': missing");
  EXPECT_EQ(profileError("\"duplex_factor\": 1", "\"duplex_factor\": 0.2"),
            "bad.json: field 'link.duplex_factor': expected a number >= 0.5 "
            "and <= 1, got 0.2");
  EXPECT_EQ(profileError("\"cores\": 4", "\"cores\": \"four\""),
            "bad.json: field 'host.cores': expected a number, got string "
            "\"four\"");
  EXPECT_NE(profileError("\"launch_latency_s\": 0", "\"launch_latency\": 0")
                .find("field 'device.launch_latency': unknown field"),
            std::string::npos);
  EXPECT_EQ(profileError("[{\"flops\": 1, \"efficiency\": 1}],\n             "
                         "\"attention",
                         "[{\"flops\": 1, \"efficiency\": 1}, {\"flops\": 1, "
                         "\"efficiency\": 1}], \"attention"),
            "bad.json: field 'device.gemm_efficiency[1].flops': points must "
            "have increasing flops (1 after 1.0)");
  EXPECT_EQ(profileError("\"efficiency\": 1}],\n             \"attention",
                         "\"efficiency\": 1.5}], \"attention"),
            "bad.json: field 'device.gemm_efficiency[0].efficiency': expected "
            "a number >= 1e-06 and <= 1, got 1.5");
  Expected<Profile> notJson = parseProfile("{\"name\": ", "x.json");
  ASSERT_FALSE(notJson.ok());
  EXPECT_EQ(notJson.message().rfind("x.json: not valid JSON: ", 0), 0u);
  Expected<Profile> missing = loadProfile("/nonexistent/gpu.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message().rfind("/nonexistent/gpu.json: cannot open: No "
                                    "such file or directory (a hardware "
                                    "profile",
                                    0),
            0u)
      << missing.message();
  Expected<Profile> unknown = loadProfile("h300");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("unknown hardware profile 'h300' (built "
                                   "in: a100-80gb, b200, gh200, h100-pcie, "
                                   "h100-sxm, h200, rtx4090"),
            std::string::npos);
}

TEST(SimProfile, BuiltinProfilesParse) {
  std::vector<std::string> names = builtinProfileNames();
  EXPECT_EQ(names.size(), 7u);
  for (const std::string &n : names) {
    Expected<Profile> p = loadProfile(n);
    ASSERT_TRUE(p.ok()) << p.message();
    EXPECT_EQ(p->name, n);
    EXPECT_FALSE(p->source.empty());
    EXPECT_GT(p->peakFlops("bf16"), p->peakFlops("fp32"));
  }
}

/// kProfile with \p device inserted before the device's "memory_bandwidth".
std::string withDevice(const std::string &device) {
  std::string text = kProfile;
  size_t at = text.find("\"memory_bandwidth\": 1e18, \"launch");
  EXPECT_NE(at, std::string::npos);
  text.insert(at, device + ", ");
  return text;
}

TEST(SimProfile, OptionalKindBandwidthsAndGemmShapesParse) {
  Profile toy = toyProfile();
  EXPECT_TRUE(toy.device.memoryBandwidthByKind.empty());
  EXPECT_TRUE(toy.device.gemmShapes.empty());
  EXPECT_DOUBLE_EQ(toy.device.bandwidthOf("transpose"), 1e18);
  Expected<Profile> p = parseProfile(
      withDevice("\"memory_bandwidth_by_kind\": {\"transpose\": 2e9, "
                 "\"rmsnorm_grad\": 3e9}, \"gemm_shapes\": [{\"m\": 64, "
                 "\"n\": 128, \"k\": 128, \"efficiency\": 0.5}]"),
      "kinds.json");
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_DOUBLE_EQ(p->device.bandwidthOf("transpose"), 2e9);
  EXPECT_DOUBLE_EQ(p->device.bandwidthOf("rmsnorm_grad"), 3e9);
  EXPECT_DOUBLE_EQ(p->device.bandwidthOf("add"), 1e18); // the default
  EXPECT_DOUBLE_EQ(p->device.bandwidthOf(""), 1e18);
  ASSERT_EQ(p->device.gemmShapes.size(), 1u);
  EXPECT_DOUBLE_EQ(p->device.gemmShapes[0].m, 64);
  EXPECT_DOUBLE_EQ(p->device.gemmShapes[0].n, 128);
  EXPECT_DOUBLE_EQ(p->device.gemmShapes[0].k, 128);
  EXPECT_DOUBLE_EQ(p->device.gemmShapes[0].efficiency, 0.5);
}

/// The error of kProfile with \p device fields added.
std::string deviceError(const std::string &device) {
  Expected<Profile> p = parseProfile(withDevice(device), "bad.json");
  EXPECT_FALSE(p.ok()) << device;
  return p.ok() ? "" : p.message();
}

TEST(SimProfile, KindBandwidthAndGemmShapeErrors) {
  EXPECT_EQ(deviceError("\"memory_bandwidth_by_kind\": {\"transposes\": 1e9}"),
            "bad.json: field 'device.memory_bandwidth_by_kind.transposes': "
            "not a bundle op name (docs/bundle.md)");
  EXPECT_EQ(deviceError("\"memory_bandwidth_by_kind\": {\"add\": 0}"),
            "bad.json: field 'device.memory_bandwidth_by_kind.add': expected "
            "a number >= 1e+06 and <= 1e+18, got 0");
  EXPECT_EQ(deviceError("\"memory_bandwidth_by_kind\": {\"add\": \"fast\"}"),
            "bad.json: field 'device.memory_bandwidth_by_kind.add': expected "
            "a number, got string \"fast\"");
  EXPECT_EQ(deviceError("\"memory_bandwidth_by_kind\": [1e9]"),
            "bad.json: field 'device.memory_bandwidth_by_kind': expected an "
            "object of op name -> bytes/s, got array [1000000000.0]");
  EXPECT_EQ(deviceError("\"gemm_shapes\": {\"m\": 1}"),
            "bad.json: field 'device.gemm_shapes': expected an array of "
            "{\"m\": M, \"n\": N, \"k\": K, \"efficiency\": E} points, got "
            "object {\"m\":1}");
  EXPECT_EQ(deviceError("\"gemm_shapes\": [{\"m\": 0, \"n\": 1, \"k\": 1, "
                        "\"efficiency\": 0.5}]"),
            "bad.json: field 'device.gemm_shapes[0].m': expected a number >= "
            "1 and <= 1e+12, got 0");
  EXPECT_EQ(deviceError("\"gemm_shapes\": [{\"m\": 8, \"n\": 2.5, \"k\": 1, "
                        "\"efficiency\": 0.5}]"),
            "bad.json: field 'device.gemm_shapes[0].n': expected a whole "
            "number, got 2.5");
  EXPECT_EQ(deviceError("\"gemm_shapes\": [{\"m\": 8, \"n\": 8, \"k\": 8, "
                        "\"efficiency\": 1.5}]"),
            "bad.json: field 'device.gemm_shapes[0].efficiency': expected a "
            "number >= 1e-06 and <= 1, got 1.5");
  EXPECT_EQ(
      deviceError("\"gemm_shapes\": [{\"m\": 8, \"n\": 8, \"efficiency\": "
                  "0.5}]"),
      "bad.json: field 'device.gemm_shapes[0].k': missing");
  EXPECT_NE(deviceError("\"gemm_shapes\": [{\"m\": 8, \"n\": 8, \"k\": 8, "
                        "\"flops\": 1, \"efficiency\": 0.5}]")
                .find("field 'device.gemm_shapes[0].flops': unknown field"),
            std::string::npos);
}

TEST(SimProfile, KernelScaleOverheadAndHostThreadsParse) {
  // Absent: the kernels run at the rates, nothing per kernel beyond the
  // launch, on processors of the device's own.
  Profile toy = toyProfile();
  EXPECT_DOUBLE_EQ(toy.device.kernelTimeScale, 1.0);
  EXPECT_DOUBLE_EQ(toy.device.kernelOverhead, 0.0);
  EXPECT_EQ(toy.device.hostThreads, 0);
  Expected<Profile> p = parseProfile(
      withDevice("\"kernel_time_scale\": 1.25, "
                 "\"kernel_overhead_s\": 2e-5, \"host_threads\": 2"),
      "cpu.json");
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_DOUBLE_EQ(p->device.kernelTimeScale, 1.25);
  EXPECT_DOUBLE_EQ(p->device.kernelOverhead, 2e-5);
  EXPECT_EQ(p->device.hostThreads, 2);
  EXPECT_DOUBLE_EQ(p->device.kernelFixedSeconds(), 2e-5);
}

TEST(SimProfile, KernelScaleOverheadAndHostThreadsErrors) {
  EXPECT_EQ(deviceError("\"kernel_time_scale\": 0"),
            "bad.json: field 'device.kernel_time_scale': expected a number >= "
            "0.001 and <= 100, got 0");
  EXPECT_EQ(deviceError("\"kernel_time_scale\": \"slow\""),
            "bad.json: field 'device.kernel_time_scale': expected a number, "
            "got string \"slow\"");
  EXPECT_EQ(deviceError("\"kernel_overhead_s\": -1e-6"),
            "bad.json: field 'device.kernel_overhead_s': expected a number >= "
            "0 and <= 1, got -1e-06");
  EXPECT_EQ(deviceError("\"host_threads\": -1"),
            "bad.json: field 'device.host_threads': expected a number >= 0 "
            "and <= 1e+06, got -1");
  EXPECT_EQ(deviceError("\"host_threads\": 1.5"),
            "bad.json: field 'device.host_threads': expected a whole number, "
            "got 1.5");
  EXPECT_NE(deviceError("\"kernel_scale\": 1")
                .find("field 'device.kernel_scale': unknown field"),
            std::string::npos);
}

// A number past a double's range was an uncaught exception of the JSON
// parser (std::terminate); it is an error with its place.
TEST(SimProfile, NumberBeyondADoubleIsAnErrorWithItsPlace) {
  EXPECT_EQ(profileError("\"fp32\": 1e9", "\"fp32\": 1e999"),
            "bad.json: line 4, column 50: number 1e999 is out of the range of "
            "a double");
  EXPECT_EQ(profileError("\"cores\": 4", "\"cores\": -1e999"),
            "bad.json: line 10, column 21: number -1e999 is out of the range "
            "of a double");
}

// An error quoting a value nested half a million levels deep (within the
// size limit) overflowed the stack (json::dump recurses per level); the
// quote is short and bounded.
TEST(SimProfile, DeeplyNestedValueIsAShortError) {
  const size_t depth = 500000;
  std::string deep = std::string(depth, '[') + std::string(depth, ']');
  Expected<Profile> p =
      parseProfile("{\"name\": " + deep + ", \"source\": \"x\"}", "deep.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.message().rfind("deep.json: field 'name': expected a string, "
                              "got array [[[[",
                              0),
            0u)
      << p.message().substr(0, 200);
  EXPECT_LT(p.message().size(), 200u);
}

// Tiny rates gave an infinite step time (printed as inf, tokens/s 0, mfu
// nan); every rate and efficiency has a floor, every memory size bounds.
TEST(SimProfile, RatesAndSizesAreBounded) {
  EXPECT_EQ(profileError("\"bf16\": 2e9", "\"bf16\": 1e-300"),
            "bad.json: field 'device.peak_flops.bf16': expected a number >= "
            "1e+06 and <= 1e+18, got 1e-300");
  EXPECT_EQ(profileError("\"h2d_bandwidth\": 4e7", "\"h2d_bandwidth\": 1e-300"),
            "bad.json: field 'link.h2d_bandwidth': expected a number >= "
            "1e+06 and <= 1e+18, got 1e-300");
  EXPECT_EQ(profileError("\"adamw_bytes_per_s\": 1e18",
                         "\"adamw_bytes_per_s\": 1e19"),
            "bad.json: field 'host.adamw_bytes_per_s': expected a number >= "
            "1e+06 and <= 1e+18, got 1e+19");
  EXPECT_EQ(profileError("\"efficiency\": 1}],\n             \"attention",
                         "\"efficiency\": 1e-300}], \"attention"),
            "bad.json: field 'device.gemm_efficiency[0].efficiency': expected "
            "a number >= 1e-06 and <= 1, got 1e-300");
  EXPECT_EQ(
      profileError("\"memory_bytes\": 1000000000", "\"memory_bytes\": 1e18"),
      "bad.json: field 'device.memory_bytes': expected a number >= "
      "1048576 and <= 1125899906842624, got 1e+18");
  EXPECT_EQ(profileError("\"memory_bytes\": 1000000000", "\"memory_bytes\": 1"),
            "bad.json: field 'device.memory_bytes': expected a number >= "
            "1048576 and <= 1125899906842624, got 1");
  EXPECT_EQ(profileError("\"memory_bytes\": 1000000000",
                         "\"memory_bytes\": 1000000000.5"),
            "bad.json: field 'device.memory_bytes': expected a whole number, "
            "got 1000000000.5");
}

/// kProfile with the gemm_efficiency curve replaced by \p curve.
std::string withGemmCurve(const std::string &curve) {
  std::string text = kProfile;
  std::string from = R"("gemm_efficiency": [{"flops": 1, "efficiency": 1}])";
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos);
  text.replace(at, from.size(), "\"gemm_efficiency\": " + curve);
  return text;
}

// The simulation's cost grows with the points and shapes it searches per
// op: both are bounded.
TEST(SimProfile, CurvesAndShapesAreBounded) {
  std::string points = "[";
  for (int i = 0; i < 1025; ++i)
    points += std::string(i ? ", " : "") +
              "{\"flops\": " + std::to_string(i + 1) + ", \"efficiency\": 0.5}";
  points += "]";
  Expected<Profile> p = parseProfile(withGemmCurve(points), "bad.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.message(), "bad.json: field 'device.gemm_efficiency': has 1025 "
                         "points, more than the limit of 1024");
  std::string shapes = "\"gemm_shapes\": [";
  for (int i = 0; i < 4097; ++i)
    shapes += std::string(i ? ", " : "") +
              "{\"m\": 8, \"n\": 8, \"k\": 8, \"efficiency\": 0.5}";
  shapes += "]";
  EXPECT_EQ(deviceError(shapes), "bad.json: field 'device.gemm_shapes': has "
                                 "4097 shapes, more than the limit of 4096");
}

/// A fresh directory for files of one test.
std::string tempDir() {
  std::string d = ::testing::TempDir() + "/mtc-sim-XXXXXX";
  if (!::mkdtemp(d.data()))
    ADD_FAILURE() << "mkdtemp " << d << " failed";
  return d;
}

// A directory or /dev/zero read as a profile was a JSON parse error at line
// 1; a FIFO hung in open(); a huge file was read whole. Each is refused by
// what it is, before anything is read.
TEST(SimProfile, SpecialFilesAndHugeFilesAreRefusedUnread) {
  std::string d = tempDir();
  auto starts = [](const Expected<Profile> &p, const std::string &prefix) {
    EXPECT_FALSE(p.ok());
    EXPECT_EQ(p.message().rfind(prefix, 0), 0u) << p.message();
  };
  starts(loadProfile(d), d + ": is a directory");
  starts(loadProfile("/dev/zero"),
         "/dev/zero: is a character device, not a regular file");
  ASSERT_EQ(::mkfifo((d + "/fifo.json").c_str(), 0600), 0);
  starts(loadProfile(d + "/fifo.json"),
         d + "/fifo.json: is a FIFO, not a regular file");
  {
    std::ofstream big(d + "/big.json");
    big << std::string((1 << 20) + 1, ' ');
  }
  starts(loadProfile(d + "/big.json"),
         d + "/big.json: 1048577 bytes, more than the limit of 1048576");
  {
    std::ofstream ok(d + "/ok.json");
    ok << kProfile;
  }
  Expected<Profile> p = loadProfile(d + "/ok.json");
  EXPECT_TRUE(p.ok()) << p.message();
}

TEST(SimCost, KernelScaleAndOverheadPriceEveryKernel) {
  // The add, transpose and matmul of KindBandwidthsAndShapesPriceTheirOps:
  // the scale multiplies each kernel's work (FLOPs or bytes over the rate),
  // the overhead is added once per kernel beside the launch latency.
  Function f;
  f.values = {{{kDimB, kDimS, 64}, DType::F32},
              {{kDimB, kDimS, 64}, DType::F32},
              {{64, 32}, DType::F32},
              {{kDimB, kDimS, 32}, DType::F32}};
  f.args = {0, 2};
  f.ops = {op("add", {0, 0}, {1}), op("matmul", {0, 2}, {3})};
  f.results = {1, 3};
  Profile p = toyProfile();
  p.device.memoryBandwidth = 1e9;
  p.device.gemmEfficiency.points = {{1, 0.5}};
  p.device.launchLatency = 1e-6;
  const double addWork = 3 * 16 * 64 * 4 / 1e9;
  const double flops = 2.0 * 16 * 32 * 64, mmWork = flops / (1e9 * 0.5);
  CostModel cost(p, bundle::Precision::F32);
  EXPECT_DOUBLE_EQ(cost.function(f, nullptr, 2, 8).seconds,
                   addWork + mmWork + 2e-6);
  p.device.kernelTimeScale = 1.5;
  p.device.kernelOverhead = 4e-6;
  Cost c = cost.function(f, nullptr, 2, 8);
  EXPECT_NEAR(c.seconds, 1.5 * (addWork + mmWork) + 2 * (1e-6 + 4e-6), 1e-15);
  EXPECT_EQ(c.kernels, 2);
  EXPECT_DOUBLE_EQ(c.gemmFlops, flops); // the work itself does not change
  EXPECT_NEAR(cost.gemmSeconds(flops), 1.5 * mmWork + 5e-6, 1e-15);
  EXPECT_NEAR(cost.memorySeconds(1e3, "add"), 1.5 * 1e-6 + 5e-6, 1e-15);
  EXPECT_NEAR(cost.attentionSeconds(1e3), 1.5 * 1e-6 + 5e-6, 1e-15);
}

TEST(SimProfile, GemmEfficiencyCorrectedByTheNearestMeasuredShape) {
  DeviceProfile d;
  // 0.2 at 2e5 FLOPs rising to 0.6 at 2e7 (log-linear).
  d.gemmEfficiency.points = {{2e5, 0.2}, {2e7, 0.6}};
  // Without shapes: the curve at 2 m n k.
  EXPECT_NEAR(d.gemmEfficiencyAt(100, 100, 10), 0.2, 1e-12);
  EXPECT_NEAR(d.gemmEfficiencyAt(100, 100, 100), 0.4, 1e-12);
  // A thin product measured at 1.5x the curve (0.4 at 2e6 FLOPs), a
  // square one at 0.5x.
  d.gemmShapes = {{1000, 100, 10, 0.6}, {100, 100, 100, 0.2}};
  EXPECT_NEAR(d.gemmEfficiencyAt(1000, 100, 10), 0.6, 1e-12); // measured
  EXPECT_NEAR(d.gemmEfficiencyAt(100, 100, 100), 0.2, 1e-12); // measured
  // Equal FLOPs, different shapes: each takes its neighbour's deviation.
  EXPECT_NEAR(d.gemmEfficiencyAt(2000, 100, 10), d.gemmEfficiency.at(4e6) * 1.5,
              1e-12);
  EXPECT_NEAR(d.gemmEfficiencyAt(100, 100, 200), d.gemmEfficiency.at(4e6) * 0.5,
              1e-12);
  // Capped at the peak.
  d.gemmShapes = {{100, 100, 100, 0.9}};
  EXPECT_DOUBLE_EQ(d.gemmEfficiencyAt(1000, 1000, 1000), 1.0);
  // Empty products take the curve.
  EXPECT_NEAR(d.gemmEfficiencyAt(0, 100, 100), 0.2, 1e-12);
}

TEST(SimCost, KindBandwidthsAndShapesPriceTheirOps) {
  // x [B, S, 64] -> transpose -> [B, 64, S]; add x + x; matmul x [B, S, 64]
  // by w [64, 32]; at [2, 8]: 16 rows.
  Function f;
  f.values = {{{kDimB, kDimS, 64}, DType::F32},
              {{kDimB, 64, kDimS}, DType::F32},
              {{kDimB, kDimS, 64}, DType::F32},
              {{64, 32}, DType::F32},
              {{kDimB, kDimS, 32}, DType::F32}};
  f.args = {0, 3};
  f.ops = {op("transpose", {0}, {1}), op("add", {0, 0}, {2}),
           op("matmul", {0, 3}, {4})};
  f.results = {1, 2, 4};
  Profile p = toyProfile();
  p.device.memoryBandwidth = 1e9;
  p.device.memoryBandwidthByKind = {{"transpose", 2.5e8}};
  p.device.gemmEfficiency.points = {{1, 0.5}};
  CostModel cost(p, bundle::Precision::F32);
  const double bytes = 16 * 64 * 4; // one [2, 8, 64] fp32 tensor
  // The transpose (2 tensors) at its own rate, the add (3) at the default.
  EXPECT_DOUBLE_EQ(cost.function(f, nullptr, 2, 8, 0, 0, 1).seconds,
                   2 * bytes / 2.5e8);
  EXPECT_DOUBLE_EQ(cost.function(f, nullptr, 2, 8, 0, 1, 2).seconds,
                   3 * bytes / 1e9);
  // The matmul: 2 x 16 x 32 x 64 FLOPs at 1e9 x 0.5; then with its shape
  // (m 16, n 32, k 64) measured at 0.8.
  const double flops = 2.0 * 16 * 32 * 64;
  Cost mm = cost.function(f, nullptr, 2, 8, 0, 2, 3);
  EXPECT_DOUBLE_EQ(mm.gemmFlops, flops);
  EXPECT_DOUBLE_EQ(mm.seconds, flops / (1e9 * 0.5));
  p.device.gemmShapes = {{16, 32, 64, 0.8}, {64, 32, 16, 0.1}};
  EXPECT_DOUBLE_EQ(cost.function(f, nullptr, 2, 8, 0, 2, 3).seconds,
                   flops / (1e9 * 0.8));
  // A weight gradient (xᵀ dy over 16 rows: 64 x 32 x 16) takes the other.
  Function g;
  g.values = {{{kDimB, kDimS, 64}, DType::F32},
              {{kDimB, kDimS, 32}, DType::F32},
              {{64, 32}, DType::F32}};
  g.args = {0, 1};
  g.ops = {op("weight_grad", {0, 1}, {2})};
  g.results = {2};
  EXPECT_DOUBLE_EQ(cost.function(g, nullptr, 2, 8).seconds,
                   flops / (1e9 * 0.1));
}

// Loads of 1 ms (40,000 bytes at 40 MB/s), forward 1 ms, backward 2 ms,
// gradient returns 1 ms; three instances, two slots:
//   h2d      load0 [0,1] load1 [1,2] load2 [2,3] (slot 0 after fwd0)
//            load0 [6,7] (slot 0 after bwd2; 1 and 2 are still resident)
//   compute  fwd0 [1,2] fwd1 [2,3] fwd2 [3,4] bwd2 [4,6] bwd1 [6,8]
//            bwd0 [8,10]
//   d2h      g2 [6,7] g1 [8,9] g0 [10,11]
// Step 11 ms; exposed: the first load (1 ms) and the last return (1 ms).
TEST(SimStep, CopyHiddenUnderCompute) {
  SimResult r = simulate(toyBundle(3), toyProfile());
  EXPECT_NEAR(r.stepSeconds, 11e-3, 1e-9);
  EXPECT_NEAR(r.computeSeconds, 9e-3, 1e-9);
  EXPECT_EQ(r.weightLoads, 4); // 2 N - depth
  EXPECT_NEAR(r.exposed["h2d"], 1e-3, 1e-9);
  EXPECT_NEAR(r.exposed["d2h"], 1e-3, 1e-9);
  EXPECT_NEAR(r.exposedCopySeconds, 2e-3, 1e-9);
  EXPECT_DOUBLE_EQ(r.h2dBytes, 4 * 40000.0);
  EXPECT_DOUBLE_EQ(r.d2hBytes, 3 * 40000.0);
  EXPECT_NEAR(r.hardwareFlops, 9e6, 1e-3);
  EXPECT_EQ(r.bottleneck, "h2d");
}

// Loads and returns of 10 ms (4 MB/s), two instances: both stay resident
// for the backward.
//   h2d      load0 [0,10] load1 [10,20]
//   compute  fwd0 [10,11] fwd1 [20,21] bwd1 [21,23] bwd0 [23,25]
//   d2h      g1 [23,33] g0 [33,43]
// Step 43 ms: 19 ms waiting for loads, 18 ms for returns.
TEST(SimStep, CopyExposed) {
  Profile p = toyProfile();
  p.link.h2dBandwidth = p.link.d2hBandwidth = 4e6;
  SimResult r = simulate(toyBundle(2), p);
  EXPECT_NEAR(r.stepSeconds, 43e-3, 1e-9);
  EXPECT_EQ(r.weightLoads, 2);
  EXPECT_NEAR(r.exposed["h2d"], 19e-3, 1e-9);
  EXPECT_NEAR(r.exposed["d2h"], 18e-3, 1e-9);
  EXPECT_EQ(r.bottleneck, "h2d");
}

// AdamW of one instance takes 10 ms (10,000 params x 28 B at 28 MB/s);
// all three are pending (the previous step's, deferred):
//   optimizer adam0 [0,10] adam1 [10,20] adam2 [20,30]
//   h2d      load0 [20,21] load1 [21,22] load2 [30,31] load0 [34,35]
//   compute  fwd0 [21,22] fwd1 [22,23] fwd2 [31,32] bwd2 [32,34]
//            bwd1 [34,36] bwd0 [36,38]
//   d2h      g2 [34,35] g1 [36,37] g0 [38,39]
// Step 39 ms; the optimizer's 30 ms are hidden for 3 ms only.
TEST(SimStep, OptimizerBound) {
  Profile p = toyProfile();
  p.host.adamwBytesPerS = 2.8e7;
  SimResult r = simulate(toyBundle(3), p);
  EXPECT_NEAR(r.stepSeconds, 39e-3, 1e-9);
  EXPECT_NEAR(r.optimizerSeconds, 30e-3, 1e-9);
  EXPECT_NEAR(r.exposed["optimizer"], 27e-3, 1e-9);
  EXPECT_NEAR(r.optimizerHiddenSeconds, 3e-3, 1e-9);
  EXPECT_NEAR(r.exposed["h2d"], 2e-3, 1e-9);
  EXPECT_EQ(r.bottleneck, "optimizer");
}

// A device on the host's cores (the CPU device, device.host_threads): its
// kernel threads and the host's commands share host.cores. OptimizerBound's
// step (3 instances, AdamW 10 ms each, deferred: all three pending at the
// start) on 4 cores with 4 kernel threads: AdamW takes max(1, 4 - 4) = 1
// thread (the optimizer's pool as `mtc train` sizes it), so while it runs
// beside a kernel 5 threads want 4 cores and every command runs at 4/5 of
// its speed; copies count one thread each.
TEST(SimStep, HostThreadsShareTheCoresWithHostWork) {
  Profile p = toyProfile();
  p.host.adamwBytesPerS = 2.8e7;
  SimResult alone = simulate(toyBundle(3), p);
  EXPECT_NEAR(alone.stepSeconds, 39e-3, 1e-9);
  p.device.hostThreads = 4;
  SimResult shared = simulate(toyBundle(3), p, /*spans=*/true);
  EXPECT_GT(shared.stepSeconds, alone.stepSeconds + 1e-4);
  // With the device's kernels alone (no AdamW in the step, no copy while
  // they run), the cores are never oversubscribed: the first forward runs
  // at full speed after its load.
  p.device.hostThreads = 4;
  p.host.adamwBytesPerS = 1e18;
  p.link.h2dBandwidth = p.link.d2hBandwidth = 1e18;
  EXPECT_NEAR(simulate(toyBundle(3), p).stepSeconds, 9e-3, 1e-9);
  // Every AdamW span beside compute is stretched by 5/4: the first one
  // (10 ms alone) starts with the first load and overlaps the kernels.
  bool stretched = false;
  for (const SimSpan &sp : shared.spans)
    if (sp.category == "optimizer" && sp.end - sp.start > 10e-3 + 1e-6)
      stretched = true;
  EXPECT_TRUE(stretched);
}

// The immediate placement (the plan's grads.host ring): nothing is pending
// when the step starts; each instance's AdamW (10 ms) follows its gradients
// into a ring slot, and a slot is refilled only after the update that read
// it:
//   d2h      g2 [6,7] (slot 0) g1 [8,9] (slot 1) g0 [17,18] (slot 0, free
//            once adam2 is done)
//   optimizer adam2 [7,17] adam1 [17,27] adam0 [27,37]
// Step 37 ms: the device is done at 10 ms, 27 ms of AdamW remain.
TEST(SimStep, ImmediateOptimizerFollowsTheGradientRing) {
  Bundle b = toyBundle(3);
  b.step->buffers.push_back({"grads.host", "grads", "host", 80000, -1});
  Profile p = toyProfile();
  p.host.adamwBytesPerS = 2.8e7;
  SimResult r = simulate(b, p, /*spans=*/true);
  EXPECT_NEAR(r.stepSeconds, 37e-3, 1e-9);
  EXPECT_NEAR(r.optimizerSeconds, 30e-3, 1e-9);
  EXPECT_NEAR(r.exposed["optimizer"], 27e-3, 1e-9);
  EXPECT_NEAR(r.optimizerHiddenSeconds, 3e-3, 1e-9);
  for (const SimSpan &s : r.spans)
    if (s.label == "grads Block.0") {
      EXPECT_NEAR(s.start, 17e-3, 1e-9);
      EXPECT_NEAR(s.end, 18e-3, 1e-9);
    }
  EXPECT_EQ(r.bottleneck, "optimizer");
}

// A bf16 plan's weight loads are converted on a host thread before their
// DMA (6 bytes per parameter at convert_bytes_per_s), in the h2d stream's
// order; without the conversion only the DMA of 2 bytes per parameter runs.
TEST(SimStep, HostConversionOfBf16Weights) {
  Bundle b = toyBundle(3);
  b.step->precision = "bf16";
  Profile p = toyProfile();
  p.host.convertBytesPerS = 6e7; // 10,000 params x 6 B: 1 ms
  SimOptions o;
  o.clip = false;
  o.convertThreads = 1;
  Expected<SimResult> with = simulateStep(b, p, o);
  o.convertOnHost = false;
  Expected<SimResult> without = simulateStep(b, p, o);
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_DOUBLE_EQ(with->h2dBytes, 4 * 20000.0);
  EXPECT_DOUBLE_EQ(without->h2dBytes, 4 * 20000.0);
  // bf16 GEMMs at 2 GFLOP/s: forward 0.5 ms, backward 1 ms; a load is
  // 1 ms of conversion then 0.5 ms of DMA. The first load is exposed
  // (1.5 ms with the conversion, 0.5 ms without), and so is the third
  // (its slot frees at 2 ms, it is needed from 2.5 ms on).
  EXPECT_GT(with->stepSeconds, without->stepSeconds);
  EXPECT_GT(with->exposed["host-memory"], 0.9e-3);
  EXPECT_DOUBLE_EQ(without->exposed["host-memory"], 0);
}

// Segment checkpointing, K = 2 over three instances (segments [0, 1] and
// [2]; two slots): the forward keeps the inputs of 0 and 2 only. The
// backward of a segment starts at its last instance: [2] copies its
// checkpoint into the segment buffer (no time at this memory bandwidth) and
// runs its backward; [0, 1] copies 0's checkpoint, waits for 0's weights
// (prefetched into slot 0 once bwd2 freed it), recomputes fwd0, then runs
// bwd1 and bwd0 with the weights still resident:
//   h2d      load0 [0,1] load1 [1,2] load2 [2,3] load0 [6,7]
//   compute  fwd0 [1,2] fwd1 [2,3] fwd2 [3,4] bwd2 [4,6] recompute0 [7,8]
//            bwd1 [8,10] bwd0 [10,12]
//   d2h      g2 [6,7] g1 [10,11] g0 [12,13]
// Step 13 ms: 2 ms more than without segments (CopyHiddenUnderCompute): the
// recomputed forward, and its wait for load0. Weight loads stay 2 N - 2.
TEST(SimStep, SegmentCheckpointingRecomputesTheSegmentsForwards) {
  SimResult r = simulate(toySegmentBundle(3, 2, false), toyProfile(),
                         /*spans=*/true);
  EXPECT_NEAR(r.stepSeconds, 13e-3, 1e-9);
  EXPECT_NEAR(r.computeSeconds, 10e-3, 1e-9);
  EXPECT_EQ(r.weightLoads, 4);
  EXPECT_NEAR(r.hardwareFlops, 10e6, 1e-3); // 3 + 1 forwards, 3 backwards
  EXPECT_NEAR(r.exposed["h2d"], 2e-3, 1e-9);
  EXPECT_NEAR(r.exposed["d2h"], 1e-3, 1e-9);
  int found = 0;
  for (const SimSpan &s : r.spans) {
    if (s.label == "recompute Block.0..0") {
      EXPECT_NEAR(s.start, 7e-3, 1e-9);
      EXPECT_NEAR(s.end, 8e-3, 1e-9);
      ++found;
    }
    if (s.label == "backward Block.1") {
      EXPECT_NEAR(s.start, 8e-3, 1e-9);
      ++found;
    }
    if (s.label == "segment input Block.0" ||
        s.label == "segment input Block.2")
      ++found;
  }
  EXPECT_EQ(found, 4);
  // K = 1 is the plan without segments.
  Bundle one = toySegmentBundle(3, 1, false);
  EXPECT_NEAR(simulate(one, toyProfile()).stepSeconds, 11e-3, 1e-9);
}

// With host checkpoints only the segments' first instances are offloaded
// (0 and 2: 2 x 20,032 bytes, not 3), and each segment's checkpoint comes
// back once, on the compute stream, for its recomputation (20,000 boundary
// bytes), instead of a restore per instance on h2d.
TEST(SimStep, SegmentCheckpointsInHostMemory) {
  SimResult seg = simulate(toySegmentBundle(3, 2, true), toyProfile(),
                           /*spans=*/true);
  SimResult all = simulate(toySegmentBundle(3, 1, true), toyProfile());
  EXPECT_DOUBLE_EQ(seg.d2hBytes, 3 * 40000.0 + 2 * 20032.0);
  EXPECT_DOUBLE_EQ(seg.h2dBytes, 4 * 40000.0 + 2 * 20000.0);
  EXPECT_DOUBLE_EQ(all.d2hBytes, 3 * 40000.0 + 3 * 20032.0);
  EXPECT_DOUBLE_EQ(all.h2dBytes, 4 * 40000.0 + 3 * 20032.0);
  int restores = 0;
  for (const SimSpan &s : seg.spans)
    if (s.label.rfind("restore ", 0) == 0) {
      EXPECT_EQ(s.stream, "compute");
      ++restores;
    }
  EXPECT_EQ(restores, 2);
}

// --grad-dtype bf16: each gradient return (1 ms of DMA) is followed on d2h
// by its host conversion (10,000 params x 6 B at 60 MB/s: 1 ms), so a
// gradient slot frees 1 ms later:
//   compute  ... bwd2 [4,6] bwd1 [6,8] bwd0 [8,10]
//   d2h      g2 [6,7] cvt [7,8] g1 [8,9] cvt [9,10] g0 [10,11] cvt [11,12]
// then the gradient norm reads 2 B/param (30,000 params at 120 MB/s:
// 0.5 ms; fp32: 1 ms): 12.5 ms, against 11 + 1 ms with fp32 gradients.
// AdamW moves 24 + 2 bytes per parameter instead of 24 + 4.
TEST(SimStep, Bf16GradientsAreConvertedOnTheHost) {
  Profile p = toyProfile();
  p.host.convertBytesPerS = 6e7;
  p.host.memoryBandwidth = 1.2e8;
  SimOptions o;
  o.convertThreads = 1;
  o.keepSpans = true;
  Expected<SimResult> fp32 = simulateStep(toyBundle(3), p, o);
  o.gradBytesPerParam = 2;
  Expected<SimResult> bf16 = simulateStep(toyBundle(3), p, o);
  ASSERT_TRUE(fp32.ok() && bf16.ok());
  EXPECT_NEAR(fp32->stepSeconds, 12e-3, 1e-9);
  EXPECT_NEAR(bf16->stepSeconds, 12.5e-3, 1e-9);
  EXPECT_DOUBLE_EQ(bf16->d2hBytes, 3 * 40000.0); // fp32 over the link
  EXPECT_NEAR(bf16->exposed["host-memory"], 1.5e-3, 1e-9);
  int converts = 0;
  for (const SimSpan &s : bf16->spans)
    if (s.label.rfind("convert grads Block.", 0) == 0) {
      EXPECT_EQ(s.stream, "d2h");
      EXPECT_NEAR(s.end - s.start, 1e-3, 1e-9);
      ++converts;
    }
  EXPECT_EQ(converts, 3);
  // AdamW (deferred: all three instances pending) at 26 MB/s.
  p.host.adamwBytesPerS = 2.6e7;
  o.keepSpans = false;
  Expected<SimResult> adam = simulateStep(toyBundle(3), p, o);
  ASSERT_TRUE(adam.ok());
  EXPECT_NEAR(adam->optimizerSeconds, 30e-3, 1e-9);
  // Converted on the device instead (--host-convert off): bf16 crosses the
  // link, nothing waits for the host.
  o.convertOnHost = false;
  Expected<SimResult> dev = simulateStep(toyBundle(3), p, o);
  ASSERT_TRUE(dev.ok());
  EXPECT_DOUBLE_EQ(dev->d2hBytes, 3 * 20000.0);
}

// The conversion pool: threads x one thread's rate, capped by the host's
// memory bandwidth; by default min(8, cores / 2) threads.
TEST(SimProfile, ConversionPoolRate) {
  Profile p = toyProfile(); // 4 cores
  p.host.convertBytesPerS = 1e10;
  p.host.memoryBandwidth = 3.5e10;
  EXPECT_DOUBLE_EQ(convertBytesPerSecond(p), 2e10); // 2 threads
  EXPECT_DOUBLE_EQ(convertBytesPerSecond(p, 1), 1e10);
  EXPECT_DOUBLE_EQ(convertBytesPerSecond(p, 8), 3.5e10); // capped
  p.host.cores = 64;
  EXPECT_DOUBLE_EQ(convertBytesPerSecond(p), 3.5e10); // 8 threads, capped
  p.host.memoryBandwidth = 1e12;
  EXPECT_DOUBLE_EQ(convertBytesPerSecond(p), 8e10);
  p.host.cores = 1;
  EXPECT_DOUBLE_EQ(convertBytesPerSecond(p), 1e10);
}

// A plan the runtime would refuse is refused: segments longer than the
// weight slots, or without full recomputation.
TEST(SimStep, SegmentPlanErrors) {
  Bundle b = toySegmentBundle(3, 2, false);
  b.step->prefetchDepth = 1;
  Expected<SimResult> r = simulateStep(b, toyProfile());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "step plan: checkpoint_every 2 needs at least as "
                         "many weight slots (prefetch_depth 1)");
  b = toySegmentBundle(3, 2, false);
  b.step->recompute = "selective";
  r = simulateStep(b, toyProfile());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "step plan: checkpoint_every 2 needs recompute "
                         "'full', not 'selective'");
}

// In CopyHiddenUnderCompute the backward's load0 [6,7] overlaps the return
// g2 [6,7]: at a duplex factor of 0.5 both take 2 ms ([6,8]), then g1 runs
// alone [8,9].
TEST(SimStep, DuplexPenaltyWhileBothDirectionsCopy) {
  Profile p = toyProfile();
  p.link.duplexFactor = 0.5;
  SimResult r = simulate(toyBundle(3), p, /*spans=*/true);
  int found = 0;
  for (const SimSpan &s : r.spans) {
    if (s.label == "weights Block.0" && s.start > 5e-3) {
      EXPECT_NEAR(s.start, 6e-3, 1e-9);
      EXPECT_NEAR(s.end, 8e-3, 1e-9);
      ++found;
    }
    if (s.label == "grads Block.2") {
      EXPECT_NEAR(s.end, 8e-3, 1e-9);
      ++found;
    }
    if (s.label == "grads Block.1") {
      EXPECT_NEAR(s.start, 8e-3, 1e-9);
      EXPECT_NEAR(s.end, 9e-3, 1e-9);
      ++found;
    }
  }
  EXPECT_EQ(found, 3);
  EXPECT_NEAR(r.stepSeconds, 11e-3, 1e-9);
}

TEST(SimStep, TimelineIsAChromeTrace) {
  SimResult r = simulate(toyBundle(3), toyProfile(), /*spans=*/true);
  nlohmann::json j = nlohmann::json::parse(timelineJson(r));
  std::set<std::string> tracks;
  int spans = 0;
  for (const nlohmann::json &e : j["traceEvents"]) {
    if (e["name"] == "thread_name")
      tracks.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X")
      ++spans;
  }
  EXPECT_EQ(tracks,
            (std::set<std::string>{"compute", "h2d", "d2h", "optimizer"}));
  EXPECT_EQ(spans, static_cast<int>(r.spans.size()));
  EXPECT_EQ(spans, r.commands);
}

TEST(SimStep, NoStepPlanIsAnError) {
  Bundle b = toyBundle(2);
  b.step.reset();
  Expected<SimResult> r = simulateStep(b, toyProfile());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "the bundle has no step plan (compile it with "
                         "--device-memory)");
}

// Property: over random profiles, a faster link (either direction) or a
// faster device (peak FLOP/s, memory bandwidth) never makes the step
// slower, and neither does a faster optimizer, host conversion or host
// memory; for plans with and without segments, clipping, bf16 weights and
// bf16 gradients.
// At the bounds of a profile (Profile.cpp) and the largest micro-batch
// the flags allow (2^32 tokens), a step takes a finite, positive time; a
// profile built past the bounds (not parsed) gives an error, never inf.
TEST(SimStep, FiniteAtTheProfileBounds) {
  Bundle b = toyBundle(4);
  b.step->batch = int64_t(1) << 20;
  b.step->seq = int64_t(1) << 12;
  auto setRates = [](Profile &p, double rate, double eff) {
    p.device.peakFlopsBF16 = p.device.peakFlopsFP32 = rate;
    p.device.memoryBandwidth = p.link.h2dBandwidth = p.link.d2hBandwidth =
        p.host.memoryBandwidth = p.host.adamwBytesPerS =
            p.host.convertBytesPerS = rate;
    p.device.gemmEfficiency.points = {{1, eff}};
    p.device.attentionEfficiency.points = {{1, eff}};
  };
  Profile slow = toyProfile();
  setRates(slow, 1e6, 1e-6);
  slow.device.kernelTimeScale = 100;
  Profile fast = toyProfile();
  setRates(fast, 1e18, 1);
  fast.device.kernelTimeScale = 1e-3;
  for (const Profile *p : {&slow, &fast}) {
    SimOptions o;
    Expected<SimResult> r = simulateStep(b, *p, o);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_TRUE(std::isfinite(r->stepSeconds));
    EXPECT_GT(r->stepSeconds, 0);
  }
  Profile broken = toyProfile();
  setRates(broken, 1e-300, 1e-300);
  Expected<SimResult> r = simulateStep(b, broken, SimOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "the simulated step on profile 'toy' is not finite "
                         "(its rates are out of proportion to the plan's "
                         "sizes)");
}

TEST(SimStep, MonotoneInEveryRate) {
  std::mt19937_64 rng(15);
  auto uni = [&](double lo, double hi) {
    return std::exp(std::uniform_real_distribution<double>(std::log(lo),
                                                           std::log(hi))(rng));
  };
  Bundle b = toyBundle(5, /*micro=*/2, /*depth=*/2);
  Bundle b3 = toyBundle(4, /*micro=*/3, /*depth=*/3);
  // Segments of 3 with host checkpoints, a bf16 plan (weights converted on
  // the host) with bf16 gradients.
  Bundle seg = toySegmentBundle(5, 3, true);
  seg.step->microBatches = 2;
  seg.step->precision = "bf16";
  for (int trial = 0; trial < 200; ++trial) {
    Profile p = toyProfile();
    p.device.peakFlopsFP32 = uni(1e8, 1e10);
    p.device.memoryBandwidth = uni(1e8, 1e11);
    p.device.launchLatency = uni(1e-7, 1e-4);
    p.device.gemmEfficiency.points = {{1e5, uni(0.01, 0.3)},
                                      {1e7, uni(0.3, 1.0)}};
    if (trial % 4 != 3) {
      // The optional fields: a rate of the gradient accumulation's own, a
      // measured shape near the toy's [50, 100] x [100, 100] products.
      p.device.memoryBandwidthByKind = {{"param_grad", uni(1e8, 1e11)}};
      p.device.gemmShapes = {{uni(20, 200), 100, 100, uni(0.05, 1.0)}};
    }
    p.link.h2dBandwidth = uni(1e6, 1e9);
    p.link.d2hBandwidth = uni(1e6, 1e9);
    p.link.duplexFactor = uni(0.5, 1.0);
    p.link.copyLatency = uni(1e-7, 1e-4);
    p.host.adamwBytesPerS = uni(1e6, 1e10);
    p.host.convertBytesPerS = uni(1e6, 1e10);
    p.host.memoryBandwidth = uni(1e7, 1e11);
    p.device.peakFlopsBF16 = uni(1e8, 1e10);
    if (trial % 5 < 2) {
      // A device on the host's cores, slowed in a chain of ops.
      p.device.hostThreads = trial % 5 == 0 ? p.host.cores : 1;
      p.device.kernelTimeScale = uni(0.7, 2.0);
      p.device.kernelOverhead = uni(1e-7, 1e-4);
    }
    const Bundle &bb = trial % 3 == 0 ? b : trial % 3 == 1 ? b3 : seg;
    SimOptions o;
    o.clip = trial % 2 == 0;
    o.gradBytesPerParam = trial % 4 < 2 ? 4 : 2;
    auto step = [&](const Profile &q) {
      Expected<SimResult> r = simulateStep(bb, q, o);
      EXPECT_TRUE(r.ok()) << r.message();
      return r.ok() ? r->stepSeconds : 0.0;
    };
    double base = step(p);
    ASSERT_GT(base, 0);
    for (int k = 0; k < 12; ++k) {
      Profile q = p;
      double f = uni(1.01, 8);
      if (k == 0)
        q.link.h2dBandwidth *= f;
      if (k == 1)
        q.link.d2hBandwidth *= f;
      if (k == 2)
        q.device.peakFlopsFP32 *= f;
      if (k == 3) {
        q.device.memoryBandwidth *= f;
        for (auto &[kind, bw] : q.device.memoryBandwidthByKind)
          bw *= f;
      }
      if (k == 4)
        q.host.adamwBytesPerS *= f;
      if (k == 5)
        q.host.convertBytesPerS *= f;
      if (k == 6)
        q.host.memoryBandwidth *= f;
      if (k == 7)
        q.device.peakFlopsBF16 *= f;
      if (k == 8) // one kind's rate alone
        for (auto &[kind, bw] : q.device.memoryBandwidthByKind)
          bw *= f;
      if (k == 9) // a measured shape's efficiency
        for (GemmShapePoint &g : q.device.gemmShapes)
          g.efficiency = std::min(1.0, g.efficiency * f);
      if (k == 10) // kernels nearer their rates alone
        q.device.kernelTimeScale /= f;
      if (k == 11)
        q.device.kernelOverhead /= f;
      double t = step(q);
      EXPECT_LE(t, base * (1 + 1e-9))
          << "trial " << trial << " rate " << k << " x" << f;
    }
  }
}

} // namespace
} // namespace mtc::sim
