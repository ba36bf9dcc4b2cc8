//===- Timeline.cpp - A simulated step as a Chrome trace --------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Sim/Timeline.h"

#include "lib/Format/MappedFile.h"
#include "lib/Support/JsonString.h"

#include <cstdio>
#include <map>
#include <vector>

namespace mtc::sim {
namespace {

void appendNumber(std::string &out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  out += buf;
}

} // namespace

std::string timelineJson(const SimResult &result) {
  std::vector<std::string> tracks;
  std::map<std::string, int> ids;
  for (const SimSpan &s : result.spans)
    if (!ids.count(s.stream)) {
      tracks.push_back(s.stream);
      ids[s.stream] = static_cast<int>(tracks.size());
    }
  std::string out = "{\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
         "\"args\":{\"name\":\"mtc simulate\"}}";
  for (size_t i = 0; i < tracks.size(); ++i) {
    std::string tid = std::to_string(i + 1);
    out +=
        ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + tid +
        ",\"args\":{\"name\":";
    appendJsonString(out, tracks[i]);
    out += "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,"
           "\"tid\":" +
           tid + ",\"args\":{\"sort_index\":" + tid + "}}";
  }
  for (const SimSpan &s : result.spans) {
    out += ",\n{\"name\":";
    appendJsonString(out, s.label);
    out += ",\"cat\":";
    appendJsonString(out, s.category == "h2d" || s.category == "d2h" ||
                                  s.label.rfind("convert ", 0) == 0
                              ? "copy"
                              : "compute");
    out += ",\"ph\":\"X\",\"ts\":";
    appendNumber(out, 1e6 * s.start);
    out += ",\"dur\":";
    appendNumber(out, 1e6 * (s.end - s.start));
    out += ",\"pid\":1,\"tid\":" + std::to_string(ids[s.stream]) + "}";
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

Status writeTimeline(const SimResult &result, const std::string &path) {
  std::string text = timelineJson(result);
  auto writer = AtomicFileWriter::create(path);
  if (!writer)
    return writer.status();
  Status st = writer->write(text.data(), text.size());
  if (st.ok())
    st = writer->commit();
  return st;
}

} // namespace mtc::sim
