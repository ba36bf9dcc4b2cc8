//===- Simulate.cpp - mtc simulate ------------------------------*- C++ -*-===//
//
// Part of mtc. `mtc simulate MODEL --gpu NAME|FILE ...`: builds the step plan
// `mtc plan` and `mtc train` build for the flags, replays one step of it on
// a hardware profile (lib/Sim, docs/simulate.md) and prints the plan's
// memory, the predicted step time, throughput, MFU, the link traffic, how
// much of the copies and of the CPU optimizer stays exposed, and the
// bottleneck. `--sweep` searches micro-batch size and count at fixed tokens
// per step, prefetch depth and recompute policy.
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/Tool.h"

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/BundleWriter.h"
#include "frontend/HFImport.h"
#include "lib/Bundle/Plan.h"
#include "lib/Sim/Profile.h"
#include "lib/Sim/Simulator.h"
#include "lib/Sim/Timeline.h"
#include "lib/Support/ByteSize.h"
#include "lib/Support/Files.h"
#include "runtime/driver/DeviceSelect.h"

#include "mlir/IR/MLIRContext.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace mtc::cli {
namespace {

/// The plan of one configuration and its simulated step.
struct Outcome {
  mtc::bundle::Bundle bundle;
  mtc::sim::SimResult sim;
  int64_t params = 0;
  /// Parameters one token passes through: an MoE layer's experts count
  /// top_k times, not every expert (equal to params for dense models).
  int64_t activeParams = 0;
  int64_t hostBytes = 0;
  int64_t hostPerParam = 0;
  double tokens = 0;
};

/// Host memory the plan needs, as `mtc plan` counts it: the state's bytes
/// per parameter plus every host buffer.
int64_t hostBytesOf(const mtc::bundle::StepPlan &step, int64_t params,
                    mtc::bundle::GradDType grads, int64_t &perParam) {
  const bool ring = step.buffer("grads.host") != nullptr;
  perParam = mtc::bundle::stateBytesPerParam(ring, grads);
  int64_t total = mtc::bundle::mulSize(perParam, params);
  for (const mtc::bundle::PlanBuffer &buf : step.buffers)
    if (buf.space == "host")
      total = mtc::bundle::addSize(total, buf.bytes);
  return total;
}

/// Every parameter of \p b, or (\p active) those one token uses: the
/// experts of a moe op top_k times each instead of count times.
int64_t paramCount(const mtc::bundle::Bundle &b, bool active = false) {
  int64_t n = 0;
  for (const mtc::bundle::Param &p : b.params)
    n += p.numel();
  for (const mtc::bundle::Layer &l : b.layers) {
    int64_t one = 0;
    for (const mtc::bundle::Param &p : l.params)
      one += p.numel();
    for (const mtc::bundle::Expert &e : l.experts) {
      int64_t uses = e.count;
      auto f = l.functions.find("forward");
      if (active && f != l.functions.end())
        for (const mtc::bundle::Op &op : f->second.ops)
          if (op.name == "moe" && op.symbol == e.name)
            uses = std::min(e.count, op.intAttr("top_k", e.count));
      for (const mtc::bundle::Param &p : e.params)
        one = mtc::bundle::addSize(one, mtc::bundle::mulSize(p.numel(), uses));
    }
    n = mtc::bundle::addSize(n, mtc::bundle::mulSize(one, l.count));
  }
  return n;
}

/// Compiles \p source's step plan under \p copts and simulates it. Compiler
/// errors (an infeasible budget among them) go to \p errs.
bool planAndSimulate(const std::string &source, const std::string &name,
                     const mtc::CompileOptions &copts,
                     const mtc::sim::Profile &profile,
                     const mtc::sim::SimOptions &simOpts, std::ostream &errs,
                     Outcome &out) {
  mlir::MLIRContext context;
  mtc::CompiledModel compiled;
  if (!mtc::compileModelSource(source, name, copts, errs,
                               mtc::CompileStage::Differentiated, context,
                               compiled))
    return false;
  if (mlir::failed(mtc::translateToBundle(*compiled.module, out.bundle)) ||
      !out.bundle.step) {
    errs << "mtc: error: simulate: no step plan was built\n";
    return false;
  }
  const mtc::bundle::StepPlan &step = *out.bundle.step;
  if (mtc::Status st =
          mtc::bundle::checkTokenShapes(out.bundle, step.batch, step.seq);
      !st.ok()) {
    errs << "mtc: error: simulate: " << st.message() << "\n";
    return false;
  }
  mtc::Expected<mtc::sim::SimResult> r =
      mtc::sim::simulateStep(out.bundle, profile, simOpts);
  if (!r) {
    errs << "mtc: error: simulate: " << r.message() << "\n";
    return false;
  }
  out.sim = std::move(*r);
  out.params = paramCount(out.bundle);
  out.activeParams = paramCount(out.bundle, /*active=*/true);
  out.hostBytes =
      hostBytesOf(step, out.params, copts.stream.gradDType, out.hostPerParam);
  out.tokens = static_cast<double>(step.batch) * static_cast<double>(step.seq) *
               static_cast<double>(step.microBatches);
  return true;
}

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void printOutcome(std::ostream &os, const Outcome &o,
                  const mtc::sim::Profile &profile) {
  const mtc::bundle::StepPlan &step = *o.bundle.step;
  const mtc::sim::SimResult &r = o.sim;
  const double t = r.stepSeconds;
  const double model = 6.0 * static_cast<double>(o.activeParams) * o.tokens / t;
  const double peak = profile.peakFlops(step.precision);
  using mtc::formatBytes;
  auto gib = [](int64_t b) {
    return formatBytes(b, mtc::ByteFormat::approx());
  };
  os << "model " << o.bundle.model << ": " << withCommas(o.params)
     << " parameters";
  if (o.activeParams != o.params)
    os << ", " << withCommas(o.activeParams)
       << " active per token (model FLOPs count these)";
  os << "\n";
  os << "hardware: " << profile.name << " (" << profile.description << ")\n";
  os << "step: " << step.microBatches << " micro-batch"
     << (step.microBatches == 1 ? "" : "es") << " of [" << step.batch << ", "
     << step.seq << "] tokens, prefetch depth " << step.prefetchDepth
     << ", recompute " << step.recompute;
  if (step.checkpointEvery > 1)
    os << ", checkpoint every " << step.checkpointEvery;
  if (step.selectiveLayers >= 0)
    os << " for the first " << step.selectiveLayers
       << " layer instances, full for the rest";
  os << ", checkpoints " << step.checkpoints << ", precision " << step.precision
     << ", optimizer "
     << (step.buffer("grads.host") ? "immediate" : "deferred");
  if (o.hostPerParam == mtc::bundle::kBf16GradStateBytesPerParam)
    os << ", grads bf16";
  os << "\n";
  os << "device peak: " << gib(step.devicePeak) << " (" << step.devicePeak
     << " bytes) of " << gib(step.deviceBudget) << " budget, "
     << gib(profile.device.memoryBytes) << " on the device\n";
  os << "host memory: state " << o.hostPerParam << " B/param x "
     << withCommas(o.params) << " = "
     << gib(mtc::bundle::mulSize(o.hostPerParam, o.params));
  for (const mtc::bundle::PlanBuffer &b : step.buffers)
    if (b.space == "host")
      os << ", " << b.name << " " << gib(b.bytes);
  os << "; total " << gib(o.hostBytes) << "\n";
  os << "simulated: " << r.commands << " commands, " << r.weightLoads
     << " weight loads\n\n";
  os << "device_peak_bytes: " << step.devicePeak << "\n";
  os << "host_memory_bytes: " << o.hostBytes << "\n";
  os << "step_time_s: " << fmt("%.4g", t) << "\n";
  os << "tokens_per_s: " << fmt("%.1f", o.tokens / t) << "\n";
  os << "model_tflops: " << fmt("%.1f", model / 1e12) << "\n";
  os << "hardware_tflops: " << fmt("%.1f", r.hardwareFlops / t / 1e12) << "\n";
  os << "mfu: " << fmt("%.3f", model / peak) << "\n";
  os << "h2d_gb_per_step: " << fmt("%.2f", r.h2dBytes / 1e9) << "\n";
  os << "d2h_gb_per_step: " << fmt("%.2f", r.d2hBytes / 1e9) << "\n";
  os << "compute_s: " << fmt("%.4g", r.computeSeconds) << "\n";
  os << "exposed_copy_s: " << fmt("%.4g", r.exposedCopySeconds) << "\n";
  os << "exposed_host_memory_s: "
     << fmt("%.4g",
            r.exposed.count("host-memory") ? r.exposed.at("host-memory") : 0.0)
     << "\n";
  os << "optimizer_s: " << fmt("%.4g", r.optimizerSeconds) << "\n";
  os << "optimizer_hidden_s: " << fmt("%.4g", r.optimizerHiddenSeconds) << "\n";
  os << "bottleneck: " << r.bottleneck << "\n";
}

/// A configuration of the sweep.
struct Candidate {
  int64_t batch, microBatches, depth;
  std::string recompute;
};

} // namespace

