//===- Common.cpp - The mtc commands' shared helpers ------------*- C++ -*-===//
//
// Part of mtc. See Tool.h.
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/Tool.h"

#include "compiler/Pipelines/Pipelines.h"
#include "frontend/HFImport.h"
#include "lib/Sim/Profile.h"
#include "lib/Support/ByteSize.h"
#include "lib/Support/Files.h"
#include "lib/Tokenizer/Tokenizer.h"
#include "runtime/driver/DeviceSelect.h"
#include "runtime/driver/Train.h"
#include "runtime/hf/HFWeights.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace mtc::cli {

bool readModelSource(const char * /*command*/, const std::string &hf,
                     const std::string &input, std::string &source,
                     std::string &name) {
  if (!hf.empty())
    return mtc::importHFModel(hf, source, name, std::cerr);
  if (!mtc::readModelFile(input, source, std::cerr))
    return false;
  name = input;
  return true;
}

/// Writes \p text to \p path (lib/Support/Files.h, writeFileAtomically:
/// a regular file atomically, /dev/null, a FIFO or /dev/stdout written
/// through), or to stdout when \p path is empty or "-".
bool writeOutput(const std::string &path, const std::string &text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return true;
  }
  std::cout.flush();
  if (mtc::Status st = mtc::writeFileAtomically(path, text); !st.ok()) {
    error("cannot write '" + path + "': " + st.message());
    return false;
  }
  return true;
}

/// driver::parseFlags, printing the error; returns false on bad input.
bool parseArgs(const char *command, const std::vector<std::string> &args,
               const std::vector<Flag> &flags,
               std::vector<std::string> &positional,
               std::set<std::string> *given) {
  mtc::Status st =
      mtc::driver::parseFlags(command, args, flags, positional, given);
  if (!st.ok())
    error(st.message());
  return st.ok();
}

/// The values of `--set NAME=VALUE` (a List flag) into \p overrides. Prints
/// the error and returns false on a malformed entry.
bool parseOverrides(const char *command, const std::vector<std::string> &sets,
                    mtc::ConfigOverrides &overrides) {
  for (const std::string &value : sets) {
    auto entry = mtc::parseConfigOverride(value);
    if (!entry) {
      error(std::string(command) +
            ": --set: " + llvm::toString(entry.takeError()));
      return false;
    }
    overrides.push_back(std::move(*entry));
  }
  return true;
}

/// Exactly one positional argument (the model or checkpoint).
bool onePositional(const char *command, const std::vector<std::string> &pos,
                   std::string &out) {
  mtc::Expected<std::string> one =
      mtc::driver::onePositional(command, pos, findCommand(command)->usage);
  if (!one) {
    error(one.message());
    return false;
  }
  out = *one;
  return true;
}

bool wantsHelp(const char *command, const std::vector<std::string> &args) {
  if (!mtc::driver::wantsHelp(args))
    return false;
  const Command *c = findCommand(command);
  std::cout << "usage: " << c->usage << "\n";
  if (!c->details.empty())
    std::cout << "\n" << c->details << "\n";
  return true;
}

/// The model of train/gradcheck: one positional MODEL.mt|MODEL.mtb, or
/// `--hf DIR` (imported and compiled in memory).
bool modelInput(const char *command, const std::vector<std::string> &pos,
                const std::string &hf, std::string &input) {
  if (hf.empty())
    return onePositional(command, pos, input);
  if (!pos.empty()) {
    error(std::string(command) +
          ": give either a model file or --hf DIR, not both");
    return false;
  }
  return true;
}

/// The files a model is read from: \p input, or every file of the HF
/// directory (config.json, weights, tokenizer).
std::vector<std::string> modelFiles(const std::string &input,
                                    const std::string &hf) {
  if (hf.empty())
    return {input};
  std::vector<std::string> files = {mtc::hfConfigPath(hf)};
  std::error_code ec;
  std::string dir = std::filesystem::is_directory(hf, ec)
                        ? hf
                        : std::filesystem::path(hf).parent_path().string();
  for (const auto &entry : std::filesystem::directory_iterator(
           dir.empty() ? "." : dir,
           std::filesystem::directory_options::skip_permission_denied, ec))
    if (entry.is_regular_file(ec))
      files.push_back(entry.path().string());
  return files;
}

bool loadInput(const std::string &input, const std::string &hf,
               const mtc::CompileOptions &copts, mtc::bundle::Bundle &b) {
  if (hf.empty())
    return mtc::loadModel(input, copts, std::cerr, b);
  return mtc::compileHFModel(hf, copts, std::cerr, b);
}

