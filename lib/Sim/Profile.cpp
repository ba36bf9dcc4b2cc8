//===- Profile.cpp - Hardware profiles for the step simulator ---*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Sim/Profile.h"

#include "lib/Bundle/OpKind.h"
#include "lib/Sim/BuiltinProfiles.h"
#include "lib/Support/Files.h"
#include "lib/Support/JsonParse.h"
#include "lib/Support/JsonShow.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

namespace mtc::sim {

double EfficiencyCurve::at(double flops) const {
  if (points.empty())
    return 1.0;
  if (flops <= points.front().flops)
    return points.front().efficiency;
  if (flops >= points.back().flops)
    return points.back().efficiency;
  for (size_t i = 1; i < points.size(); ++i) {
    const EfficiencyPoint &a = points[i - 1], &b = points[i];
    if (flops > b.flops)
      continue;
    double t = (std::log(flops) - std::log(a.flops)) /
               (std::log(b.flops) - std::log(a.flops));
    return a.efficiency + t * (b.efficiency - a.efficiency);
  }
  return points.back().efficiency;
}

double DeviceProfile::gemmEfficiencyAt(double m, double n, double k) const {
  double e = gemmEfficiency.at(2.0 * m * n * k);
  if (gemmShapes.empty() || !(m > 0 && n > 0 && k > 0))
    return e;
  const GemmShapePoint *nearest = nullptr;
  double best = INFINITY;
  for (const GemmShapePoint &s : gemmShapes) {
    double dm = std::log(m / s.m), dn = std::log(n / s.n),
           dk = std::log(k / s.k);
    double d = dm * dm + dn * dn + dk * dk;
    if (d < best) {
      best = d;
      nearest = &s;
    }
  }
  double ref = gemmEfficiency.at(2.0 * nearest->m * nearest->n * nearest->k);
  return std::min(1.0, e * nearest->efficiency / ref);
}

namespace {

using Json = nlohmann::json;

// The bounds of a profile (docs/simulate.md, "Limits"): every rate is at
// least kMinRate and at most its maximum, every efficiency at least
// kMinEfficiency, so that the time of any step the planner accepts (sizes
// below 2^62 bytes and FLOPs) is finite and positive, never inf or nan.
constexpr double kMinRate = 1e6;            ///< bytes/s or FLOP/s
constexpr double kMaxBandwidth = 1e18;      ///< bytes/s (HBM today: ~1e13)
constexpr double kMaxPeakFlops = 1e18;      ///< FLOP/s (a GPU today: ~1e15)
constexpr double kMaxFlops = 1e30;          ///< an efficiency point's FLOPs
constexpr double kMinEfficiency = 1e-6;     ///< of the peak
constexpr double kMinMemoryBytes = 1 << 20; ///< 1 MiB
constexpr double kMaxMemoryBytes = double(1LL << 50); ///< 1 PiB
constexpr size_t kMaxCurvePoints = 1024;
constexpr size_t kMaxGemmShapes = 4096;
/// A profile's text (the built-in ones are ~3 KB, a calibrated one with
/// its measurements ~20 KB).
constexpr size_t kMaxProfileBytes = size_t(1) << 20;

/// A bound for a message: %g (1e+16, 0.5) where that is exact, else the
/// digits of a whole number (1048576).
std::string boundText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  if (std::strtod(buf, nullptr) != v && v == std::floor(v))
    std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

/// \p v as JSON text for a message: short, and never recursing per level
/// of a value nested deep (json::dump would overflow the stack).
std::string shortDump(const Json &v) { return showJson(v); }

/// Reads the fields of one JSON object, recording the first error with the
/// field's dotted path; unknown fields are errors.
class Reader {
public:
  explicit Reader(std::string origin) : origin(std::move(origin)) {}

  bool failed() const { return !problem.empty(); }
  Status status() const {
    return failed() ? Status::error(origin + ": " + problem)
                    : Status::success();
  }

  void fail(const std::string &path, const std::string &what) {
    if (problem.empty())
      problem = path.empty() ? what : "field '" + path + "': " + what;
  }

  /// The object at \p path in \p parent (required), with its known keys.
  const Json *object(const Json &parent, const std::string &key,
                     const std::string &path,
                     const std::set<std::string> &known) {
    const Json *v = field(parent, key, path);
    if (!v)
      return nullptr;
    if (!v->is_object()) {
      fail(path, "expected an object, got " + typeOf(*v));
      return nullptr;
    }
    checkKnown(*v, path, known);
    return v;
  }

