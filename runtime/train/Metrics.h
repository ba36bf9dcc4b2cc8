//===- Metrics.h - JSONL metrics and console progress -----------*- C++ -*-===//
//
// Part of mtc. JsonlWriter appends one JSON object per line and flushes it, so
// a crash loses at most the line being written. Numbers are printed in the
// shortest form that reads back to the same double (std::to_chars); NaN and
// infinities, which JSON cannot express, are written as null.
//
// ProgressReporter: on a terminal, one live line redrawn with '\r'
//   step 120/500 | loss 2.3456 | lr 3.0e-04 | 12.3k tok/s | ETA 1m12s
// otherwise the same text as plain lines every `every` steps (and at the end).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_TRAIN_METRICS_H
#define MTC_RUNTIME_TRAIN_METRICS_H

#include "lib/Support/Status.h"

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mtc::train {

/// A JSON scalar: number (double or integer), string or bool.
class JsonValue {
public:
  JsonValue(double d) : kind(Double), d(d) {}
  JsonValue(float f) : kind(Double), d(f) {}
  JsonValue(int v) : kind(Int), i(v) {}
  JsonValue(long v) : kind(Int), i(v) {}
  JsonValue(long long v) : kind(Int), i(v) {}
  JsonValue(unsigned v) : kind(Int), i(v) {}
  JsonValue(unsigned long v) : kind(Int), i(static_cast<int64_t>(v)) {}
  JsonValue(unsigned long long v) : kind(Int), i(static_cast<int64_t>(v)) {}
  JsonValue(bool b) : kind(Bool), b(b) {}
  JsonValue(const char *s) : kind(String), s(s) {}
  JsonValue(std::string s) : kind(String), s(std::move(s)) {}

  /// Appends the JSON text of this value to \p out.
  void appendTo(std::string &out) const;

private:
  enum Kind { Double, Int, Bool, String } kind;
  double d = 0;
  int64_t i = 0;
  bool b = false;
  std::string s;
};

/// Shortest round-trip text of \p d ("0.1", "1e-05", "3"); "null" for NaN/inf.
std::string formatJsonNumber(double d);
/// A JSON string literal with escapes.
std::string jsonQuote(std::string_view s);
/// {"k": v, ...} on one line (no newline).
std::string formatJsonLine(
    std::initializer_list<std::pair<std::string_view, JsonValue>> fields);

class JsonlWriter {
public:
  JsonlWriter() = default;
  JsonlWriter(JsonlWriter &&other) noexcept;
  JsonlWriter &operator=(JsonlWriter &&other) noexcept;
  JsonlWriter(const JsonlWriter &) = delete;
  ~JsonlWriter();

  /// Creates (or, with \p append, extends) \p path.
  static Expected<JsonlWriter> open(const std::string &path,
                                    bool append = false);
  /// Writes one line and flushes it.
  Status
  write(std::initializer_list<std::pair<std::string_view, JsonValue>> fields);
  /// The same for a field list built at run time.
  Status write(const std::vector<std::pair<std::string, JsonValue>> &fields);

private:
  FILE *f = nullptr;
  std::string file;
};

/// "45s", "1m12s", "2h03m", "3d04h"; "--" for negative or non-finite.
std::string formatDuration(double seconds);
/// "950", "12.3k", "4.56M", "1.20G" (3 significant digits above 1000).
std::string formatCount(double v);
/// "3.0e-04".
std::string formatLr(double lr);

struct ProgressInfo {
  int64_t step = 0, totalSteps = 0;
  double loss = 0, lr = 0;
  double tokensPerSecond = 0;
  double etaSeconds = -1;
};
/// "step 120/500 | loss 2.3456 | lr 3.0e-04 | 12.3k tok/s | ETA 1m12s".
std::string formatProgress(const ProgressInfo &p);

class ProgressReporter {
public:
  /// \p out defaults to stdout; TTY detection via isatty(fileno(out)).
  /// \p every: plain-line period when not a TTY.
  ProgressReporter(int64_t totalSteps, FILE *out = stdout, int64_t every = 10);

  /// Call after step \p step (1-based) processed \p tokens tokens; measures
  /// time itself (steady clock, from construction).
  void update(int64_t step, double loss, double lr, double tokens);
  /// Same with an explicit clock reading in seconds (for tests / replays).
  void updateAt(int64_t step, double loss, double lr, double tokens,
                double nowSeconds);
  /// Ends the live line (newline on a TTY; prints the last line otherwise).
  void finish();

  bool isTty() const { return tty; }
  void setTty(bool t) { tty = t; }
  /// The last line formatted.
  const std::string &lastLine() const { return line; }

private:
  double now() const;
  int64_t total;
  FILE *out;
  int64_t every;
  bool tty;
  double start;
  double lastTime = 0;
  double rate = 0; // smoothed tokens/s
  int64_t lastStep = 0, firstStep = -1;
  double firstTime = 0;
  bool printedLast = false;
  size_t lastWidth = 0;
  std::string line;
};

} // namespace mtc::train

#endif // MTC_RUNTIME_TRAIN_METRICS_H
