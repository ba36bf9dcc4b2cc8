//===- Plan.cpp - mtc plan --------------------------------------*- C++ -*-===//
//
// Part of mtc. `mtc plan MODEL ...`: the memory and resource report.
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/Tool.h"

#include "compiler/Analysis/MemoryModel.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/BundleWriter.h"
#include "runtime/driver/Train.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace mtc::cli {

namespace {

/// One candidate's prediction: "12.3 s/step (compute 4.5 s, h2d 1.2 s, d2h
/// 1.3 s, optimizer 1.0 s; compute-bound)".
std::string describeEstimate(const mtc::analysis::StepTimeEstimate &e) {
  char buf[256];
  if (e.optimizerSeconds > 0 || e.exposedSeconds > 0)
    std::snprintf(buf, sizeof buf,
                  "%.4g s/step (compute %.3g s, h2d %.3g s, d2h %.3g s, "
                  "optimizer %.3g s; %s-bound)",
                  e.stepSeconds, e.computeSeconds, e.h2dSeconds, e.d2hSeconds,
                  e.optimizerSeconds, e.bound.c_str());
  else
    std::snprintf(buf, sizeof buf,
                  "%.4g s/step (compute %.3g s, copies %.3g s; %s-bound)",
                  e.stepSeconds, e.computeSeconds, e.h2dSeconds + e.d2hSeconds,
                  e.bound.c_str());
  return buf;
}

/// `--recompute auto`: the plans it considered, one line each, with their
/// predicted step time on the target, and the one it chose.
void printRecomputeChoice(std::ostream &os,
                          const mtc::CompiledModel &compiled) {
  if (compiled.recomputeCandidates.empty())
    return;
  std::string chosen;
  for (const mtc::RecomputeCandidate &c : compiled.recomputeCandidates)
    if (c.chosen)
      chosen = c.recompute;
  os << "recompute auto: " << chosen << ", by the predicted step time on "
     << compiled.pricedOn << " (the fastest plan that fits):\n";
  for (const mtc::RecomputeCandidate &c : compiled.recomputeCandidates) {
    os << "  " << (c.chosen ? "* " : "  ") << c.recompute << ", checkpoints "
       << c.checkpoints;
    if (c.checkpointEvery > 1)
      os << ", checkpoint every " << c.checkpointEvery;
    if (c.selectiveLayers >= 0)
      os << ", for the first " << c.selectiveLayers
         << " layer instances, full for the rest";
    if (!c.fits) {
      os << ": does not fit\n";
      continue;
    }
    os << ": " << describeEstimate(c.estimate);
    if (!c.note.empty())
      os << "; " << c.note;
    os << "\n";
  }
}

} // namespace

