//===- ChromeTrace.h - Chrome trace-event files -----------------*- C++ -*-===//
//
// Part of mtc. The trace-event JSON that chrome://tracing and Perfetto read,
// as `mtc train --trace` (runtime/device/Trace) and `mtc simulate
// --timeline` (lib/Sim/Timeline) write it: one process, one named track
// (thread) per stream in the given order, one complete ("X") event per span,
// times in microseconds with three decimals.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_FORMAT_CHROMETRACE_H
#define MTC_LIB_FORMAT_CHROMETRACE_H

#include "lib/Support/Status.h"

#include <string>
#include <vector>

namespace mtc::format {

/// One complete event of a trace.
struct ChromeTraceSpan {
  int track = 0;              ///< 1-based index into the tracks
  std::string name, category; ///< the event's label and "cat"
  double ts = 0, dur = 0;     ///< start and duration, microseconds
};

/// The trace of \p spans on \p tracks (track i + 1 is tracks[i]) of a
/// process named \p process.
std::string chromeTraceJson(const std::string &process,
                            const std::vector<std::string> &tracks,
                            const std::vector<ChromeTraceSpan> &spans);

/// Writes \p json to \p path atomically (a temporary file, then rename).
Status writeChromeTrace(const std::string &path, const std::string &json);

} // namespace mtc::format

#endif // MTC_LIB_FORMAT_CHROMETRACE_H
