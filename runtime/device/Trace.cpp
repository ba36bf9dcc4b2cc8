//===- Trace.cpp - Chrome trace-event timelines -----------------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Trace.h"

namespace mtc::device {

Trace::Trace(size_t maxEvents) : origin(Clock::now()), maxEvents(maxEvents) {}

int Trace::track(const std::string &name) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = trackIds.find(name);
  if (it != trackIds.end())
    return it->second;
  tracks.push_back(name);
  int id = static_cast<int>(tracks.size());
  trackIds.emplace(name, id);
  return id;
}

void Trace::span(int track, const std::string &name, Clock::time_point begin,
                 Clock::time_point end, const std::string &category) {
  using Us = std::chrono::duration<double, std::micro>;
  double ts = Us(begin - origin).count();
  double dur = Us(end - begin).count();
  std::lock_guard<std::mutex> lock(mu);
  if (spans.size() >= maxEvents) {
    ++droppedCount;
    return;
  }
  spans.push_back({track, name, category, ts, dur < 0 ? 0 : dur});
}

size_t Trace::size() const {
  std::lock_guard<std::mutex> lock(mu);
  return spans.size();
}

size_t Trace::dropped() const {
  std::lock_guard<std::mutex> lock(mu);
  return droppedCount;
}

void Trace::clear() {
  std::lock_guard<std::mutex> lock(mu);
  spans.clear();
  droppedCount = 0;
}

std::string Trace::json() const {
  std::lock_guard<std::mutex> lock(mu);
  return format::chromeTraceJson("mtc", tracks, spans);
}

Status Trace::write(const std::string &path) const {
  return format::writeChromeTrace(path, json());
}

} // namespace mtc::device
