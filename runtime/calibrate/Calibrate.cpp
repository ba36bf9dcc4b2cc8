//===- Calibrate.cpp - The CPU device measured into a profile -------------===//
//
// Part of mtc.
//
// Algorithm
// 1. Every measurement times a closure: one untimed warm-up call sizes the
//    batch (enough calls to last 2 ms for the best, 10 ms for the median,
//    at least one), then `repeats` batches are timed; the figure is the
//    best (or the median) batch's per-call time, the spread (max - min) /
//    median. On a shared machine the best of many short batches is the
//    machine's own speed, repeatable to a few percent where medians move by
//    2x with the load. Inputs are filled with
//    small non-zero values once, so no kernel meets denormals or NaNs.
// 2. GEMMs: the examples' weight shapes at 64 to 2048 rows, each in the
//    matmul (x @ w) and weight-gradient (xᵀ @ dy) forms, as the executor
//    calls them. The peak is the best rate of any call; a FLOP count's
//    efficiency is its calls' FLOPs over their time, over the peak (shapes
//    of equal FLOPs are merged).
// 3. Attention: forward, then backward from the forward's lse, per shape;
//    efficiency against the GEMM peak, FLOPs by attentionFlops.
// 4. Memory-bound kernels at two sizes, each call on the next of several
//    copies of its tensors (about 32 MiB in all: the last-level cache, as in
//    a step, not the core's own): the bandwidth is their bytes over their
//    time, all together (the rate a mix of them sees).
// 5. Copies through a CpuDevice: each direction alone, both at once on two
//    streams, and a run of small copies for the per-copy latency.
// 6. Host: STREAM triad on a pool of every core; AdamW::step on the
//    optimizer's pool, each call on the next of several copies of a layer's
//    state (three times the last-level cache in all: from memory, as a
//    step's update finds it).
// 7. (After the dispatch probe.) A chain of a layer's ops (6 matmuls, 3
//    weight_grads, transposes, adds, muls; each reads what an earlier op
//    wrote) through exec::Executor at 16 to 1024 tokens (six sizes), the
//    weights copied in by another thread before each run (a step's h2d memcpy),
//    each op timed in place (Executor::setOpTimer), a run's time the sum of
//    its ops', about 0.2 s of runs per size kept by the same statistic
//    (whole runs, as a step is timed whole), against the price lib/Sim's
//    CostModel gives it from the figures above: measured - dispatch = scale x
//    work + kernels x overhead, least squares over the sizes (overhead >= 0,
//    the scale in [0.5, 4]): kernel_time_scale and kernel_overhead_s.
// With more than one kernel thread, step 4 also times an add on one
// thread: fused kernels and param_grad run on the calling thread alone.
//
//===----------------------------------------------------------------------===//
#include "runtime/calibrate/Calibrate.h"
#include "runtime/calibrate/Calibrator.h"

#include "runtime/cpu/Kernels.h"
#include "runtime/device/CpuDevice.h"
#include "runtime/driver/DeviceSelect.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/train/Optimizer.h"

#include "lib/Sim/Cost.h"
#include "lib/Sim/Profile.h"
#include "lib/Support/ThreadPool.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace mtc::driver {

namespace calib {

Timing Calibrator::time(const std::function<void()> &fn) {
  Clock::time_point t0 = Clock::now();
  fn(); // warm-up: caches, pages, the pool's threads
  double once = std::max(1e-9, seconds(t0, Clock::now()));
  int64_t calls =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(minSeconds / once)));
  std::vector<double> per;
  for (int r = 0; r < c.repeats; ++r) {
    Clock::time_point a = Clock::now();
    for (int64_t i = 0; i < calls; ++i)
      fn();
    per.push_back(seconds(a, Clock::now()) / static_cast<double>(calls));
  }
  return timingOf(std::move(per));
}

