//===- Trace.cpp - Chrome trace-event timelines -----------------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Trace.h"

#include "lib/Support/JsonString.h"

#include "lib/Format/MappedFile.h"

#include <cstdio>

namespace mtc::device {

namespace {

void appendEscaped(std::string &out, const std::string &s) {
  appendJsonString(out, s);
}

void appendNumber(std::string &out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  out += buf;
}

} // namespace

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
  std::string out;
  out.reserve(128 * (spans.size() + tracks.size()) + 64);
  out += "{\"traceEvents\":[\n";
  out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
         "\"args\":{\"name\":\"mtc\"}}";
  for (size_t i = 0; i < tracks.size(); ++i) {
    std::string tid = std::to_string(i + 1);
    out +=
        ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + tid +
        ",\"args\":{\"name\":";
    appendEscaped(out, tracks[i]);
    out += "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,"
           "\"tid\":" +
           tid + ",\"args\":{\"sort_index\":" + tid + "}}";
  }
  for (const Span &s : spans) {
    out += ",\n{\"name\":";
    appendEscaped(out, s.name);
    out += ",\"cat\":";
    appendEscaped(out, s.category);
    out += ",\"ph\":\"X\",\"ts\":";
    appendNumber(out, s.ts);
    out += ",\"dur\":";
    appendNumber(out, s.dur);
    out += ",\"pid\":1,\"tid\":" + std::to_string(s.track) + "}";
  }
  out += "\n],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

Status Trace::write(const std::string &path) const {
  std::string text = json();
  auto writer = AtomicFileWriter::create(path);
  if (!writer)
    return writer.status();
  Status st = writer->write(text.data(), text.size());
  if (st.ok())
    st = writer->commit();
  return st;
}

} // namespace mtc::device
