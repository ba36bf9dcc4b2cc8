//===- Tool.h - What the mtc commands share ---------------------*- C++ -*-===//
//
// Part of mtc. Internal to tools/mtc: the command table's entry, the tool's
// identity for the shared train/generate code, the flag and input helpers
// the commands share (each prints its error as "mtc: error: ..." and
// returns false), and one run function per command, each in its own file
// (Compile.cpp, Plan.cpp, Train.cpp, ...); mtc.cpp dispatches to them.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TOOLS_MTC_TOOL_H
#define MTC_TOOLS_MTC_TOOL_H

#include "compiler/Driver/CompileModel.h"
#include "lib/Bundle/Bundle.h"
#include "runtime/driver/CommandLine.h"
#include "runtime/driver/DeviceKind.h"
#include "runtime/driver/TrainCommand.h"

#include <cstdint>
#include <fstream>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace mtc::cli {

/// One command of the table in mtc.cpp.
struct Command {
  const char *name;
  std::string usage;
  std::string summary;
  int (*run)(const std::vector<std::string> &args);
  std::string details = ""; ///< more help after the usage, if any
};

/// `train` and `generate` are shared with mtc-run (runtime/driver/
/// TrainCommand.h); here they may also compile a model.
inline const driver::Tool kTool = {"mtc", /*compiles=*/true};

/// The command named \p name, or nullptr.
const Command *findCommand(const std::string &name);
/// The list of commands (`mtc --help`).
void printUsage(std::ostream &os);
/// Prints "mtc: error: MESSAGE" and returns 1.
int error(const std::string &message);

using driver::Flag;
namespace limits = driver::limits;

/// The model source of a command: the .mt file \p input, or the DSL imported
/// from the HuggingFace directory \p hf when it is not empty; \p name is
/// the name diagnostics use. Prints the error ("COMMAND: ...") and returns
/// false on failure.
bool readModelSource(const char *command, const std::string &hf,
                     const std::string &input, std::string &source,
                     std::string &name);

/// Writes \p text to \p path atomically (a temporary file, then rename), or to
/// stdout when \p path is empty or "-".
bool writeOutput(const std::string &path, const std::string &text);

/// driver::parseFlags, printing the error; returns false on bad input.
bool parseArgs(const char *command, const std::vector<std::string> &args,
               const std::vector<Flag> &flags,
               std::vector<std::string> &positional,
               std::set<std::string> *given = nullptr);

/// The values of `--set NAME=VALUE` (a List flag) into \p overrides. Prints
/// the error and returns false on a malformed entry.
bool parseOverrides(const char *command, const std::vector<std::string> &sets,
                    mtc::ConfigOverrides &overrides);

/// Exactly one positional argument (the model or checkpoint).
bool onePositional(const char *command, const std::vector<std::string> &pos,
                   std::string &out);

/// True (after printing the usage of \p command) when \p args ask for help.
bool wantsHelp(const char *command, const std::vector<std::string> &args);

/// The model of train/gradcheck: one positional MODEL.mt|MODEL.mtb, or
/// `--hf DIR` (imported and compiled in memory).
bool modelInput(const char *command, const std::vector<std::string> &pos,
                const std::string &hf, std::string &input);

/// The files a model is read from: \p input, or every file of the HF
/// directory (config.json, weights, tokenizer).
std::vector<std::string> modelFiles(const std::string &input,
                                    const std::string &hf);

bool loadInput(const std::string &input, const std::string &hf,
               const mtc::CompileOptions &copts, mtc::bundle::Bundle &b);

/// `--precision fp32|bf16` (empty: not given, fp32) into \p stream. Prints
/// the error and returns false on another value.
bool parsePrecisionFlag(const char *command, const std::string &text,
                        mtc::StreamOptions &stream);

/// `--clip X` and `--optimizer-placement auto|deferred|immediate` of compile
/// and plan: whether the plan carries the gradient ring of the immediate
/// placement (docs/training.md, "Optimizer placement").
struct OptimizerFlags {
  double clip = 1.0;
  std::string placement = "auto";
  /// `--grad-dtype fp32|bf16`: the deferred placement's host gradients.
  std::string gradDType = "fp32";
};

