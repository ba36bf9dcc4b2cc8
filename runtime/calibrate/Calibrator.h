//===- Calibrator.h - The measurements of `mtc calibrate` -------*- C++ -*-===//
//
// Part of mtc. Private to runtime/calibrate: the Calibrator whose members
// time each kind of work (Calibrate.cpp opens with the algorithm). The
// kernels' measurements (GEMMs, attention, memory-bound kernels, dispatch,
// the chain of a layer's ops) are CalibrateKernels.cpp's; the copies, the
// host and the profile are Calibrate.cpp's.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CALIBRATE_CALIBRATOR_H
#define MTC_RUNTIME_CALIBRATE_CALIBRATOR_H

#include "runtime/calibrate/Calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

namespace mtc::driver::calib {

using Clock = std::chrono::steady_clock;

/// The last-level cache's size (sysconf; 32 MiB where the system does not
/// say).
inline size_t lastLevelCacheBytes() {
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  long b = std::max(l3, l2);
  return b > 0 ? static_cast<size_t>(b) : (size_t(32) << 20);
}

inline double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// A timed closure's per-call time: the statistic the profile uses
/// (\c value: the best or the median repetition), both, and the spread.
struct Timing {
  double value = 0;
  double median = 0, best = 0;
  double spread = 0;
};

class Calibrator {
public:
  Calibrator(const CalibrateOptions &opts, Calibration &c)
      : opts(opts), c(c),
        // The best of many short batches finds the windows in which nothing
        // else ran (on a shared machine they are short); a median wants
        // batches long enough to average the interference.
        minSeconds(opts.quick ||
                           opts.statistic == CalibrateOptions::Statistic::Best
                       ? 0.002
                       : 0.01) {}

  Status run();

private:
  Timing time(const std::function<void()> &fn);
  /// The statistic of \p samples (seconds), their best and median, and
  /// their spread.
  Timing timingOf(std::vector<double> samples) const;
  /// Records a measurement of \p work units per call (rate = work / time),
  /// or a latency when \p work is 0; returns the rate (or the seconds).
  double record(const std::string &name, const std::string &unit, double work,
                const Timing &t);

  void gemms();
  void attention();
  void memoryBound();
  void latencies();
  Status dispatch();
  Status chain();
  Status copies();
  void host();

  const CalibrateOptions &opts;
  Calibration &c;
  double minSeconds;
};

/// n floats of small non-zero values (deterministic).
inline std::vector<float> filled(size_t n, float scale = 0.01f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>(static_cast<int>(i % 97) - 48) / 48.0f +
           scale * 0.5f;
  return v;
}

} // namespace mtc::driver::calib

#endif // MTC_RUNTIME_CALIBRATE_CALIBRATOR_H