/// `--precision fp32|bf16` (empty: not given, fp32) into \p stream. Prints
/// the error and returns false on another value.
bool parsePrecisionFlag(const char *command, const std::string &text,
                        mtc::StreamOptions &stream) {
  if (text.empty() || mtc::bundle::parsePrecision(text, stream.precision))
    return true;
  error(std::string(command) + ": --precision expects fp32 or bf16, got '" +
        text + "'");
  return false;
}

bool finishOptimizerFlags(const char *command, const OptimizerFlags &flags,
                          mtc::StreamOptions &stream) {
  const std::string &p = flags.placement;
  if (p != "auto" && p != "deferred" && p != "immediate") {
    error(std::string(command) +
          ": --optimizer-placement expects auto, deferred or immediate, got '" +
          p + "'");
    return false;
  }
  if (p == "immediate" && flags.clip > 0) {
    error(std::string(command) +
          ": --optimizer-placement immediate updates each layer before the "
          "global gradient norm is known, so it cannot clip; add --clip 0 or "
          "use --optimizer-placement deferred");
    return false;
  }
  stream.immediateOptimizer =
      p == "immediate" || (p == "auto" && flags.clip == 0);
  if (!mtc::bundle::parseGradDType(flags.gradDType, stream.gradDType)) {
    error(std::string(command) + ": --grad-dtype expects fp32 or bf16, got '" +
          flags.gradDType + "'");
    return false;
  }
  if (stream.immediateOptimizer &&
      stream.gradDType == mtc::bundle::GradDType::BF16) {
    error(std::string(command) + ": " +
          mtc::driver::gradDtypeImmediateConflict());
    return false;
  }
  return true;
}

/// The streaming flags of compile and plan.
void addStreamFlags(std::vector<Flag> &flags, mtc::StreamOptions &stream,
                    std::string &deviceMemory, std::string &checkpoints,
                    std::string &hostMemory, OptimizerFlags &optimizer) {
  flags.push_back({Flag::String, "--device-memory", &deviceMemory});
  flags.push_back({Flag::String, "--host-memory", &hostMemory});
  flags.push_back({Flag::Double, "--clip", &optimizer.clip, 0});
  flags.push_back(
      {Flag::String, "--optimizer-placement", &optimizer.placement});
  flags.push_back({Flag::String, "--grad-dtype", &optimizer.gradDType});
  flags.push_back({Flag::Int, "--batch", &stream.batch, 1, limits::kBatch});
  flags.push_back({Flag::Int, "--seq", &stream.seq, 1, limits::kSeq});
  flags.push_back({Flag::Int, "--micro-batches", &stream.microBatches, 1,
                   limits::kMicroBatches});
  flags.push_back({Flag::Int, "--prefetch-depth", &stream.prefetchDepth, 1,
                   limits::kLayerInstances});
  flags.push_back({Flag::Int, "--checkpoint-every", &stream.checkpointEvery, 1,
                   limits::kLayerInstances});
  flags.push_back({Flag::Int, "--selective-layers", &stream.selectiveLayers, 0,
                   limits::kLayerInstances});
  flags.push_back({Flag::String, "--checkpoints", &checkpoints});
}

/// `--device cpu|cuda|cuda-emu` of compile and plan: the device the bundle
/// will run on. For the CUDA backend the fused regions are also emitted as
/// CUDA C (the bundle's cuda_kernels, docs/cuda-kernels.md). Prints the error
/// and returns false on an unknown device.
bool parseDeviceFlag(const char *command, const std::string &name,
                     mtc::driver::DeviceKind &kind,
                     mtc::CompileOptions &copts) {
  mtc::Expected<mtc::driver::DeviceKind> parsed =
      mtc::driver::parseDeviceKind(name);
  if (!parsed) {
    error(std::string(command) + ": " + parsed.message());
    return false;
  }
  kind = *parsed;
  copts.cudaKernels = mtc::driver::deviceKindInfo(kind).backend ==
                      mtc::driver::KernelBackend::Cuda;
  return true;
}

bool parseGpuFlag(const char *command, mtc::driver::DeviceKind device,
                  const std::string &gpu, mtc::CompileOptions &copts) {
  // A real GPU prices its plans on a GPU profile by default.
  if (gpu.empty() && device != mtc::driver::DeviceKind::Cuda)
    return true;
  if (!mtc::driver::isGpu(device)) {
    error(std::string(command) +
          ": --gpu names the GPU of --device cuda (or cuda-emu); the CPU "
          "device's plans are priced at its own rates");
    return false;
  }
  std::string name = gpu.empty() ? mtc::kDefaultGpuProfile : gpu;
  mtc::Expected<mtc::sim::Profile> profile = mtc::sim::loadProfile(name);
  if (!profile) {
    error(std::string(command) + ": --gpu: " + profile.message());
    return false;
  }
  copts.gpu = std::move(profile).value();
  return true;
}