Timing Calibrator::timingOf(std::vector<double> samples) const {
  std::sort(samples.begin(), samples.end());
  size_t n = samples.size();
  Timing t;
  if (n == 0)
    return t;
  t.median =
      n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  t.best = samples.front();
  t.value =
      opts.statistic == CalibrateOptions::Statistic::Best ? t.best : t.median;
  t.spread = t.median > 0 ? (samples.back() - samples.front()) / t.median : 0;
  return t;
}

double Calibrator::record(const std::string &name, const std::string &unit,
                          double work, const Timing &t) {
  Measurement m;
  m.name = name;
  m.unit = unit;
  m.work = work;
  m.value = work > 0 ? work / t.value : t.value;
  m.median = work > 0 ? work / t.median : t.median;
  m.best = work > 0 ? work / t.best : t.best;
  m.spread = t.spread;
  c.measurements.push_back(m);
  if (opts.log) {
    std::ostringstream line;
    line << "  " << std::left << std::setw(40) << name << std::right
         << std::setw(12) << std::setprecision(4) << m.value << " " << unit
         << "  (spread " << std::fixed << std::setprecision(1) << 100 * m.spread
         << "%)\n";
    *opts.log << line.str() << std::flush;
  }
  return m.value;
}

//===----------------------------------------------------------------------===//
// Copies
//===----------------------------------------------------------------------===//

Status Calibrator::copies() {
  // A layer's weights at the examples' sizes (a few MiB in tensors of
  // 64 KiB to 1 MiB), not a bulk copy: what a weight load does.
  const int64_t chunk = 512 << 10;
  const int64_t chunks = opts.quick ? 4 : 8;
  const int64_t total = chunk * chunks;
  Expected<std::unique_ptr<device::CpuDevice>> created =
      device::CpuDevice::create(2 * total);
  if (!created)
    return created.status();
  device::CpuDevice &dev = **created;
  Expected<device::Stream> h2d = dev.createStream("h2d");
  Expected<device::Stream> d2h = dev.createStream("d2h");
  if (!h2d)
    return h2d.status();
  if (!d2h)
    return d2h.status();
  std::vector<char> src(total, 1), dst(total, 0);
  Expected<void *> arena = dev.at(0, 2 * total);
  if (!arena)
    return arena.status();
  std::memset(*arena, 2, 2 * total); // commit the arena's pages
  Status failed = Status::success();
  auto check = [&](Status st) {
    if (!st && failed)
      failed = st;
  };
  auto toDevice = [&] {
    for (int64_t i = 0; i < chunks; ++i)
      check(dev.copyToDevice(*h2d, i * chunk, src.data() + i * chunk, chunk));
  };
  auto toHost = [&] {
    for (int64_t i = 0; i < chunks; ++i)
      check(dev.copyToHost(*d2h, dst.data() + i * chunk, total + i * chunk,
                           chunk));
  };
  Timing th = time([&] {
    toDevice();
    check(dev.synchronize());
  });
  Timing td = time([&] {
    toHost();
    check(dev.synchronize());
  });
  Timing both = time([&] {
    toDevice();
    toHost();
    check(dev.synchronize());
  });
  c.h2dBandwidth = record("copy h2d 512 KiB chunks", "B/s", double(total), th);
  c.d2hBandwidth = record("copy d2h 512 KiB chunks", "B/s", double(total), td);
  double duplex = record("copy both at once", "B/s", 2.0 * total, both);
  // Each direction's rate while both run, over its rate alone.
  double share = 0.5 * duplex;
  c.duplexFactor = std::clamp(
      0.5 * (share / c.h2dBandwidth + share / c.d2hBandwidth), 0.5, 1.0);
  const int64_t small = 64, count = opts.quick ? 200 : 2000;
  Timing tl = time([&] {
    for (int64_t i = 0; i < count; ++i)
      check(dev.copyToDevice(*h2d, i % 64 * small, src.data(), small));
    check(dev.synchronize());
  });
  tl.value /= static_cast<double>(count);
  tl.median /= static_cast<double>(count);
  tl.best /= static_cast<double>(count);
  c.copyLatency = record("copy latency (64 B)", "s", 0, tl);
  Timing tlaunch = time([&] {
    for (int64_t i = 0; i < count; ++i)
      check(dev.launch(*h2d, [] {}));
    check(dev.synchronize());
  });
  tlaunch.value /= static_cast<double>(count);
  tlaunch.median /= static_cast<double>(count);
  tlaunch.best /= static_cast<double>(count);
  record("device launch (empty closure)", "s", 0, tlaunch);
  if (!failed)
    return failed;
  return dev.synchronize();
}

