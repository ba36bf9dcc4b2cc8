//===- StreamSupport.h - What the stream executor's files share -*- C++ -*-===//
//
// Part of mtc. Private to runtime/stream: the error and clock helpers of the
// files StreamExecutor's members are spread over (StreamExecutor.h says
// which).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_STREAM_STREAMSUPPORT_H
#define MTC_RUNTIME_STREAM_STREAMSUPPORT_H

#include "lib/Support/Status.h"
#include "runtime/exec/Failure.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mtc::stream::detail {

/// A plan the runtime cannot run, raised as "step plan: MSG".
[[noreturn]] inline void planError(const std::string &msg) {
  exec::raise("step plan: " + msg);
}

/// A device call's error, raised with "device: " in front (the tools print
/// device errors so).
inline void deviceCheck(const Status &st) {
  if (!st.ok())
    exec::raise("device: " + st.message());
}
template <typename T> T deviceValue(Expected<T> e) {
  deviceCheck(e.status());
  return std::move(e).value();
}

/// Seconds on the steady clock.
inline double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// The element count of a concrete shape.
inline int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

} // namespace mtc::stream::detail

#endif // MTC_RUNTIME_STREAM_STREAMSUPPORT_H