/// `--recompute` and `--checkpoints` (empty: not given, the defaults stay)
/// into \p copts. Prints the error and returns false on an unknown value.
bool parsePolicyFlags(const std::string &recompute,
                      const std::string &checkpoints,
                      mtc::CompileOptions &copts) {
  if (!recompute.empty()) {
    llvm::Expected<mtc::RecomputePolicy> policy =
        mtc::parseRecomputePolicy(recompute);
    if (!policy) {
      error(llvm::toString(policy.takeError()));
      return false;
    }
    copts.recompute = *policy;
  }
  if (!checkpoints.empty()) {
    llvm::Expected<mtc::CheckpointPlacement> placement =
        mtc::parseCheckpointPlacement(checkpoints);
    if (!placement) {
      error(llvm::toString(placement.takeError()));
      return false;
    }
    copts.stream.checkpoints = *placement;
  }
  return true;
}

/// Parses --device-memory, turns streaming on when it is given (or \p
/// always), and picks the recompute default (auto with streaming, else
/// full). Prints the error and returns false on bad input.
bool finishStreamFlags(const char *command, const std::string &deviceMemory,
                       const std::string &hostMemory,
                       mtc::StreamOptions &stream, std::string &recompute,
                       bool always, bool stateOnDisk) {
  if (mtc::Status st = mtc::driver::checkStepTokens(
          command, stream.batch, stream.seq, stream.microBatches);
      !st.ok()) {
    error(st.message());
    return false;
  }
  if (!deviceMemory.empty()) {
    llvm::Expected<int64_t> bytes = mtc::parseDeviceMemory(deviceMemory);
    if (!bytes) {
      error(std::string(command) +
            ": --device-memory: " + llvm::toString(bytes.takeError()));
      return false;
    }
    stream.deviceMemory = *bytes;
  }
  stream.enabled = always || !deviceMemory.empty();
  // --host-memory: the plan's host budget (the training state and the host
  // buffers); by default the memory this machine has available, unless the
  // state lives in a file (--host-state-file).
  if (!hostMemory.empty()) {
    llvm::Expected<int64_t> bytes = mtc::parseDeviceMemory(hostMemory);
    if (!bytes) {
      error(std::string(command) +
            ": --host-memory: " + llvm::toString(bytes.takeError()));
      return false;
    }
    stream.hostMemory = *bytes;
  } else if (stream.enabled && !stateOnDisk) {
    stream.hostMemory =
        static_cast<int64_t>(mtc::driver::hostMemoryAvailable());
  }
  if (recompute.empty())
    recompute = stream.enabled ? "auto" : "full";
  if (recompute == "auto" && !stream.enabled) {
    error(std::string(command) +
          ": --recompute auto needs --device-memory (a streaming plan)");
    return false;
  }
  if (stream.checkpointEvery > 1 && !stream.enabled) {
    error(std::string(command) + ": --checkpoint-every needs --device-memory "
                                 "(segment checkpointing is a streaming plan)");
    return false;
  }
  if (stream.selectiveLayers >= 0) {
    if (!stream.enabled) {
      error(std::string(command) + ": --selective-layers needs "
                                   "--device-memory (a mixed recompute plan "
                                   "is a streaming plan)");
      return false;
    }
    if (recompute == "auto")
      recompute = "selective";
    if (recompute != "selective") {
      error(std::string(command) +
            ": --selective-layers needs --recompute "
            "selective (the first S layer instances "
            "keep selective checkpoints, the rest "
            "their input), got --recompute " +
            recompute);
      return false;
    }
  }
  if (stream.enabled && (stream.batch < 1 || stream.seq < 1)) {
    error(std::string(command) + ": a streaming plan needs --batch N and "
                                 "--seq N");
    return false;
  }
  return true;
}

std::string withCommas(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

bool resolveAutoDeviceMemory(const char *command,
                             mtc::driver::DeviceKind device,
                             std::string &deviceMemory) {
  if (deviceMemory != "auto")
    return true;
  mtc::Expected<int64_t> bytes = mtc::driver::resolveDeviceMemory(
      deviceMemory, device, command, std::cout);
  if (!bytes) {
    error(bytes.message());
    return false;
  }
  deviceMemory = std::to_string(*bytes);
  return true;
}

void printCudaReserve(std::ostream &os, mtc::driver::DeviceKind device,
                      int64_t budget) {
  if (!mtc::driver::isGpu(device))
    return;
  int64_t reserve = mtc::driver::cudaBackendReserveBytes();
  os << "beside the plan on " << mtc::driver::deviceKindName(device)
     << ": the CUDA backend's scratch and "
     << "flags, " << reserve << " bytes; device total " << budget + reserve
     << " bytes ("
     << mtc::formatBytes(budget + reserve, mtc::ByteFormat::approx()) << ")\n";
}

} // namespace mtc::cli