//===----------------------------------------------------------------------===//
// Host
//===----------------------------------------------------------------------===//

void Calibrator::host() {
  c.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  {
    ThreadPool pool(static_cast<unsigned>(c.cores));
    const size_t n = opts.quick ? (1u << 20) : (1u << 23);
    std::vector<float> a(n), b = filled(n), cc = filled(n);
    const size_t tasks = static_cast<size_t>(c.cores);
    Timing t = time([&] {
      pool.parallelFor(tasks, [&](size_t k) {
        size_t lo = n * k / tasks, hi = n * (k + 1) / tasks;
        for (size_t i = lo; i < hi; ++i)
          a[i] = b[i] + 3.0f * cc[i];
      });
    });
    c.hostMemoryBandwidth = record("host triad", "B/s", 12.0 * n, t);
  }
  // The optimizer's pool as `mtc train` sizes it under a step plan: the
  // cores the kernels leave free, at least one.
  int kernels = std::max(1, cpu::threads());
  c.optimizerThreads = c.cores > kernels ? c.cores - kernels : 1;
  std::unique_ptr<ThreadPool> pool;
  if (c.optimizerThreads > 1)
    pool =
        std::make_unique<ThreadPool>(static_cast<unsigned>(c.optimizerThreads));
  train::AdamW adamw(train::AdamWConfig{}, pool.get());
  // One layer's parameters at the examples' sizes (1M: 16 MiB of state),
  // as the deferred update runs them, one group at a time. In a step a
  // group's parameters and moments were last touched a whole step earlier
  // (only its gradient has just arrived): each call takes the next of
  // `sets` copies of the state, three times the last-level cache in all,
  // so that the state comes from memory as in a step, not from the cache.
  const size_t n = opts.quick ? (1u << 18) : (1u << 20);
  const size_t stateBytes = 16 * n;
  const size_t sets =
      opts.quick
          ? 1
          : std::clamp<size_t>((3 * lastLevelCacheBytes() + stateBytes - 1) /
                                   stateBytes,
                               1, 32);
  std::vector<std::vector<float>> ps(sets, filled(n)),
      ms(sets, std::vector<float>(n, 0.0f)),
      vs(sets, std::vector<float>(n, 0.0f)), gs(sets, filled(n));
  size_t k = 0;
  int64_t step = 0;
  Timing t = time([&] {
    train::AdamWTensor tensor;
    tensor.param = ps[k].data();
    tensor.m = ms[k].data();
    tensor.v = vs[k].data();
    tensor.grad = gs[k].data();
    tensor.n = n;
    adamw.step(tensor, ++step, 1e-4f, 1.0f);
    k = (k + 1) % sets;
  });
  c.adamwBytesPerSecond = record("adamw (28 B/param)", "B/s", 28.0 * n, t);
}

