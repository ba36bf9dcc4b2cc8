//===- Trace.h - Chrome trace-event timelines -------------------*- C++ -*-===//
//
// Part of mtc. Collects complete ("X") spans on named tracks and writes them as
// Chrome trace-event JSON, the format chrome://tracing and ui.perfetto.dev
// read:
//
//   {"traceEvents": [
//     {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1,
//      "args": {"name": "copy"}},
//     {"name": "copy h2d 4096 bytes", "cat": "copy", "ph": "X",
//      "ts": 12.5, "dur": 3.25, "pid": 1, "tid": 1}, ...]}
//
// Each track is one "thread" (tid) named by a thread_name metadata event; a
// CpuDevice stream is one track, host threads (the optimizer) add their own.
// Timestamps are microseconds since the Trace was constructed (steady_clock).
// All members are thread-safe.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DEVICE_TRACE_H
#define MTC_RUNTIME_DEVICE_TRACE_H

#include "lib/Format/ChromeTrace.h"
#include "lib/Support/Status.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace mtc::device {

class Trace {
public:
  using Clock = std::chrono::steady_clock;

  /// At most \p maxEvents spans are kept; later ones are counted in
  /// dropped() and not written.
  explicit Trace(size_t maxEvents = size_t(1) << 22);

  /// The id of the track named \p name, created (in order of first use) if
  /// it does not exist yet.
  int track(const std::string &name);

  /// Adds a complete span [begin, end] named \p name to \p track.
  void span(int track, const std::string &name, Clock::time_point begin,
            Clock::time_point end, const std::string &category = "host");
  void span(const std::string &track, const std::string &name,
            Clock::time_point begin, Clock::time_point end,
            const std::string &category = "host") {
    span(this->track(track), name, begin, end, category);
  }

  /// RAII: a span from construction to destruction.
  class Scope {
  public:
    Scope(Trace *trace, int track, std::string name,
          std::string category = "host")
        : trace(trace), trackId(track), name(std::move(name)),
          category(std::move(category)), begin(Clock::now()) {}
    ~Scope() {
      if (trace)
        trace->span(trackId, name, begin, Clock::now(), category);
    }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Trace *trace;
    int trackId;
    std::string name, category;
    Clock::time_point begin;
  };

  /// Spans kept / dropped (over maxEvents).
  size_t size() const;
  size_t dropped() const;
  /// Forgets every span (tracks stay).
  void clear();

  /// Writes the trace atomically (path.tmp, fsync, rename); errors read
  /// "PATH: ...".
  Status write(const std::string &path) const;
  /// The JSON text write() would produce.
  std::string json() const;

private:
  using Span = format::ChromeTraceSpan;
  mutable std::mutex mu;
  Clock::time_point origin;
  size_t maxEvents;
  size_t droppedCount = 0;
  std::vector<std::string> tracks; // index = tid - 1
  std::map<std::string, int> trackIds;
  std::vector<Span> spans;
};

} // namespace mtc::device

#endif // MTC_RUNTIME_DEVICE_TRACE_H
