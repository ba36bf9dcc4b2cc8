//===- Metrics.cpp - JSONL metrics and console progress -------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Metrics.h"

#include "lib/Support/Files.h"
#include "lib/Support/JsonString.h"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <unistd.h>

namespace mtc::train {

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

std::string formatJsonNumber(double d) {
  if (!std::isfinite(d))
    return "null";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d);
  return std::string(buf, res.ptr);
}

std::string jsonQuote(std::string_view s) { return jsonString(s); }

void JsonValue::appendTo(std::string &out) const {
  switch (kind) {
  case Double:
    out += formatJsonNumber(d);
    return;
  case Int:
    out += std::to_string(i);
    return;
  case Bool:
    out += b ? "true" : "false";
    return;
  case String:
    out += jsonQuote(s);
    return;
  }
}

std::string formatJsonLine(
    std::initializer_list<std::pair<std::string_view, JsonValue>> fields) {
  std::string out = "{";
  bool first = true;
  for (const auto &[k, v] : fields) {
    if (!first)
      out += ", ";
    first = false;
    out += jsonQuote(k);
    out += ": ";
    v.appendTo(out);
  }
  return out + "}";
}

JsonlWriter::JsonlWriter(JsonlWriter &&other) noexcept
    : f(other.f), file(std::move(other.file)) {
  other.f = nullptr;
}

JsonlWriter &JsonlWriter::operator=(JsonlWriter &&other) noexcept {
  if (this != &other) {
    if (f)
      std::fclose(f);
    f = other.f;
    file = std::move(other.file);
    other.f = nullptr;
  }
  return *this;
}

JsonlWriter::~JsonlWriter() {
  if (f)
    std::fclose(f);
}

Expected<JsonlWriter> JsonlWriter::open(const std::string &path, bool append) {
  // /dev/null, a FIFO, /dev/stdout: written through (lib/Support/Files.h).
  Expected<int> fd = openOutputStream(path, append);
  if (!fd)
    return fd.status();
  FILE *f = ::fdopen(*fd, append ? "a" : "w");
  if (!f) {
    Status st = Status::error(
        path + ": cannot open for writing: " + std::strerror(errno));
    ::close(*fd);
    return st;
  }
  JsonlWriter w;
  w.f = f;
  w.file = path;
  return Expected<JsonlWriter>(std::move(w));
}

Status JsonlWriter::write(
    std::initializer_list<std::pair<std::string_view, JsonValue>> fields) {
  if (!f)
    return Status::error("metrics writer is not open");
  std::string text = formatJsonLine(fields);
  text += '\n';
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size() ||
      std::fflush(f) != 0)
    return Status::error(file + ": write failed: " + std::strerror(errno));
  return Status::success();
}

Status JsonlWriter::write(
    const std::vector<std::pair<std::string, JsonValue>> &fields) {
  if (!f)
    return Status::error("metrics writer is not open");
  std::string text = "{";
  for (size_t k = 0; k < fields.size(); ++k) {
    if (k)
      text += ", ";
    text += jsonQuote(fields[k].first);
    text += ": ";
    fields[k].second.appendTo(text);
  }
  text += "}\n";
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size() ||
      std::fflush(f) != 0)
    return Status::error(file + ": write failed: " + std::strerror(errno));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Formatting
//===----------------------------------------------------------------------===//

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "--";
  long long s = std::llround(seconds);
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof(buf), "%llds", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
  else if (s < 86400)
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  else
    std::snprintf(buf, sizeof(buf), "%lldd%02lldh", s / 86400,
                  (s % 86400) / 3600);
  return buf;
}