Status Calibrator::run() {
  Clock::time_point start = Clock::now();
  if (opts.threads > 0)
    cpu::setThreads(opts.threads);
  c.threads = cpu::threads();
  c.quick = opts.quick;
  bool best = opts.statistic == CalibrateOptions::Statistic::Best;
  c.repeats = opts.repeats > 0 ? opts.repeats
                               : (opts.quick ? 2
                                  : best     ? 21
                                             : 7);
  c.statistic =
      opts.statistic == CalibrateOptions::Statistic::Best ? "best" : "median";
  gemms();
  attention();
  memoryBound();
  latencies();
  if (Status st = dispatch(); !st)
    return st.withPrefix("calibrating the executor's dispatch");
  if (Status st = chain(); !st)
    return st.withPrefix("calibrating a chain of ops");
  if (Status st = copies(); !st)
    return st.withPrefix("calibrating copies");
  host();
  Expected<AutoDeviceMemory> mem = autoDeviceMemory(DeviceKind::Cpu);
  c.memoryBytes = mem ? mem->bytes : 0;
  c.seconds = seconds(start, Clock::now());
  return Status::success();
}

} // namespace calib

namespace {

std::string utcDate() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

/// The CPU's model name from /proc/cpuinfo ("" when unknown).
std::string cpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string m = line.substr(colon + 1);
        size_t b = m.find_first_not_of(" \t");
        return b == std::string::npos ? "" : m.substr(b);
      }
    }
  return "";
}

nlohmann::json curve(const std::vector<EfficiencyPoint> &points) {
  nlohmann::json a = nlohmann::json::array();
  for (const EfficiencyPoint &p : points)
    a.push_back({{"flops", p.flops}, {"efficiency", p.efficiency}});
  return a;
}

} // namespace

KernelChainFit fitKernelChain(const std::vector<double> &work,
                              const std::vector<double> &measured,
                              double kernels) {
  // measured = scale * work + kernels * overhead over the sizes (least
  // squares); an overhead below zero (noise) is dropped and the scale
  // refitted alone, through the origin.
  KernelChainFit fit;
  size_t n = std::min(work.size(), measured.size());
  if (n == 0 || !(kernels > 0))
    return fit;
  double sw = 0, sm = 0, sww = 0, swm = 0;
  for (size_t i = 0; i < n; ++i) {
    sw += work[i];
    sm += measured[i];
    sww += work[i] * work[i];
    swm += work[i] * measured[i];
  }
  double N = static_cast<double>(n);
  double scale = (N * swm - sw * sm) / (N * sww - sw * sw);
  double overhead = (sm - scale * sw) / N / kernels;
  if (n < 2 || !std::isfinite(scale) || !(scale > 0) || !(overhead >= 0)) {
    scale = sww > 0 ? swm / sww : 1.0;
    overhead = 0;
  }
  fit.scale = std::isfinite(scale) ? std::clamp(scale, 0.5, 4.0) : 1.0;
  fit.overhead = std::clamp(overhead, 0.0, 1e-3);
  return fit;
}

double attentionFlops(int64_t B, int64_t S, int64_t Sk, int64_t Hq, int64_t D,
                      bool causal, bool backward) {
  double f = 4.0 * double(B) * double(Hq) * double(S) * double(Sk) * double(D);
  if (causal && S == Sk)
    f *= 0.5;
  return backward ? 2.5 * f : f;
}

Expected<Calibration> calibrate(const CalibrateOptions &opts) {
  Calibration c;
  calib::Calibrator cal(opts, c);
  if (Status st = cal.run(); !st)
    return st;
  return c;
}

std::string calibrationSource(const Calibration &c) {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0)
    std::strcpy(host, "unknown host");
  std::string cpu = cpuModel();
  return "measured by mtc simulate --calibrate" +
         std::string(c.quick ? " --quick" : "") + " on " + utcDate() +
         " UTC on " + host + (cpu.empty() ? "" : ": " + cpu) + ", " +
         std::to_string(c.cores) + " cores, " + std::to_string(c.threads) +
         " kernel threads, " + std::to_string(c.optimizerThreads) +
         " optimizer threads";
}

