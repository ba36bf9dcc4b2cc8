//===- Timeline.h - What a device's streams did, as intervals ---*- C++ -*-===//
//
// Part of mtc. Every device keeps, per stream, the time intervals in which
// its copies and launches executed; DeviceStats (Device.h) is computed from
// them the same way for every device: busy time, copy and compute seconds,
// and the overlap of copies with launches on other, non-host streams.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DEVICE_TIMELINE_H
#define MTC_RUNTIME_DEVICE_TIMELINE_H

#include "runtime/device/Device.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace mtc::device {

/// One stream's executed commands.
struct StreamTimeline {
  using Clock = std::chrono::steady_clock;
  using Interval = std::pair<Clock::time_point, Clock::time_point>;

  std::string label;
  bool hostWork = false; ///< its launches are host work, not device compute
  std::vector<Interval> copies, launches;
  double busySeconds = 0;
  int64_t commands = 0;

  /// Adds an executed copy or launch [begin, end) (clipped to \p origin).
  void add(bool launch, Clock::time_point begin, Clock::time_point end,
           Clock::time_point origin);
  void clear();
};

/// DeviceStats of \p streams (indexed by stream id) since \p origin; the byte
/// and command counters are the caller's.
DeviceStats summarize(const std::vector<const StreamTimeline *> &streams,
                      std::chrono::steady_clock::time_point origin);

} // namespace mtc::device

#endif // MTC_RUNTIME_DEVICE_TIMELINE_H
