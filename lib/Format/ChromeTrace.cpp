//===- ChromeTrace.cpp - Chrome trace-event files ---------------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Format/ChromeTrace.h"

#include "lib/Format/MappedFile.h"
#include "lib/Support/JsonString.h"

#include <cstdio>

namespace mtc::format {

namespace {

void appendNumber(std::string &out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  out += buf;
}

} // namespace

std::string chromeTraceJson(const std::string &process,
                            const std::vector<std::string> &tracks,
                            const std::vector<ChromeTraceSpan> &spans) {
  std::string out;
  out.reserve(128 * (spans.size() + tracks.size()) + 64);
  out += "{\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
         "\"args\":{\"name\":";
  appendJsonString(out, process);
  out += "}}";
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
  for (const ChromeTraceSpan &s : spans) {
    out += ",\n{\"name\":";
    appendJsonString(out, s.name);
    out += ",\"cat\":";
    appendJsonString(out, s.category);
    out += ",\"ph\":\"X\",\"ts\":";
    appendNumber(out, s.ts);
    out += ",\"dur\":";
    appendNumber(out, s.dur);
    out += ",\"pid\":1,\"tid\":" + std::to_string(s.track) + "}";
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

Status writeChromeTrace(const std::string &path, const std::string &json) {
  auto writer = AtomicFileWriter::create(path);
  if (!writer)
    return writer.status();
  Status st = writer->write(json.data(), json.size());
  if (st.ok())
    st = writer->commit();
  return st;
}

} // namespace mtc::format
