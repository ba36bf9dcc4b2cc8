//===- Timeline.cpp - What a device's streams did, as intervals -----------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Timeline.h"

#include <algorithm>
#include <cstdio>

namespace mtc::device {

namespace {

using Clock = StreamTimeline::Clock;
using Interval = StreamTimeline::Interval;

double toSeconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

/// Sorts and merges intervals into a disjoint ascending list.
void mergeIntervals(std::vector<Interval> &v) {
  std::sort(v.begin(), v.end());
  size_t out = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (out > 0 && v[i].first <= v[out - 1].second)
      v[out - 1].second = std::max(v[out - 1].second, v[i].second);
    else
      v[out++] = v[i];
  }
  v.resize(out);
}

} // namespace

void StreamTimeline::add(bool launch, Clock::time_point begin,
                         Clock::time_point end, Clock::time_point origin) {
  ++commands;
  Interval iv{std::max(begin, origin), end};
  if (!(iv.first < iv.second))
    return;
  busySeconds += toSeconds(iv.second - iv.first);
  (launch ? launches : copies).push_back(iv);
}

void StreamTimeline::clear() {
  copies.clear();
  launches.clear();
  busySeconds = 0;
  commands = 0;
}

DeviceStats summarize(const std::vector<const StreamTimeline *> &streams,
                      Clock::time_point origin) {
  DeviceStats out;
  out.elapsedSeconds = toSeconds(Clock::now() - origin);
  double covered = 0;
  for (const StreamTimeline *st : streams) {
    out.streams.push_back({st->label, st->busySeconds, st->commands});
    for (const Interval &iv : st->launches)
      out.computeSeconds += toSeconds(iv.second - iv.first);
    if (st->copies.empty())
      continue;
    // the union of the launches running on the other streams
    std::vector<Interval> compute;
    for (const StreamTimeline *other : streams)
      if (other != st && !other->hostWork)
        compute.insert(compute.end(), other->launches.begin(),
                       other->launches.end());
    mergeIntervals(compute);
    for (const Interval &c : st->copies) {
      out.copySeconds += toSeconds(c.second - c.first);
      auto it = std::lower_bound(compute.begin(), compute.end(), c.first,
                                 [](const Interval &iv, Clock::time_point t) {
                                   return iv.second < t;
                                 });
      for (; it != compute.end() && it->first < c.second; ++it) {
        auto lo = std::max(it->first, c.first);
        auto hi = std::min(it->second, c.second);
        if (lo < hi)
          covered += toSeconds(hi - lo);
      }
    }
  }
  out.overlap = out.copySeconds > 0 ? covered / out.copySeconds : 0;
  return out;
}

} // namespace mtc::device