int runSimulate(const std::vector<std::string> &args) {
  if (wantsHelp("simulate", args))
    return 0;
  if (std::find(args.begin(), args.end(), "--calibrate") != args.end())
    return runCalibrate(args);
  std::string recompute, hf, input, deviceMemory = "auto", checkpoints,
                                    hostMemory, gpu, timeline;
  std::string precision = "bf16", hostConvert = "on";
  int64_t convertThreads = 0;
  bool sweep = false;
  mtc::CompileOptions copts;
  std::vector<std::string> pos, sets;
  std::vector<Flag> flags = {
      {Flag::String, "--recompute", &recompute},
      {Flag::String, "--hf", &hf},
      {Flag::List, "--set", &sets},
      {Flag::String, "--gpu", &gpu},
      {Flag::String, "--timeline", &timeline},
      {Flag::String, "--host-convert", &hostConvert},
      {Flag::Int, "--convert-threads", &convertThreads, 1, limits::kThreads},
      {Flag::String, "--precision", &precision}};
  OptimizerFlags optimizer;
  addStreamFlags(flags, copts.stream, deviceMemory, checkpoints, hostMemory,
                 optimizer);
  // --sweep takes no value.
  std::vector<std::string> rest;
  for (const std::string &a : args) {
    if (a == "--sweep")
      sweep = true;
    else
      rest.push_back(a);
  }
  if (!parseArgs("simulate", rest, flags, pos) ||
      !parseOverrides("simulate", sets, copts.overrides) ||
      !parsePrecisionFlag("simulate", precision, copts.stream) ||
      !modelInput("simulate", pos, hf, input))
    return 1;
  if (gpu.empty())
    return error("simulate: --gpu NAME|FILE.json is required (built in: " + [] {
      std::string l;
      for (const std::string &n : mtc::sim::builtinProfileNames())
        l += (l.empty() ? "" : ", ") + n;
      return l;
    }() + ")");
  // The timeline never replaces an input, and is known writable before
  // the simulation.
  if (mtc::Status st = mtc::checkOutputs(
          {{"--timeline", timeline}},
          {{"the model", input},
           {"--hf", hf.empty() ? std::string() : mtc::hfConfigPath(hf)},
           {"--gpu", gpu}});
      !st.ok())
    return error("simulate: " + st.message());
  mtc::Expected<mtc::sim::Profile> profile = mtc::sim::loadProfile(gpu);
  if (!profile)
    return error("simulate: --gpu: " + profile.message());
  // `--recompute auto` prices its plans on this GPU.
  copts.gpu = *profile;
  if (deviceMemory == "auto") {
    // What `--device-memory auto` leaves on a GPU of this size: its memory
    // less the CUDA backend's own allocations and the safety margin.
    int64_t total = profile->device.memoryBytes;
    int64_t reserve = mtc::driver::cudaBackendReserveBytes(),
            margin = mtc::driver::cudaSafetyMarginBytes(total);
    int64_t bytes = total - reserve - margin;
    if (bytes <= 0)
      return error("simulate: --device-memory auto: the device of profile '" +
                   profile->name + "' has " + std::to_string(total) +
                   " bytes (device.memory_bytes), no more than the CUDA "
                   "backend's " +
                   std::to_string(reserve) + " and the margin of " +
                   std::to_string(margin) +
                   ": nothing is left for a plan; give --device-memory SIZE");
    std::cout << "device memory: " << bytes << " bytes ("
              << mtc::formatBytes(bytes, mtc::ByteFormat::approx())
              << ", --device-memory auto on " << profile->name << ")\n";
    deviceMemory = std::to_string(bytes);
  }
  // No --host-memory: no host budget (the plan's host bytes are printed).
  if (!finishStreamFlags("simulate", deviceMemory, hostMemory, copts.stream,
                         recompute, /*always=*/true, /*stateOnDisk=*/true) ||
      !finishOptimizerFlags("simulate", optimizer, copts.stream) ||
      !parsePolicyFlags(recompute, checkpoints, copts))
    return 1;
  std::string source, name;
  if (!readModelSource("simulate", hf, input, source, name))
    return 1;
  mtc::sim::SimOptions simOpts;
  simOpts.clip = optimizer.clip > 0;
  simOpts.keepSpans = !timeline.empty();
  if (hostConvert != "on" && hostConvert != "off")
    return error("simulate: --host-convert expects on or off, got '" +
                 hostConvert + "'");
  simOpts.convertOnHost = hostConvert == "on";
  simOpts.convertThreads = convertThreads;
  // bf16 gradients are the deferred placement's (the planner refuses them
  // with the immediate one).
  simOpts.gradBytesPerParam =
      copts.stream.gradDType == mtc::bundle::GradDType::BF16 ? 2 : 4;

  if (!sweep) {
    Outcome o;
    if (!planAndSimulate(source, name, copts, *profile, simOpts, std::cerr, o))
      return 1;
    printOutcome(std::cout, o, *profile);
    if (!timeline.empty()) {
      if (mtc::Status st = mtc::sim::writeTimeline(o.sim, timeline); !st)
        return error("simulate: --timeline: " + st.message());
      std::cout << "timeline: " << timeline << "\n";
    }
    return 0;
  }

  // --sweep: the tokens per step of the flags stay; the micro-batch size
  // (a power of two dividing batch x micro-batches, or all of them), the
  // count, the prefetch depth and the
  // recompute policy vary. Configurations that do not fit are skipped.
  const int64_t rows = copts.stream.batch * copts.stream.microBatches;
  std::vector<Candidate> candidates;
  std::vector<std::string> policies = {"full", "selective", "none"};
  if (!recompute.empty() && recompute != "auto")
    policies = {recompute};
  // Micro-batch sizes whose count stays within --micro-batches' bound.
  std::vector<int64_t> sizes;
  for (int64_t b = 1; b <= rows; b *= 2)
    if (rows % b == 0 && rows / b <= limits::kMicroBatches)
      sizes.push_back(b);
  if (sizes.empty() || sizes.back() != rows)
    sizes.push_back(rows); // one micro-batch of all the rows
  // `--recompute auto` is tried too: where host memory rules out the pure
  // policies it finds the mixed plan (selective for the first S layer
  // instances) or segment checkpointing; a pure plan it picks is already a
  // candidate and is dropped as a duplicate.
  const bool tryAuto = recompute.empty() || recompute == "auto";
  for (int64_t b : sizes) {
    for (int64_t depth : {2, 3}) {
      for (const std::string &pol : policies)
        candidates.push_back({b, rows / b, depth, pol});
      if (tryAuto)
        candidates.push_back({b, rows / b, depth, "auto"});
    }
  }
  struct Row {
    Candidate c;
    Outcome o;
  };
  std::vector<Row> fits;
  int64_t infeasible = 0, duplicates = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (const Candidate &c : candidates) {
    mtc::CompileOptions o = copts;
    o.stream.batch = c.batch;
    o.stream.microBatches = c.microBatches;
    o.stream.prefetchDepth = c.depth;
    if (!parsePolicyFlags(c.recompute, "", o))
      return 1;
    std::ostringstream quiet;
    Row row{c, {}};
    if (!planAndSimulate(source, name, o, *profile, simOpts, quiet, row.o)) {
      ++infeasible;
      continue;
    }
    if (c.recompute == "auto" && row.o.bundle.step->selectiveLayers < 0 &&
        row.o.bundle.step->checkpointEvery <= 1) {
      ++duplicates;
      continue;
    }
    fits.push_back(std::move(row));
  }
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (fits.empty())
    return error("simulate: --sweep: none of the " +
                 std::to_string(candidates.size()) +
                 " configurations fits the device and host budgets");
  std::sort(fits.begin(), fits.end(), [](const Row &a, const Row &b) {
    return a.o.sim.stepSeconds < b.o.sim.stepSeconds;
  });
  std::cout << "sweep: " << candidates.size() - duplicates
            << " configurations at " << withCommas(rows * copts.stream.seq)
            << " tokens per step, " << fits.size() << " fit, " << infeasible
            << " do not (" << fmt("%.1f", secs) << " s)\n";
  char line[256];
  std::snprintf(line, sizeof line,
                "%-5s %6s %6s %6s %-12s %-11s %10s %10s %6s %10s %10s  %s\n",
                "rank", "batch", "micro", "depth", "recompute", "checkpoints",
                "step_s", "tokens/s", "mfu", "device", "host", "bottleneck");
  std::cout << line;
  const double peak = profile->peakFlops(
      copts.stream.precision == mtc::bundle::Precision::BF16 ? "bf16" : "fp32");
  for (size_t i = 0; i < fits.size() && i < 5; ++i) {
    const Row &r = fits[i];
    const mtc::bundle::StepPlan &s = *r.o.bundle.step;
    double t = r.o.sim.stepSeconds;
    // Mixed plans as selective/S, segment checkpointing as full/kK.
    std::string policy = s.recompute;
    if (s.selectiveLayers >= 0)
      policy += "/" + std::to_string(s.selectiveLayers);
    if (s.checkpointEvery > 1)
      policy += "/k" + std::to_string(s.checkpointEvery);
    std::snprintf(
        line, sizeof line,
        "%-5zu %6lld %6lld %6lld %-12s %-11s %10.4g %10.1f %6.3f %10s %10s  "
        "%s\n",
        i + 1, (long long)s.batch, (long long)s.microBatches,
        (long long)s.prefetchDepth, policy.c_str(), s.checkpoints.c_str(), t,
        r.o.tokens / t,
        6.0 * static_cast<double>(r.o.activeParams) * r.o.tokens / t / peak,
        mtc::formatBytes(s.devicePeak, mtc::ByteFormat::approx()).c_str(),
        mtc::formatBytes(r.o.hostBytes, mtc::ByteFormat::approx()).c_str(),
        r.o.sim.bottleneck.c_str());
    std::cout << line;
  }
  std::cout << "\nbest:\n";
  printOutcome(std::cout, fits.front().o, *profile);
  return 0;
}

} // namespace mtc::cli
