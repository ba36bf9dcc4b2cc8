//===- Train.cpp - mtc train and generate -----------------------*- C++ -*-===//
//
// Part of mtc. `mtc train` (a model compiled in process, or a bundle) and
// `mtc generate`: the command lines shared with mtc-run
// (runtime/driver/TrainCommand.h) plus what needs the compiler.
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/Tool.h"

#include "runtime/dataparallel/DataParallel.h"
#include "runtime/dist/Communicator.h"
#include "runtime/driver/Train.h"
#include "runtime/hf/HFWeights.h"

#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace mtc::cli {

namespace {

/// Under an MPI launch every rank compiles the same model before the ranks
/// talk to each other, and would print the same diagnostics at the same
/// time, interleaved. A rank other than 0 keeps what it writes to stderr
/// while compiling and prints it in one write, each line prefixed with
/// "rank R: ", when compiling ends (with the error, when it failed).
class RankDiagnostics {
public:
  explicit RankDiagnostics(int rank) : rank(rank) {
    if (rank > 0)
      saved = std::cerr.rdbuf(captured.rdbuf());
  }
  ~RankDiagnostics() { release(); }
  RankDiagnostics(const RankDiagnostics &) = delete;
  RankDiagnostics &operator=(const RankDiagnostics &) = delete;

  /// Restores stderr and prints what was kept.
  void release() {
    if (!saved)
      return;
    std::cerr.rdbuf(saved);
    saved = nullptr;
    std::string text = captured.str(), out;
    std::string prefix = "rank " + std::to_string(rank) + ": ";
    size_t at = 0;
    while (at < text.size()) {
      size_t nl = text.find('\n', at);
      size_t end = nl == std::string::npos ? text.size() : nl + 1;
      out += prefix + text.substr(at, end - at);
      at = end;
    }
    if (!out.empty() && out.back() != '\n')
      out += '\n';
    std::cerr << out << std::flush;
  }

private:
  int rank;
  std::ostringstream captured;
  std::streambuf *saved = nullptr;
};

} // namespace

