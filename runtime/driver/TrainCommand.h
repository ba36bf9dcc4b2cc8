//===- TrainCommand.h - The train and generate commands ---------*- C++ -*-===//
//
// Part of mtc. The command lines of `train` and `generate`, shared by the two
// tools that run them: `mtc` (with the compiler: a model may also be .mt
// source or --hf DIR, compiled in process) and `mtc-run` (runtime only:
// bundles compiled elsewhere by `mtc compile`). The flag table, its checks,
// resume's inherited options, the bundle path and the usage text live here
// once; tools/mtc keeps only what needs the compiler.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_TRAINCOMMAND_H
#define MTC_RUNTIME_DRIVER_TRAINCOMMAND_H

#include "lib/Support/Status.h"
#include "runtime/driver/Train.h"

#include <cstdint>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace mtc::driver {

/// The tool a command runs in: its name (in messages and usage lines) and
/// whether it compiles models (`mtc`) or runs bundles only (`mtc-run`).
struct Tool {
  const char *name;
  bool compiles;
};

/// `TOOL train`'s usage line(s), one-line summary and longer help.
std::string trainUsage(const Tool &tool);
std::string trainSummary(const Tool &tool);
const char *trainDetails();
/// `TOOL generate`'s usage line and summary.
std::string generateUsage(const Tool &tool);
const char *generateSummary();

/// `train`'s command line, parsed and checked, before the model is read.
struct TrainCommand {
  TrainOptions opts;
  /// The model: a .mt or .mtb file ("" with --hf); with --resume and no
  /// model given, the checkpoint's bundle.
  std::string input;
  std::string hf; ///< --hf DIR ("" : none)
  /// The flags given (names: "--batch", ...), after --resume's defaults.
  std::set<std::string> given;
  /// --device-memory as given ("" : none); parsed by the model's path.
  std::string deviceMemory;
  /// --host-memory as given ("" : none): the plan's host budget.
  std::string hostMemory;
  /// Flags that shape how the model is compiled, as given ("" or empty: not
  /// given): only a tool that compiles can honour them.
  std::vector<std::string> sets; ///< --set NAME=VALUE, in order
  std::string cpu, recompute, checkpoints, precision;
  /// --gpu NAME|FILE: the GPU profile `--recompute auto` prices plans on.
  std::string gpu;
  int64_t prefetchDepth = 2;
  /// Segment checkpointing (`--checkpoint-every K`, docs/streaming.md).
  int64_t checkpointEvery = 1;
  /// Mixed recomputation (`--selective-layers S`, docs/streaming.md); -1:
  /// not given.
  int64_t selectiveLayers = -1;
};

/// Parses and checks `train`'s \p args: every flag of the table, --resume
/// (flags left out take the checkpoint's values, the model defaults to the
/// checkpoint's bundle, --out to the checkpoint), the model input (for a tool
/// that does not compile, a bundle) and the values' ranges. The error names
/// the command and the flag.
Status parseTrainCommand(const Tool &tool, const std::vector<std::string> &args,
                         TrainCommand &cmd);

/// Trains the bundle cmd.input (MODEL.mtb or the checkpoint's): the flags
/// that would need a recompile are refused, --device-memory sizes the device
/// the bundle's step plan runs on. Returns a process exit code; errors are
/// printed to \p err ("TOOL: error: ...").
int trainBundle(const Tool &tool, TrainCommand &cmd, std::ostream &out,
                std::ostream &err);

/// `TOOL generate CHECKPOINT_DIR ...`: parses \p args and runs generate().
/// Returns a process exit code.
int runGenerateCommand(const Tool &tool, const std::vector<std::string> &args,
                       std::ostream &out, std::ostream &err);

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_TRAINCOMMAND_H