/// Resolves \p flags into \p stream (immediate: explicit, or auto with
/// --clip 0; the gradient dtype); immediate with clipping, or with
/// --grad-dtype bf16, is an error. Prints the error and
/// returns false on bad input.
bool finishOptimizerFlags(const char *command, const OptimizerFlags &flags,
                          mtc::StreamOptions &stream);

/// The streaming flags of compile and plan (--host-memory into \p
/// hostMemory, parsed by finishStreamFlags).
void addStreamFlags(std::vector<Flag> &flags, mtc::StreamOptions &stream,
                    std::string &deviceMemory, std::string &checkpoints,
                    std::string &hostMemory, OptimizerFlags &optimizer);

/// `--device cpu|cuda|cuda-emu` of compile and plan: the device the bundle
/// will run on. For the CUDA backend the fused regions are also emitted as
/// CUDA C (the bundle's cuda_kernels, docs/cuda-kernels.md). \p name's kind
/// into \p kind; prints the error and returns false on an unknown device.
bool parseDeviceFlag(const char *command, const std::string &name,
                     mtc::driver::DeviceKind &kind, mtc::CompileOptions &copts);

/// `--gpu NAME|FILE` of compile, plan and train: the GPU profile
/// (lib/Sim) `--recompute auto` prices its plans on, into \p copts.gpu.
/// With `--device cuda` it defaults to kDefaultGpuProfile; with `--device
/// cuda-emu` it is optional (absent: the CPU device's rates); with `--device
/// cpu` it is an error. Prints the error and returns false on a bad profile.
bool parseGpuFlag(const char *command, mtc::driver::DeviceKind device,
                  const std::string &gpu, mtc::CompileOptions &copts);

/// `--recompute` and `--checkpoints` (empty: not given, the defaults stay)
/// into \p copts. Prints the error and returns false on an unknown value.
bool parsePolicyFlags(const std::string &recompute,
                      const std::string &checkpoints,
                      mtc::CompileOptions &copts);

/// Parses --device-memory and --host-memory (\p hostMemory; not given: the
/// memory this machine has available, unless \p stateOnDisk: the state
/// lives in a file), turns streaming on when --device-memory is given (or
/// \p always), and picks the recompute default (auto with streaming, else
/// full). Prints the error and returns false on bad input.
bool finishStreamFlags(const char *command, const std::string &deviceMemory,
                       const std::string &hostMemory,
                       mtc::StreamOptions &stream, std::string &recompute,
                       bool always = false, bool stateOnDisk = false);

std::string withCommas(int64_t v);

/// `--device-memory auto` for \p device (driver/DeviceSelect.h): replaced
/// in \p deviceMemory by the bytes chosen, with a line saying how; other
/// values stay. A device that is not there is an error (a plan needs a
/// number). Prints the error and returns false.
bool resolveAutoDeviceMemory(const char *command,
                             mtc::driver::DeviceKind device,
                             std::string &deviceMemory);

/// On a CUDA device, the plan's "beside the plan" line: the CUDA backend's
/// own device memory and the device total with the arena of \p budget.
void printCudaReserve(std::ostream &os, mtc::driver::DeviceKind device,
                      int64_t budget);

/// The commands, one file each.
int runCompile(const std::vector<std::string> &args);
int runHelp(const std::vector<std::string> &args);
int runGradCheck(const std::vector<std::string> &args);
int runTrain(const std::vector<std::string> &args);
int runGenerate(const std::vector<std::string> &args);
int runImportHF(const std::vector<std::string> &args);
int runExportHF(const std::vector<std::string> &args);
int runPlan(const std::vector<std::string> &args);
int runSimulate(const std::vector<std::string> &args);
int runTokenize(const std::vector<std::string> &args);
/// `mtc simulate --calibrate ...` (Calibrate.cpp), and its usage line.
int runCalibrate(const std::vector<std::string> &args);
const char *calibrateUsage();

} // namespace mtc::cli

#endif // MTC_TOOLS_MTC_TOOL_H