  void checkKnown(const Json &obj, const std::string &path,
                  const std::set<std::string> &known) {
    for (auto it = obj.begin(); it != obj.end(); ++it)
      if (!known.count(it.key())) {
        std::string list;
        for (const std::string &k : known)
          list += (list.empty() ? "" : ", ") + k;
        fail(join(path, it.key()), "unknown field (known: " + list + ")");
        return;
      }
  }

  std::string string(const Json &obj, const std::string &key,
                     const std::string &path, bool required = true) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required)
        fail(join(path, key), "missing");
      return "";
    }
    if (!it->is_string()) {
      fail(join(path, key), "expected a string, got " + typeOf(*it));
      return "";
    }
    return it->get<std::string>();
  }

  /// A number in [lo, hi] (\p positive: > lo); \p dflt when absent and not
  /// required.
  double number(const Json &obj, const std::string &key,
                const std::string &path, double lo, double hi, bool positive,
                bool required = true, double dflt = 0) {
    std::string p = join(path, key);
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required)
        fail(p, "missing");
      return dflt;
    }
    if (!it->is_number()) {
      fail(p, "expected a number, got " + typeOf(*it));
      return dflt;
    }
    double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi || (positive && v <= lo)) {
      std::string what = std::string("expected a number ") +
                         (positive ? "> " : ">= ") + boundText(lo);
      if (std::isfinite(hi))
        what += " and <= " + boundText(hi);
      fail(p, what + ", got " + shortDump(*it));
      return dflt;
    }
    return v;
  }

  EfficiencyCurve curve(const Json &obj, const std::string &key,
                        const std::string &path) {
    EfficiencyCurve c;
    std::string p = join(path, key);
    auto it = obj.find(key);
    if (it == obj.end()) {
      fail(p, "missing");
      return c;
    }
    if (!it->is_array() || it->empty()) {
      fail(p, "expected a non-empty array of {\"flops\": F, \"efficiency\": "
              "E} points, got " +
                  typeOf(*it));
      return c;
    }
    if (it->size() > kMaxCurvePoints) {
      fail(p, "has " + std::to_string(it->size()) +
                  " points, more than the limit of " +
                  std::to_string(kMaxCurvePoints));
      return c;
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const Json &pt = (*it)[i];
      std::string pp = p + "[" + std::to_string(i) + "]";
      if (!pt.is_object()) {
        fail(pp, "expected an object, got " + typeOf(pt));
        return c;
      }
      checkKnown(pt, pp, {"flops", "efficiency"});
      EfficiencyPoint e;
      e.flops = number(pt, "flops", pp, 1, kMaxFlops, false);
      e.efficiency = number(pt, "efficiency", pp, kMinEfficiency, 1, false);
      if (failed())
        return c;
      if (!c.points.empty() && e.flops <= c.points.back().flops) {
        fail(pp + ".flops", "points must have increasing flops (" +
                                pt["flops"].dump() + " after " +
                                Json(c.points.back().flops).dump() + ")");
        return c;
      }
      c.points.push_back(e);
    }
    return c;
  }

  /// The optional "gemm_shapes" array of {"m", "n", "k", "efficiency"}.
  std::vector<GemmShapePoint> shapes(const Json &obj, const std::string &key,
                                     const std::string &path) {
    std::vector<GemmShapePoint> out;
    std::string p = join(path, key);
    auto it = obj.find(key);
    if (it == obj.end())
      return out;
    if (!it->is_array()) {
      fail(p, "expected an array of {\"m\": M, \"n\": N, \"k\": K, "
              "\"efficiency\": E} points, got " +
                  typeOf(*it));
      return out;
    }
    if (it->size() > kMaxGemmShapes) {
      fail(p, "has " + std::to_string(it->size()) +
                  " shapes, more than the limit of " +
                  std::to_string(kMaxGemmShapes));
      return out;
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const Json &pt = (*it)[i];
      std::string pp = p + "[" + std::to_string(i) + "]";
      if (!pt.is_object()) {
        fail(pp, "expected an object, got " + typeOf(pt));
        return out;
      }
      checkKnown(pt, pp, {"m", "n", "k", "efficiency"});
      GemmShapePoint g;
      double *dims[] = {&g.m, &g.n, &g.k};
      const char *names[] = {"m", "n", "k"};
      for (int d = 0; d < 3; ++d) {
        *dims[d] = number(pt, names[d], pp, 1, 1e12, false);
        if (!failed() && *dims[d] != std::floor(*dims[d]))
          fail(join(pp, names[d]),
               "expected a whole number, got " + pt[names[d]].dump());
      }
      g.efficiency = number(pt, "efficiency", pp, kMinEfficiency, 1, false);
      if (failed())
        return out;
      out.push_back(g);
    }
    return out;
  }

  /// The optional "memory_bandwidth_by_kind" object: bundle op name ->
  /// bytes/s.
  std::map<std::string, double> byKind(const Json &obj, const std::string &key,
                                       const std::string &path) {
    std::map<std::string, double> out;
    std::string p = join(path, key);
    auto it = obj.find(key);
    if (it == obj.end())
      return out;
    if (!it->is_object()) {
      fail(p, "expected an object of op name -> bytes/s, got " + typeOf(*it));
      return out;
    }
    for (auto k = it->begin(); k != it->end(); ++k) {
      if (!bundle::opKindOf(k.key())) {
        fail(join(p, k.key()), "not a bundle op name (docs/bundle.md)");
        return out;
      }
      double v = number(*it, k.key(), p, kMinRate, kMaxBandwidth, false);
      if (failed())
        return out;
      out[k.key()] = v;
    }
    return out;
  }