std::string formatCount(double v) {
  if (!std::isfinite(v))
    return "--";
  char buf[32];
  const char *neg = v < 0 ? "-" : "";
  v = std::fabs(v);
  if (std::round(v) < 1000) {
    std::snprintf(buf, sizeof(buf), "%s%.0f", neg, v);
    return buf;
  }
  static const char units[] = {'k', 'M', 'G', 'T', 'P'};
  double scaled = v;
  for (int u = 0; u < 5; ++u) {
    scaled /= 1000.0;
    // Pick the precision giving 3 significant digits, after rounding.
    const char *fmt = scaled < 9.995   ? "%s%.2f%c"
                      : scaled < 99.95 ? "%s%.1f%c"
                                       : "%s%.0f%c";
    if (std::round(scaled) >= 1000 && u < 4)
      continue;
    if (scaled >= 999.5 && u < 4)
      continue;
    std::snprintf(buf, sizeof(buf), fmt, neg, scaled, units[u]);
    return buf;
  }
  return "--";
}

std::string formatLr(double lr) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1e", lr);
  return buf;
}

std::string formatProgress(const ProgressInfo &p) {
  char loss[32];
  if (std::isfinite(p.loss))
    std::snprintf(loss, sizeof(loss), "%.4f", p.loss);
  else
    std::snprintf(loss, sizeof(loss), "%s", std::isnan(p.loss) ? "nan" : "inf");
  std::string out = "step " + std::to_string(p.step);
  if (p.totalSteps > 0)
    out += "/" + std::to_string(p.totalSteps);
  out += " | loss ";
  out += loss;
  out += " | lr " + formatLr(p.lr);
  out += " | " + formatCount(p.tokensPerSecond) + " tok/s";
  out += " | ETA " + formatDuration(p.etaSeconds);
  return out;
}

//===----------------------------------------------------------------------===//
// ProgressReporter
//===----------------------------------------------------------------------===//

static double steadySeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

ProgressReporter::ProgressReporter(int64_t totalSteps, FILE *out, int64_t every)
    : total(totalSteps), out(out ? out : stdout), every(every > 0 ? every : 1) {
  tty = ::isatty(::fileno(this->out)) == 1;
  start = steadySeconds();
  lastTime = 0;
}

double ProgressReporter::now() const { return steadySeconds() - start; }

void ProgressReporter::update(int64_t step, double loss, double lr,
                              double tokens) {
  updateAt(step, loss, lr, tokens, now());
}

void ProgressReporter::updateAt(int64_t step, double loss, double lr,
                                double tokens, double t) {
  double dt = t - lastTime;
  if (dt > 0) {
    double inst = tokens / dt;
    rate = rate == 0 ? inst : 0.8 * rate + 0.2 * inst;
  }
  if (firstStep < 0) {
    // The first step (compilation, warm caches) does not predict the rest:
    // the ETA is measured from here.
    firstStep = step;
    firstTime = t;
  }
  lastTime = t;
  lastStep = step;
  ProgressInfo p;
  p.step = step;
  p.totalSteps = total;
  p.loss = loss;
  p.lr = lr;
  p.tokensPerSecond = rate;
  if (step > firstStep && total > 0) {
    double perStep = (t - firstTime) / static_cast<double>(step - firstStep);
    p.etaSeconds =
        perStep * static_cast<double>(std::max<int64_t>(0, total - step));
  } else if (total > 0 && step >= total) {
    p.etaSeconds = 0;
  }
  line = formatProgress(p);
  if (tty) {
    std::string padded = line;
    if (padded.size() < lastWidth)
      padded.append(lastWidth - padded.size(), ' ');
    lastWidth = line.size();
    std::fprintf(out, "\r%s", padded.c_str());
    std::fflush(out);
    printedLast = true;
  } else {
    printedLast = step % every == 0 || (total > 0 && step == total);
    if (printedLast) {
      std::fprintf(out, "%s\n", line.c_str());
      std::fflush(out);
    }
  }
}

void ProgressReporter::finish() {
  if (tty) {
    if (lastWidth)
      std::fputc('\n', out);
  } else if (!printedLast && !line.empty()) {
    std::fprintf(out, "%s\n", line.c_str());
  }
  std::fflush(out);
  printedLast = true;
  lastWidth = 0;
}

} // namespace mtc::train