int runPlan(const std::vector<std::string> &args) {
  if (wantsHelp("plan", args))
    return 0;
  std::string recompute, hf, input, deviceMemory, checkpoints, hostMemory;
  mtc::CompileOptions copts;
  std::vector<std::string> pos, sets;
  std::string device = "cpu", precision, shardFlag = "auto", gpu;
  mtc::driver::DeviceKind kind = mtc::driver::DeviceKind::Cpu;
  int64_t ranks = 1;
  std::vector<Flag> flags = {{Flag::String, "--recompute", &recompute},
                             {Flag::String, "--hf", &hf},
                             {Flag::List, "--set", &sets},
                             {Flag::String, "--device", &device},
                             {Flag::String, "--gpu", &gpu},
                             {Flag::String, "--precision", &precision},
                             {Flag::Int, "--ranks", &ranks, 1, limits::kRanks},
                             {Flag::String, "--shard-optimizer", &shardFlag}};
  OptimizerFlags optimizer;
  addStreamFlags(flags, copts.stream, deviceMemory, checkpoints, hostMemory,
                 optimizer);
  if (!parseArgs("plan", args, flags, pos) ||
      !parseOverrides("plan", sets, copts.overrides) ||
      !parseDeviceFlag("plan", device, kind, copts) ||
      !parseGpuFlag("plan", kind, gpu, copts) ||
      !parsePrecisionFlag("plan", precision, copts.stream) ||
      !modelInput("plan", pos, hf, input) ||
      !resolveAutoDeviceMemory("plan", kind, deviceMemory) ||
      !finishStreamFlags("plan", deviceMemory, hostMemory, copts.stream,
                         recompute, /*always=*/true) ||
      !finishOptimizerFlags("plan", optimizer, copts.stream) ||
      !parsePolicyFlags(recompute, checkpoints, copts))
    return 1;
  // Data parallel (docs/distributed.md): the plan is one rank's, for its
  // share of every micro-batch; a sharded optimizer takes the gradients out
  // of the plan's ring.
  if (shardFlag != "auto" && shardFlag != "on" && shardFlag != "off")
    return error("plan: --shard-optimizer expects auto, on or off, got '" +
                 shardFlag + "'");
  const bool sharded = ranks > 1 && shardFlag != "off";
  const int64_t globalBatch = copts.stream.batch;
  if (ranks > 1) {
    if (globalBatch % ranks != 0)
      return error("plan: --batch " + std::to_string(globalBatch) +
                   " (the global batch) is not divisible by --ranks " +
                   std::to_string(ranks));
    copts.stream.batch = globalBatch / ranks;
    if (sharded)
      copts.stream.immediateOptimizer = true;
  }
  std::string source, name;
  if (!readModelSource("plan", hf, input, source, name))
    return 1;
  mlir::MLIRContext context;
  mtc::CompiledModel compiled;
  if (!mtc::compileModelSource(source, name, copts, std::cerr,
                               mtc::CompileStage::Differentiated, context,
                               compiled))
    return 1;
  int64_t smallest = 0;
  if (!mtc::smallestDeviceMemory(source, name, copts, std::cerr, smallest))
    return 1;
  mtc::bundle::Bundle b;
  if (mlir::failed(mtc::translateToBundle(*compiled.module, b)) || !b.step)
    return error("plan: no step plan was built");
  if (mtc::Status st =
          mtc::bundle::checkTokenShapes(b, b.step->batch, b.step->seq);
      !st.ok())
    return error("plan: " + st.message());
  const mtc::bundle::StepPlan &step = *b.step;
  auto model = *compiled.module->getBody()->getOps<mtc::mt::ModelOp>().begin();
  llvm::Expected<mtc::analysis::ModelCost> analyzed =
      mtc::analysis::analyzeModel(
          model, {step.batch, step.seq, copts.stream.precision});
  if (!analyzed)
    return error("plan: " + llvm::toString(analyzed.takeError()));
  const mtc::analysis::ModelCost &cost = *analyzed;
  using mtc::analysis::formatByteSize;
  std::ostream &os = std::cout;
  int64_t params = cost.totalParams();
  os << "model " << cost.name << ": " << withCommas(params) << " parameters ("
     << withCommas(cost.modelParams) << " model-level)\n";
  for (const mtc::analysis::LayerCost &l : cost.layers)
    os << "  layer " << l.name << " x " << l.count << ": "
       << withCommas(l.params) << " parameters, "
       << formatByteSize(l.weightBytes) << " of weights per instance; per "
       << "micro-batch: checkpoint " << formatByteSize(l.checkpointBytes)
       << ", workspace " << formatByteSize(l.workspaceBytes) << ", forward "
       << withCommas(l.forwardFlops) << " FLOPs, recomputed "
       << withCommas(l.recomputeFlops) << " FLOPs\n";
  os << "step: " << step.microBatches << " micro-batch"
     << (step.microBatches == 1 ? "" : "es") << " of [" << step.batch << ", "
     << step.seq << "] tokens, prefetch depth " << step.prefetchDepth
     << ", recompute " << step.recompute;
  if (step.checkpointEvery > 1)
    os << " in segments of " << step.checkpointEvery << " (checkpoint every "
       << step.checkpointEvery << " instances)";
  if (step.selectiveLayers >= 0)
    os << " for the first " << step.selectiveLayers
       << " layer instances, full for the rest";
  os << ", checkpoints " << step.checkpoints;
  if (step.precision != "fp32")
    os << ", precision " << step.precision
       << " (weights and activations bf16 on the device, gradients fp32)";
  os << "\n";
  {
    // What the policy costs by the cost model `--recompute auto` uses.
    mtc::analysis::PlanChoices choices;
    choices.microBatches = step.microBatches;
    choices.checkpointsOnHost = step.checkpoints == "host";
    choices.checkpointEvery = step.checkpointEvery;
    choices.selectiveLayers = step.selectiveLayers;
    choices.forwardLoops = mtc::analysis::forwardLoops(cost);
    mtc::analysis::DeviceRates rates;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "recompute cost: %.1f ms per step (cost model: %.0f "
                  "GFLOP/s, copies at %.0f GB/s)\n",
                  1e3 *
                      mtc::analysis::recomputeCostSeconds(cost, choices, rates),
                  rates.flopsPerSecond / 1e9, rates.copyBytesPerSecond / 1e9);
    os << buf;
  }
  printRecomputeChoice(os, compiled);
  // Every layer checkpoint of the step, wherever it is kept (sizes saturate,
  // lib/Bundle/Plan.h; the plan's own were checked against its limit).
  using mtc::bundle::addSize, mtc::bundle::mulSize;
  int64_t ckptBytes = 0, kept = 0, instances = 0, extraFlops = 0,
          fullInstances = 0;
  mtc::analysis::PlanChoices mixed;
  mixed.selectiveLayers = step.selectiveLayers;
  for (const auto &[name, count] : mtc::analysis::forwardLoops(cost))
    if (const mtc::analysis::LayerCost *l = cost.layer(name)) {
      int64_t segs = mtc::analysis::segmentCount(count, step.checkpointEvery);
      // Mixed recomputation: past the first S instances only the input.
      int64_t selective =
          mtc::analysis::keptCheckpoints(mixed, instances, count);
      fullInstances += count - selective;
      ckptBytes = addSize(ckptBytes,
                          mulSize(mulSize(count - selective, step.microBatches),
                                  l->boundaryBytes));
      segs -= count - selective;
      kept += segs;
      instances += count;
      ckptBytes = addSize(ckptBytes, mulSize(mulSize(segs, step.microBatches),
                                             l->checkpointBytes));
      extraFlops = addSize(extraFlops,
                           mulSize(mulSize(mtc::analysis::segmentExtraForwards(
                                               count, step.checkpointEvery),
                                           step.microBatches),
                                   l->forwardFlops));
    }
  if (step.checkpointEvery > 1)
    os << "segment checkpointing: " << kept << " of " << instances
       << " layer instances keep their input; the backward of each segment "
          "recomputes the forward of the others once more ("
       << withCommas(extraFlops) << " FLOPs per step), keeping their inputs "
       << "in the device's 'segment' buffer\n";
  if (step.selectiveLayers >= 0)
    os << "mixed recomputation: " << instances - fullInstances << " of "
       << instances
       << " layer instances keep their selective checkpoints; the other "
       << fullInstances
       << " keep their input and recompute their whole forward\n";
  os << "layer checkpoints: " << formatByteSize(ckptBytes) << " (" << ckptBytes
     << " bytes, " << step.checkpoints << " memory)\n";
  os << "device budget: "
     << (step.deviceBudget ? formatByteSize(step.deviceBudget) + " (" +
                                 std::to_string(step.deviceBudget) + " bytes)"
                           : std::string("none given"))
     << "\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-18s %-14s %-7s %12s %12s  %s\n", "buffer",
                "kind", "space", "offset", "bytes", "size");
  os << line;
  for (const mtc::bundle::PlanBuffer &buf : step.buffers) {
    std::string offset =
        buf.space == "device" ? std::to_string(buf.offset) : "-";
    std::snprintf(line, sizeof line, "%-18s %-14s %-7s %12s %12lld  %s\n",
                  buf.name.c_str(), buf.kind.c_str(), buf.space.c_str(),
                  offset.c_str(), (long long)buf.bytes,
                  formatByteSize(buf.bytes).c_str());
    os << line;
  }
  os << "device peak: " << formatByteSize(step.devicePeak, true) << " ("
     << step.devicePeak << " bytes)";
  if (step.deviceBudget)
    os << " of " << formatByteSize(step.deviceBudget);
  os << "\n";
  printCudaReserve(os, kind,
                   step.deviceBudget ? step.deviceBudget : step.devicePeak);
  int64_t n = cost.totalInstances();
  // Segment checkpointing loads no more: a segment's instances stay in their
  // slots from the recomputed forward to their backward.
  int64_t resident = std::min<int64_t>(step.prefetchDepth, n);
  int64_t loads = 2 * n - resident;
  int64_t loadBytes = 0;
  for (const mtc::analysis::LayerCost &l : cost.layers)
    loadBytes = addSize(loadBytes, mulSize(2 * l.count, l.weightBytes));
  // The last `resident` instances of the forward stay for the backward;
  // approximate their bytes with the largest layer's.
  int64_t largest = 0;
  for (const mtc::analysis::LayerCost &l : cost.layers)
    largest = std::max(largest, l.weightBytes);
  loadBytes -= std::min(loadBytes, mulSize(resident, largest));
  os << "weight loads per step: " << loads << " layer instances (2 x " << n
     << " - " << resident << " resident at the forward/backward turnaround), "
     << formatByteSize(loadBytes) << " host to device, + "
     << formatByteSize(cost.modelWeightBytes) << " model-level\n";
  // Host memory: the training state and every host buffer of the plan.
  const bool ring = step.buffer("grads.host") != nullptr;
  const bool bf16Grads =
      !ring && copts.stream.gradDType == mtc::bundle::GradDType::BF16;
  const int64_t perParam =
      mtc::bundle::stateBytesPerParam(ring, copts.stream.gradDType);
  // A sharded data-parallel rank (docs/distributed.md): the whole fp32
  // values, and m, v and the summed gradient of 1/N of every tensor.
  const int64_t state =
      sharded ? addSize(mulSize(4, params), mulSize(12, params) / ranks)
              : mulSize(perParam, params);
  const mtc::bundle::PlanBuffer *host = step.buffer("checkpoints.host");
  int64_t hostCkpt = host ? host->bytes : 0, hostTotal = state;
  if (sharded)
    os << "host memory: state per rank 4 + 12/" << ranks
       << " B/param (fp32 values; AdamW m, v and the summed gradient of 1/"
       << ranks << " of every tensor) x " << withCommas(params) << " = "
       << formatByteSize(state) << "\n";
  else
    os << "host memory: state " << perParam
       << (ring ? " B/param (fp32 value, AdamW m and v; optimizer "
                  "placement immediate) x "
           : bf16Grads
               ? " B/param (fp32 value, bf16 gradient, AdamW m and v) x "
               : " B/param (fp32 value, gradient, AdamW m and v) x ")
       << withCommas(params) << " = " << formatByteSize(state) << "\n";
  for (const mtc::bundle::PlanBuffer &buf : step.buffers) {
    if (buf.space != "host")
      continue;
    if (buf.kind == "grads") {
      // (sharded: the ring feeds the reduce-scatter instead of AdamW)
      os << "  " << buf.name << ": " << formatByteSize(buf.bytes) << " ("
         << mtc::bundle::kGradRingSlots
         << " slots of the largest layer's gradients; AdamW reads one while "
            "the next is copied in)\n";
      hostTotal = addSize(hostTotal, buf.bytes);
      continue;
    }
    const char *what = buf.kind == "checkpoints" ? "layer checkpoints"
                       : buf.kind == "activations"
                           ? "boundary activations between instances"
                           : "model-level values between layer loops";
    os << "  " << buf.name << ": " << formatByteSize(buf.bytes) << " ("
       << formatByteSize(buf.bytes / step.microBatches) << " per micro-batch; "
       << what << ")\n";
    hostTotal = addSize(hostTotal, buf.bytes);
  }
  os << "host total: " << formatByteSize(hostTotal, true) << " (" << hostTotal
     << " bytes)";
  if (copts.stream.hostMemory > 0)
    os << " of " << formatByteSize(copts.stream.hostMemory)
       << (hostMemory.empty() ? " available" : "");
  os << "\n";
  int64_t allreduceBytes = 0, rankStateBytes = 0;
  if (ranks > 1) {
    // Sharded: 4 B/param reduce-scattered and 4 B/param gathered per step;
    // the state per rank: the whole fp32 values, 12/N of m, v and the
    // summed gradient (ShardedOptimizer.h). Unsharded: every gradient
    // summed whole, the state of one process.
    allreduceBytes = mulSize(sharded ? 8 : 4, params);
    rankStateBytes = state;
    os << "data parallel: " << ranks << " ranks of [" << step.batch << ", "
       << step.seq << "] rows of every --batch " << globalBatch
       << " micro-batch (the plan above is one rank's); gradients "
       << (sharded ? "reduce-scattered and values all-gathered"
                   : "summed whole")
       << " per step: " << formatByteSize(allreduceBytes) << "\n";
  }
  os << "smallest feasible device memory with these options: "
     << formatByteSize(smallest, true) << "\n\n";
  os << "device_peak_bytes: " << step.devicePeak << "\n";
  os << "min_device_memory: " << smallest << "\n";
  os << "host_bytes_per_param: "
     << (sharded ? static_cast<double>(state) / static_cast<double>(params)
                 : static_cast<double>(perParam))
     << "\n";
  os << "host_checkpoint_bytes: " << hostCkpt << "\n";
  os << "host_memory_bytes: " << hostTotal << "\n";
  os << "recompute: " << step.recompute << "\n";
  os << "checkpoint_every: " << step.checkpointEvery << "\n";
  if (step.selectiveLayers >= 0)
    os << "selective_layers: " << step.selectiveLayers << "\n";
  os << "checkpoint_bytes: " << ckptBytes << "\n";
  if (ranks > 1) {
    os << "allreduce_bytes: " << allreduceBytes << "\n";
    os << "host_state_bytes_per_rank: " << rankStateBytes << "\n";
  }
  return 0;
}

} // namespace mtc::cli
