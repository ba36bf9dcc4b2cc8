//===- Timeline.h - A simulated step as a Chrome trace ----------*- C++ -*-===//
//
// Part of mtc. Writes the spans of a simulated step (Simulator.h) in the
// Chrome trace-event format `mtc train --trace` writes (runtime/device/
// Trace.h): one track per stream in order of first use, complete ("X")
// spans in microseconds, category "compute" for device and host work and
// "copy" for transfers (the host conversion of bf16 weights included).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SIM_TIMELINE_H
#define MTC_LIB_SIM_TIMELINE_H

#include "lib/Sim/Simulator.h"
#include "lib/Support/Status.h"

#include <string>

namespace mtc::sim {

/// The JSON text of \p result's spans.
std::string timelineJson(const SimResult &result);

/// Writes timelineJson atomically to \p path; errors read "PATH: ...".
Status writeTimeline(const SimResult &result, const std::string &path);

} // namespace mtc::sim

#endif // MTC_LIB_SIM_TIMELINE_H