int runTrain(const std::vector<std::string> &args) {
  if (wantsHelp("train", args))
    return 0;
  mtc::driver::TrainCommand cmd;
  if (mtc::Status st = mtc::driver::parseTrainCommand(kTool, args, cmd);
      !st.ok())
    return error(st.message());
  mtc::driver::TrainOptions &opts = cmd.opts;
  const std::string &input = cmd.input, &hf = cmd.hf;
  // A bundle (MODEL.mtb, or the checkpoint's with --resume) runs as mtc-run
  // runs it; what follows compiles .mt source or --hf DIR for this run.
  if (hf.empty() && mtc::driver::isBundlePath(input))
    return mtc::driver::trainBundle(kTool, cmd, std::cout, std::cerr);
  RankDiagnostics rankDiagnostics(opts.dataParallel != "off" &&
                                          mtc::dist::launchedUnderMpi()
                                      ? mtc::dist::launchRank()
                                      : -1);
  mtc::CompileOptions copts;
  copts.cpu = cmd.cpu;
  copts.stream.prefetchDepth = cmd.prefetchDepth;
  copts.stream.checkpointEvery = cmd.checkpointEvery;
  copts.stream.selectiveLayers = cmd.selectiveLayers;
  if (!parseOverrides("train", cmd.sets, copts.overrides))
    return 1;
  std::string deviceMemory = cmd.deviceMemory, recompute = cmd.recompute;
  if (!resolveAutoDeviceMemory("train", opts.device, deviceMemory))
    return 1;
  if (!parsePrecisionFlag("train", cmd.precision, copts.stream))
    return 1;
  // The precision is the step plan's: bf16 storage needs one on every
  // device (the CPU device converts around its fp32 kernels, docs/runtime.md).
  if (copts.stream.precision == mtc::bundle::Precision::BF16 &&
      deviceMemory.empty())
    return error("train: --precision bf16 runs a streaming step plan: give "
                 "its budget with --device-memory SIZE");
  if (mtc::driver::isGpu(opts.device)) {
    if (deviceMemory.empty())
      return error(std::string("train: --device ") +
                   mtc::driver::deviceKindName(opts.device) +
                   " runs a streaming step plan: give its budget with "
                   "--device-memory SIZE");
    // The CUDA backend runs the fused regions as CUDA C (docs/cuda-kernels.md).
    copts.cudaKernels = true;
  }
  if (!parseGpuFlag("train", opts.device, cmd.gpu, copts))
    return 1;
  // Streaming: the step plan is compiled for this run's micro-batch shape
  // (data parallel: this rank's rows of it, or with --deterministic-reduce
  // its whole micro-batches).
  copts.stream.batch = mtc::driver::rankBatch(opts);
  copts.stream.seq = opts.seq;
  copts.stream.microBatches = mtc::driver::rankMicroBatches(opts);
  // Without clipping AdamW can run as soon as each layer's gradient is
  // final: the plan then carries the gradient ring (12 B/param).
  // A sharded optimizer (data parallel) reduce-scatters each group's
  // gradients out of the same ring, so no model-sized gradient buffer
  // exists either.
  copts.stream.immediateOptimizer =
      opts.optimizerPlacement == "immediate" ||
      (opts.optimizerPlacement == "auto" && opts.clip == 0) ||
      mtc::driver::shardsOptimizer(opts);
  // --host-memory counts 14 B/param with bf16 gradients.
  copts.stream.gradDType = opts.gradDtype;
  // Without a device budget and without --recompute, keep the activations
  // (recompute none: no forward recomputed in the backward, as PyTorch eager
  // does) when that fits comfortably in host memory; else keep the matmul
  // and attention results (selective) when those fit; else recompute whole
  // layers.
  bool keepActivations = recompute.empty() && deviceMemory.empty();
  if (keepActivations)
    recompute = "none";
  if (!finishStreamFlags("train", deviceMemory, cmd.hostMemory, copts.stream,
                         recompute, /*always=*/false,
                         /*stateOnDisk=*/!opts.hostStateFile.empty()))
    return 1;
  opts.deviceMemory = copts.stream.deviceMemory;
  if (!parsePolicyFlags(recompute, cmd.checkpoints, copts))
    return 1;
  mtc::bundle::Bundle b;
  if (!loadInput(input, hf, copts, b))
    return 1;
  if (keepActivations) {
    double need = mtc::driver::trainingHostBytes(b, opts.batch, opts.seq);
    double avail = mtc::driver::hostMemoryAvailable();
    auto mib = [](double bytes) {
      return std::to_string(static_cast<int64_t>(bytes / (1 << 20)));
    };
    if (avail > 0 && need > 0.5 * avail) {
      copts.recompute = mtc::RecomputePolicy::Selective;
      mtc::bundle::Bundle selective;
      if (!loadInput(input, hf, copts, selective))
        return 1;
      double some =
          mtc::driver::trainingHostBytes(selective, opts.batch, opts.seq);
      std::cout << "note: keeping every activation would need " << mib(need)
                << " MiB of the " << mib(avail) << " MiB available; ";
      if (some <= 0.5 * avail) {
        std::cout << "keeping the matmul and attention results (" << mib(some)
                  << " MiB) and recomputing the rest (--recompute "
                     "selective)\n";
        b = std::move(selective);
      } else {
        std::cout << "recomputing layers in the backward (--recompute "
                     "full)\n";
        copts.recompute = mtc::RecomputePolicy::Full;
        mtc::bundle::Bundle full;
        if (!loadInput(input, hf, copts, full))
          return 1;
        b = std::move(full);
      }
    }
  }
  if (!b.step && (!deviceMemory.empty() || !opts.trace.empty()))
    return error("train: --device-memory and --trace need a step plan; '" +
                 input +
                 "' is a bundle without one (compile it with "
                 "mtc compile --device-memory ...)");
  if (!hf.empty())
    opts.hfWeights = mtc::driver::hfWeightsPath(hf);
  opts.modelFiles = modelFiles(input, hf);
  rankDiagnostics.release();
  return mtc::driver::train(b, opts, std::cout, std::cerr);
}

int runGenerate(const std::vector<std::string> &args) {
  if (wantsHelp("generate", args))
    return 0;
  return mtc::driver::runGenerateCommand(kTool, args, std::cout, std::cerr);
}

} // namespace mtc::cli
