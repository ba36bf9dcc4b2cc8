//===- Failure.h - How a failure inside the executor unwinds ----*- C++ -*-===//
//
// Part of mtc. Errors are values at every public entry point of the
// executors (Executor, StreamExecutor) and the devices: they return Status
// or Expected. Inside them, a failure deep in an op (a kernel's bad shape, a
// token id outside the vocabulary, a workspace overrun, a device call that
// failed while a layer's commands were being queued) would otherwise have to
// be threaded through every kernel and every allocation, on paths that run
// millions of times and fail almost never. So inside, and only there, a
// failure unwinds: raise() throws an object whose type is private to
// Failure.cpp, and the entry point catches it with catchRaised() and returns
// its message as a Status. Nothing that raise() throws leaves the entry
// point.
//
// Who may raise: the kernels (through OpContext::fail, failOp), Tensor and
// Workspace allocation, the backends' memory operations, and the private
// helpers of Executor and StreamExecutor. A closure the streaming executor
// launches on a device may raise too: the device catches it (any exception
// fails the device, Device.h) and the message reaches the caller as the
// error of the next synchronize().
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_FAILURE_H
#define MTC_RUNTIME_EXEC_FAILURE_H

#include "lib/Support/Status.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace mtc::exec {

/// Ends the running op (and the entry point's call) with \p message.
[[noreturn]] void raise(std::string message);

/// raise()s \p st's message when it is an error.
inline void raiseIfError(const Status &st) {
  if (!st.ok())
    raise(st.message());
}

/// The value of \p e, or raise()s its error.
template <typename T> T valueOrRaise(Expected<T> e) {
  if (!e.ok())
    raise(e.message());
  return std::move(e).value();
}

/// Runs \p body; what it raise()s is returned as the error Status (other
/// exceptions propagate unchanged).
Status catchRaised(const std::function<void()> &body);

/// Runs \p body and returns its result, or the error it raise()d.
template <typename T, typename F> Expected<T> catchRaisedValue(F &&body) {
  std::optional<T> out;
  Status st = catchRaised([&] { out.emplace(body()); });
  if (!st.ok())
    return st;
  return std::move(*out);
}

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_FAILURE_H
