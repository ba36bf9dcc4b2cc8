//===- Timeline.cpp - A simulated step as a Chrome trace --------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Sim/Timeline.h"

#include "lib/Format/ChromeTrace.h"

#include <map>
#include <vector>

namespace mtc::sim {

std::string timelineJson(const SimResult &result) {
  std::vector<std::string> tracks;
  std::map<std::string, int> ids;
  for (const SimSpan &s : result.spans)
    if (!ids.count(s.stream)) {
      tracks.push_back(s.stream);
      ids[s.stream] = static_cast<int>(tracks.size());
    }
  std::vector<format::ChromeTraceSpan> spans;
  spans.reserve(result.spans.size());
  for (const SimSpan &s : result.spans)
    spans.push_back({ids[s.stream], s.label,
                     s.category == "h2d" || s.category == "d2h" ||
                             s.label.rfind("convert ", 0) == 0
                         ? "copy"
                         : "compute",
                     1e6 * s.start, 1e6 * (s.end - s.start)});
  return format::chromeTraceJson("mtc simulate", tracks, spans);
}

Status writeTimeline(const SimResult &result, const std::string &path) {
  return format::writeChromeTrace(path, timelineJson(result));
}

} // namespace mtc::sim