private:
  static std::string join(const std::string &path, const std::string &key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string typeOf(const Json &v) {
    std::string t = v.type_name();
    return t == "null" ? "null" : t + " " + shortDump(v);
  }
  const Json *field(const Json &parent, const std::string &key,
                    const std::string &path) {
    auto it = parent.find(key);
    if (it == parent.end()) {
      fail(path, "missing");
      return nullptr;
    }
    return &*it;
  }

  std::string origin, problem;
};

} // namespace

Expected<Profile> parseProfile(const std::string &text,
                               const std::string &origin) {
  if (text.size() > kMaxProfileBytes)
    return Status::error(origin + ": " + std::to_string(text.size()) +
                         " bytes, more than the limit of " +
                         std::to_string(kMaxProfileBytes) +
                         " of a hardware profile");
  Expected<Json> parsed = parseJson(text, origin);
  if (!parsed)
    return parsed.status();
  const Json &doc = *parsed;
  if (!doc.is_object())
    return Status::error(origin + ": expected a JSON object");
  Reader r(origin);
  Profile p;
  // "calibration" (written by `mtc simulate --calibrate`: the raw
  // measurements and their spreads) is documentation for the reader; the
  // simulator does not use it.
  r.checkKnown(doc, "",
               {"name", "description", "source", "device", "link", "host",
                "calibration"});
  if (doc.contains("calibration") && !doc["calibration"].is_object())
    r.fail("calibration", "expected an object");
  p.name = r.string(doc, "name", "");
  p.description = r.string(doc, "description", "", false);
  p.source = r.string(doc, "source", "");
  if (const Json *d = r.object(doc, "device", "device",
                               {"memory_bytes", "peak_flops", "gemm_efficiency",
                                "gemm_shapes", "attention_efficiency",
                                "memory_bandwidth", "memory_bandwidth_by_kind",
                                "launch_latency_s", "kernel_time_scale",
                                "kernel_overhead_s", "host_threads"})) {
    p.device.memoryBytes = static_cast<int64_t>(r.number(
        *d, "memory_bytes", "device", kMinMemoryBytes, kMaxMemoryBytes, false));
    if (d->contains("memory_bytes") && (*d)["memory_bytes"].is_number() &&
        (*d)["memory_bytes"].get<double>() !=
            std::floor((*d)["memory_bytes"].get<double>()))
      r.fail("device.memory_bytes",
             "expected a whole number, got " + shortDump((*d)["memory_bytes"]));
    if (const Json *f =
            r.object(*d, "peak_flops", "device.peak_flops", {"bf16", "fp32"})) {
      p.device.peakFlopsBF16 = r.number(*f, "bf16", "device.peak_flops",
                                        kMinRate, kMaxPeakFlops, false);
      p.device.peakFlopsFP32 = r.number(*f, "fp32", "device.peak_flops",
                                        kMinRate, kMaxPeakFlops, false);
    }
    p.device.gemmEfficiency = r.curve(*d, "gemm_efficiency", "device");
    p.device.gemmShapes = r.shapes(*d, "gemm_shapes", "device");
    p.device.attentionEfficiency =
        r.curve(*d, "attention_efficiency", "device");
    p.device.memoryBandwidth = r.number(*d, "memory_bandwidth", "device",
                                        kMinRate, kMaxBandwidth, false);
    p.device.memoryBandwidthByKind =
        r.byKind(*d, "memory_bandwidth_by_kind", "device");
    p.device.launchLatency =
        r.number(*d, "launch_latency_s", "device", 0, 1, false);
    p.device.kernelTimeScale =
        r.number(*d, "kernel_time_scale", "device", 1e-3, 100, false,
                 /*required=*/false, 1.0);
    p.device.hostThreads = static_cast<int64_t>(
        r.number(*d, "host_threads", "device", 0, 1e6, false,
                 /*required=*/false, 0.0));
    if (d->contains("host_threads") && (*d)["host_threads"].is_number() &&
        (*d)["host_threads"].get<double>() !=
            std::floor((*d)["host_threads"].get<double>()))
      r.fail("device.host_threads",
             "expected a whole number, got " + shortDump((*d)["host_threads"]));
    p.device.kernelOverhead = r.number(*d, "kernel_overhead_s", "device", 0, 1,
                                       false, /*required=*/false, 0.0);
  }
  if (const Json *l = r.object(doc, "link", "link",
                               {"h2d_bandwidth", "d2h_bandwidth",
                                "duplex_factor", "copy_latency_s"})) {
    p.link.h2dBandwidth =
        r.number(*l, "h2d_bandwidth", "link", kMinRate, kMaxBandwidth, false);
    p.link.d2hBandwidth =
        r.number(*l, "d2h_bandwidth", "link", kMinRate, kMaxBandwidth, false);
    p.link.duplexFactor = r.number(*l, "duplex_factor", "link", 0.5, 1, false);
    p.link.copyLatency = r.number(*l, "copy_latency_s", "link", 0, 1, false);
  }
  if (const Json *h = r.object(doc, "host", "host",
                               {"cores", "memory_bandwidth",
                                "adamw_bytes_per_s", "convert_bytes_per_s"})) {
    p.host.cores =
        static_cast<int64_t>(r.number(*h, "cores", "host", 1, 1e6, false));
    p.host.memoryBandwidth = r.number(*h, "memory_bandwidth", "host", kMinRate,
                                      kMaxBandwidth, false);
    p.host.adamwBytesPerS = r.number(*h, "adamw_bytes_per_s", "host", kMinRate,
                                     kMaxBandwidth, false);
    // The default (memory bandwidth over cores) may fall below kMinRate.
    p.host.convertBytesPerS = r.number(
        *h, "convert_bytes_per_s", "host", kMinRate, kMaxBandwidth, false,
        /*required=*/false,
        std::max(kMinRate,
                 p.host.memoryBandwidth / static_cast<double>(p.host.cores)));
    if (doc["host"].contains("cores") && doc["host"]["cores"].is_number() &&
        doc["host"]["cores"].get<double>() !=
            std::floor(doc["host"]["cores"].get<double>()))
      r.fail("host.cores",
             "expected a whole number, got " + shortDump(doc["host"]["cores"]));
  }
  if (r.failed())
    return r.status();
  return p;
}

