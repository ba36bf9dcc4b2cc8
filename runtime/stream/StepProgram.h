//===- StepProgram.h - A step program decoded once --------------*- C++ -*-===//
//
// Part of mtc. The streaming executor does not read its commands by name
// while it runs: when it is constructed, the bundle's step program is decoded
// into command kinds (lib/Bundle/StepCommands.def) and typed fields, and
// checked against the bundle's forward_backward. An unknown command, a field
// missing or outside its vocabulary, a stage outside forward_backward or a
// layers loop that does not match its apply_layers op is a load error.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_STREAM_STEPPROGRAM_H
#define MTC_RUNTIME_STREAM_STEPPROGRAM_H

#include "lib/Bundle/Bundle.h"
#include "lib/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mtc::stream {

/// One enumerator per line of StepCommands.def, in its order.
enum class StepCommandKind : uint8_t {
#define MTC_STEP_COMMAND(Kind, Name) Kind,
#include "lib/Bundle/StepCommands.def"
};

/// The program name of \p kind ("wait_weights").
const char *stepCommandName(StepCommandKind kind);

/// One decoded command; the fields its kind does not use keep their
/// defaults.
struct StepCommand {
  StepCommandKind kind = StepCommandKind::Compute;
  /// stage: the forward_backward ops [begin, end) it runs.
  size_t begin = 0, end = 0;
  /// layers: instances [first, first + count) of `layer`, forward or
  /// backward, standing for op `opIndex` of forward_backward (`op`).
  std::string layer;
  int64_t first = 0, count = 0;
  bool forward = true;
  size_t opIndex = 0;
  const bundle::Op *op = nullptr;
  /// optimizer_update, prefetch: how many instances ahead.
  int64_t ahead = 0;
  /// save: to host memory; restore: from host memory (else the device).
  bool host = false;
  /// layers: the commands run for each instance.
  std::vector<StepCommand> body;
};

/// Decodes \p plan's program against \p forwardBackward (the bundle's
/// forward_backward). Errors are the message after "step plan: ".
Expected<std::vector<StepCommand>>
decodeStepProgram(const bundle::StepPlan &plan,
                  const bundle::Function &forwardBackward);

} // namespace mtc::stream

#endif // MTC_RUNTIME_STREAM_STEPPROGRAM_H