std::string calibrationProfileJson(const Calibration &c,
                                   const std::string &source) {
  nlohmann::json j;
  j["name"] = "cpu-device";
  j["description"] =
      "The CPU device of this machine (mtc train --device cpu): the "
      "runtime's CPU kernels on " +
      std::to_string(c.threads) +
      " threads, copies as memcpy on the stream threads, AdamW on " +
      std::to_string(c.optimizerThreads) + " optimizer thread(s)";
  j["source"] = source;
  nlohmann::json shapes = nlohmann::json::array();
  for (const GemmShapeEfficiency &g : c.gemmShapes)
    shapes.push_back(
        {{"m", g.m}, {"n", g.n}, {"k", g.k}, {"efficiency", g.efficiency}});
  j["device"] = {{"memory_bytes", c.memoryBytes},
                 {"peak_flops", {{"bf16", c.peakFlops}, {"fp32", c.peakFlops}}},
                 {"gemm_efficiency", curve(c.gemmEfficiency)},
                 {"gemm_shapes", shapes},
                 {"attention_efficiency", curve(c.attentionEfficiency)},
                 {"memory_bandwidth", c.memoryBandwidth},
                 {"memory_bandwidth_by_kind", c.memoryBandwidthByKind},
                 {"launch_latency_s", c.launchLatency},
                 {"kernel_time_scale", c.kernelTimeScale},
                 {"kernel_overhead_s", c.kernelOverhead},
                 {"host_threads", c.threads}};
  j["link"] = {{"h2d_bandwidth", c.h2dBandwidth},
               {"d2h_bandwidth", c.d2hBandwidth},
               {"duplex_factor", c.duplexFactor},
               {"copy_latency_s", c.copyLatency}};
  j["host"] = {{"cores", c.cores},
               {"memory_bandwidth", c.hostMemoryBandwidth},
               {"adamw_bytes_per_s", c.adamwBytesPerSecond}};
  nlohmann::json ms = nlohmann::json::array();
  for (const Measurement &m : c.measurements)
    ms.push_back({{"name", m.name},
                  {"unit", m.unit},
                  {"value", m.value},
                  {"median", m.median},
                  {"best", m.best},
                  {"spread", m.spread},
                  {"work", m.work}});
  j["calibration"] = {{"quick", c.quick},
                      {"statistic", c.statistic},
                      {"repeats", c.repeats},
                      {"seconds", c.seconds},
                      {"threads", c.threads},
                      {"optimizer_threads", c.optimizerThreads},
                      {"chain_measured_s", c.chainMeasured},
                      {"chain_predicted_s", c.chainPredicted},
                      {"measurements", ms}};
  return j.dump(2) + "\n";
}

void printCalibration(std::ostream &os, const Calibration &c) {
  double worst = 0;
  std::string worstName;
  for (const Measurement &m : c.measurements)
    if (m.spread > worst) {
      worst = m.spread;
      worstName = m.name;
    }
  std::ostringstream s;
  s << std::setprecision(4);
  s << "peak_flops_fp32: " << c.peakFlops << "\n"
    << "memory_bandwidth: " << c.memoryBandwidth << "\n"
    << "launch_latency_s: " << c.launchLatency << "\n"
    << "kernel_time_scale: " << c.kernelTimeScale << "\n"
    << "kernel_overhead_s: " << c.kernelOverhead << "\n"
    << "h2d_bandwidth: " << c.h2dBandwidth << "\n"
    << "d2h_bandwidth: " << c.d2hBandwidth << "\n"
    << "duplex_factor: " << c.duplexFactor << "\n"
    << "copy_latency_s: " << c.copyLatency << "\n"
    << "host_memory_bandwidth: " << c.hostMemoryBandwidth << "\n"
    << "adamw_bytes_per_s: " << c.adamwBytesPerSecond << "\n"
    << "measurements: " << c.measurements.size() << " x " << c.repeats
    << " repetitions (" << c.statistic << " kept) in " << std::fixed
    << std::setprecision(1) << c.seconds << " s; largest spread " << 100 * worst
    << "% (" << worstName << ")\n";
  os << s.str();
}

} // namespace mtc::driver