std::vector<std::string> builtinProfileNames() {
  std::vector<std::string> names;
  for (const BuiltinProfile &b : builtinProfiles())
    names.push_back(b.name);
  std::sort(names.begin(), names.end());
  return names;
}

Expected<Profile> loadProfile(const std::string &nameOrFile) {
  bool file = nameOrFile.find('/') != std::string::npos ||
              (nameOrFile.size() > 5 &&
               nameOrFile.compare(nameOrFile.size() - 5, 5, ".json") == 0);
  if (!file) {
    for (const BuiltinProfile &b : builtinProfiles())
      if (nameOrFile == b.name)
        return parseProfile(b.text, "profile '" + nameOrFile + "'");
    std::string list;
    for (const std::string &n : builtinProfileNames())
      list += (list.empty() ? "" : ", ") + n;
    return Status::error("unknown hardware profile '" + nameOrFile +
                         "' (built in: " + list +
                         "; or give a FILE.json, docs/simulate.md)");
  }
  // A FIFO, a device or a directory is refused without reading it, and a
  // file past the limit is never read whole.
  Expected<std::string> text = readRegularFile(nameOrFile, kMaxProfileBytes);
  if (!text)
    return Status::error(text.message() +
                         " (a hardware profile: a JSON file "
                         "of at most " +
                         std::to_string(kMaxProfileBytes) +
                         " bytes, docs/simulate.md)");
  return parseProfile(*text, nameOrFile);
}

} // namespace mtc::sim
