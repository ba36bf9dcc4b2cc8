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

namespace {

using Clock = std::chrono::steady_clock;

/// The last-level cache's size (sysconf; 32 MiB where the system does not
/// say).
size_t lastLevelCacheBytes() {
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  long b = std::max(l3, l2);
  return b > 0 ? static_cast<size_t>(b) : (size_t(32) << 20);
}

double seconds(Clock::time_point a, Clock::time_point b) {
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
std::vector<float> filled(size_t n, float scale = 0.01f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>(static_cast<int>(i % 97) - 48) / 48.0f +
           scale * 0.5f;
  return v;
}

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
// GEMM
//===----------------------------------------------------------------------===//

struct GemmShape {
  int64_t rows, K, N;
};

/// The examples' layer products (K x N of a weight; larger products keep
/// the 1024-row efficiency): tiny-llama and
/// qwen2-small (dim 256: q/k/v/o and their MLPs of 688 and 1408),
/// gemma2-small (dim 320, heads of 64, MLP 1280), gpt2-small (dim 128: qkv,
/// o, MLP 512), mixtral-small's experts (256 to 512 and back), and the LM
/// heads (to the 256-entry vocabulary).
const int64_t kGemmWeights[][2] = {
    {256, 256},  {256, 128}, {256, 688}, {688, 256}, {256, 1408},
    {1408, 256}, {320, 256}, {256, 320}, {320, 128}, {320, 1280},
    {1280, 320}, {128, 384}, {128, 128}, {128, 512}, {512, 128},
    {256, 512},  {512, 256}, {128, 256}, {320, 64},
};
/// Token counts (batch · seq of a micro-batch, or an expert's share).
const int64_t kGemmRows[] = {16, 32, 64, 128, 256, 512, 1024};

std::vector<GemmShape> gemmShapes(bool quick) {
  if (quick)
    return {{64, 128, 128}, {256, 256, 688}, {1024, 256, 688}};
  std::vector<GemmShape> shapes;
  for (int64_t rows : kGemmRows)
    for (const auto &w : kGemmWeights)
      shapes.push_back({rows, w[0], w[1]});
  return shapes;
}

void Calibrator::gemms() {
  // The executor runs a matmul as x @ w (cpu::matmul; the backward's
  // input gradient is a transpose and another x @ w) and a weight_grad as
  // xᵀ @ dy (cpu::matmulGradWeight): both forms, every shape.
  // flops -> (flops summed, seconds summed) of every call at that count
  std::map<double, std::pair<double, double>> byFlops;
  // (m, n, k) -> (flops summed, seconds summed)
  std::map<std::array<int64_t, 3>, std::pair<double, double>> byShape;
  double peak = 0;
  for (const GemmShape &s : gemmShapes(opts.quick)) {
    std::vector<float> x = filled(s.rows * s.K), w = filled(s.K * s.N),
                       y = filled(s.rows * s.N), dw(s.K * s.N);
    double flops = 2.0 * s.rows * s.K * s.N;
    std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.K) +
                        "x" + std::to_string(s.N);
    Timing nn = time([&] {
      cpu::matmul(x.data(), w.data(), nullptr, y.data(), s.rows, s.K, s.N);
    });
    Timing tn = time([&] {
      cpu::matmulGradWeight(x.data(), y.data(), dw.data(), s.rows, s.K, s.N);
    });
    peak =
        std::max(peak, record("gemm " + shape + " x@w", "flop/s", flops, nn));
    peak =
        std::max(peak, record("gemm " + shape + " xT@dy", "flop/s", flops, tn));
    auto &acc = byFlops[flops];
    acc.first += 2 * flops;
    acc.second += nn.value + tn.value;
    auto &a = byShape[{s.rows, s.N, s.K}];
    a.first += flops;
    a.second += nn.value;
    auto &b = byShape[{s.K, s.N, s.rows}];
    b.first += flops;
    b.second += tn.value;
  }
  c.peakFlops = peak;
  for (const auto &[flops, acc] : byFlops)
    c.gemmEfficiency.push_back({flops, acc.first / acc.second / peak});
  for (const auto &[mnk, acc] : byShape)
    c.gemmShapes.push_back(
        {mnk[0], mnk[1], mnk[2], acc.first / acc.second / peak});
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

struct AttentionShape {
  int64_t B, S, Hq, Hkv, D;
};

/// The examples' heads (tiny-llama 8 x 32 over 4 kv heads, qwen2-small and
/// gemma2 4 x 64 over 2) at their sequence lengths.
const AttentionShape kAttentionShapes[] = {
    {1, 64, 4, 4, 32},  {4, 64, 8, 4, 32},  {4, 128, 4, 2, 64},
    {8, 128, 8, 4, 32}, {4, 256, 8, 4, 32}, {2, 512, 4, 2, 64},
};
const AttentionShape kQuickAttentionShapes[] = {{1, 64, 4, 4, 32},
                                                {4, 128, 8, 4, 32}};

void Calibrator::attention() {
  const std::vector<AttentionShape> shapes =
      opts.quick
          ? std::vector<AttentionShape>(std::begin(kQuickAttentionShapes),
                                        std::end(kQuickAttentionShapes))
          : std::vector<AttentionShape>(std::begin(kAttentionShapes),
                                        std::end(kAttentionShapes));
  std::map<double, std::pair<double, double>> byFlops;
  for (const AttentionShape &s : shapes) {
    int64_t qn = s.B * s.S * s.Hq * s.D, kn = s.B * s.S * s.Hkv * s.D;
    std::vector<float> q = filled(qn, 0.5f), k = filled(kn, 0.5f),
                       v = filled(kn, 0.5f), o(qn), lse(s.B * s.Hq * s.S),
                       dO = filled(qn), dq(qn), dk(kn), dv(kn);
    cpu::AttentionParams p;
    p.causal = true;
    std::string shape = std::to_string(s.B) + "x" + std::to_string(s.S) + "x" +
                        std::to_string(s.Hq) + "/" + std::to_string(s.Hkv) +
                        "x" + std::to_string(s.D);
    double ff = attentionFlops(s.B, s.S, s.S, s.Hq, s.D, true, false);
    double fb = attentionFlops(s.B, s.S, s.S, s.Hq, s.D, true, true);
    Timing fwd = time([&] {
      cpu::attention(q.data(), k.data(), v.data(), o.data(), lse.data(), s.B,
                     s.S, s.S, s.Hq, s.Hkv, s.D, p);
    });
    Timing bwd = time([&] {
      cpu::attentionGrad(q.data(), k.data(), v.data(), o.data(), lse.data(),
                         dO.data(), dq.data(), dk.data(), dv.data(), s.B, s.S,
                         s.Hq, s.Hkv, s.D, p);
    });
    record("attention " + shape + " forward", "flop/s", ff, fwd);
    record("attention " + shape + " backward", "flop/s", fb, bwd);
    byFlops[ff].first += ff;
    byFlops[ff].second += fwd.value;
    byFlops[fb].first += fb;
    byFlops[fb].second += bwd.value;
  }
  // The peak is the best rate of any GEMM or attention call (an attention
  // shape may beat the GEMMs on a noisy machine); the GEMM curve is
  // rescaled to it.
  double peak = c.peakFlops;
  for (const auto &[flops, acc] : byFlops)
    peak = std::max(peak, acc.first / acc.second);
  for (EfficiencyPoint &e : c.gemmEfficiency)
    e.efficiency *= c.peakFlops / peak;
  for (GemmShapeEfficiency &e : c.gemmShapes)
    e.efficiency *= c.peakFlops / peak;
  c.peakFlops = peak;
  for (const auto &[flops, acc] : byFlops)
    c.attentionEfficiency.push_back(
        {flops, acc.first / acc.second / c.peakFlops});
}

//===----------------------------------------------------------------------===//
// Memory-bound kernels
//===----------------------------------------------------------------------===//

void Calibrator::memoryBound() {
  const int64_t D = 256;
  std::vector<int64_t> sizes = opts.quick
                                   ? std::vector<int64_t>{1 << 16}
                                   : std::vector<int64_t>{1 << 18, 1 << 21};
  double bytes = 0, time = 0;
  // op kind -> (bytes summed, seconds summed)
  std::map<std::string, std::pair<double, double>> byKind;
  for (int64_t n : sizes) {
    // In a step an op reads what other ops wrote, from the last-level cache
    // more than from the core's own: each call takes the next of `sets`
    // copies of its tensors, about 32 MiB of them in all.
    const int64_t sets =
        std::clamp<int64_t>((32 << 20) / (16 * n), int64_t(1), int64_t(16));
    std::vector<std::vector<float>> xs(sets, filled(n, 0.5f)),
        dys(sets, filled(n)), ys(sets, std::vector<float>(n)),
        dxs(sets, std::vector<float>(n));
    std::vector<float> w = filled(D, 1.0f), dw(D), db(D);
    int64_t k = 0;
    auto x = [&] { return xs[k].data(); };
    auto dy = [&] { return dys[k].data(); };
    auto y = [&] { return ys[k].data(); };
    auto dx = [&] { return dxs[k].data(); };
    int64_t rows = n / D;
    std::string sz = " " + std::to_string(n * 4 / 1024) + " KiB";
    // \p kind: the bundle op the kernel runs.
    // \p pooled: a kernel of the pool (counted into memory_bandwidth, the
    // rate of the kinds without their own), or one that runs on the
    // calling thread alone (its kind's rate only).
    auto measure = [&](const std::string &name, const std::string &kind,
                       double b, const std::function<void()> &fn,
                       bool pooled = true) {
      Timing t = this->time([&] {
        fn();
        k = (k + 1) % sets;
      });
      record(name + sz, "B/s", b, t);
      if (pooled) {
        bytes += b;
        time += t.value;
      }
      byKind[kind].first += b;
      byKind[kind].second += t.value;
    };
    double f = 4.0 * n;
    measure("rmsnorm", "rmsnorm", 2 * f,
            [&] { cpu::rmsnorm(x(), w.data(), y(), rows, D, 1e-5f, 0); });
    measure("rmsnorm grad", "rmsnorm_grad", 3 * f, [&] {
      cpu::rmsnormGrad(x(), w.data(), dy(), dx(), dw.data(), rows, D, 1e-5f, 0);
    });
    measure("add", "add", 3 * f, [&] {
      cpu::binary(cpu::Binary::Add, x(), {rows, D}, dy(), {rows, D}, y(),
                  {rows, D});
    });
    measure("mul", "mul", 3 * f, [&] {
      cpu::binary(cpu::Binary::Mul, x(), {rows, D}, dy(), {rows, D}, y(),
                  {rows, D});
    });
    measure("silu", "silu", 2 * f,
            [&] { cpu::unary(cpu::Unary::Silu, x(), y(), n); });
    measure("silu grad", "unary_grad", 3 * f,
            [&] { cpu::unaryGrad(cpu::Unary::Silu, x(), dy(), dx(), n); });
    measure("softmax", "softmax", 2 * f,
            [&] { cpu::softmax(x(), y(), rows, D, 1); });
    cpu::RopeParams rp;
    measure("rope", "rope", 2 * f,
            [&] { cpu::rope(x(), y(), rows / 8, 8, 8, D / 8, rp, false); });
    // The backward's weight transposes ([K, N] -> [N, K]) and the
    // activations' ([B, S, H, D] -> [B, H, S, D]).
    measure("transpose", "transpose", 2 * f, [&] {
      cpu::transpose(x(), {rows, D}, {1, 0}, y());
    });
    measure("transpose 0213", "transpose", 2 * f, [&] {
      cpu::transpose(x(), {rows / 64, 64, 8, D / 8}, {0, 2, 1, 3}, y());
    });
    measure("layernorm", "layernorm", 2 * f, [&] {
      cpu::layernorm(x(), w.data(), w.data(), y(), rows, D, 1e-5f);
    });
    measure("layernorm grad", "layernorm_grad", 3 * f, [&] {
      cpu::layernormGrad(x(), w.data(), dy(), dx(), dw.data(), db.data(), rows,
                         D, 1e-5f);
    });
    // The executor runs two kinds on the calling thread alone, whatever the
    // kernel threads: the compiled fused kernels (Executor::fused calls the
    // bundle's kernel over all n elements) and the gradient accumulation
    // (param_grad's loop). With more than one thread, an add on one thread
    // against the pool's says how much of the mix's rate they keep.
    if (c.threads > 1) {
      cpu::setThreads(1);
      measure(
          "add on one thread", "add (one thread)", 3 * f,
          [&] {
            cpu::binary(cpu::Binary::Add, x(), {rows, D}, dy(), {rows, D}, y(),
                        {rows, D});
          },
          /*pooled=*/false);
      cpu::setThreads(c.threads);
    }
  }
  c.memoryBandwidth = bytes / time;
  for (const auto &[kind, acc] : byKind)
    if (kind != "add (one thread)")
      c.memoryBandwidthByKind[kind] = acc.first / acc.second;
  if (auto one = byKind.find("add (one thread)"); one != byKind.end()) {
    double alone = one->second.first / one->second.second;
    double pooled = c.memoryBandwidthByKind.at("add");
    double keep = std::min(1.0, alone / pooled);
    c.memoryBandwidthByKind["fused"] = keep * c.memoryBandwidth;
    c.memoryBandwidthByKind["param_grad"] = keep * c.memoryBandwidth;
  }
}

//===----------------------------------------------------------------------===//
// Per-op dispatch
//===----------------------------------------------------------------------===//

/// A model-level function of \p ops chained adds over x [1, 1, 16]: what
/// the executor does per op (decode, result allocation, dispatch through
/// the kernel table) with nothing to compute.
bundle::Bundle dispatchProbe(int ops) {
  bundle::Bundle b;
  b.model = "DispatchProbe";
  bundle::Function fn;
  bundle::ValueType x{{1, 1, 16}, DType::F32};
  fn.values.assign(static_cast<size_t>(ops) + 1, x);
  fn.args = {0};
  for (int i = 0; i < ops; ++i) {
    bundle::Op o;
    o.name = "add";
    o.operands = {i, 0};
    o.results = {i + 1};
    o.loc = "calibrate:1:1";
    fn.ops.push_back(o);
  }
  fn.results = {ops};
  b.functions["forward"] = fn;
  return b;
}

/// An executor over a probe bundle, with the parameter store it reads.
struct ProbeExecutor {
  std::unique_ptr<exec::ParamStore> store;
  std::unique_ptr<exec::Executor> executor;

  static Expected<ProbeExecutor> open(const bundle::Bundle &b) {
    Expected<std::unique_ptr<exec::ParamStore>> store =
        exec::ParamStore::create(b);
    if (!store)
      return store.status();
    Expected<std::unique_ptr<exec::Executor>> ex =
        exec::Executor::create(b, **store);
    if (!ex)
      return ex.status();
    return ProbeExecutor{std::move(*store), std::move(*ex)};
  }
};

Status Calibrator::dispatch() {
  const int ops = 256;
  bundle::Bundle b = dispatchProbe(ops);
  Expected<ProbeExecutor> ex = ProbeExecutor::open(b);
  if (!ex)
    return ex.status();
  const bundle::Function &fn = b.functions.at("forward");
  std::vector<float> x = filled(16, 0.5f);
  Status failed = Status::success();
  Timing t = time([&] {
    ex->executor->beginStep(1, 1);
    std::vector<exec::Tensor> values(fn.values.size());
    values[0] = exec::Tensor::view({1, 1, 16}, x.data());
    if (Status st = ex->executor->runOps(fn, values, 0, fn.ops.size());
        !st && failed)
      failed = st;
  });
  t.value /= ops;
  t.median /= ops;
  t.best /= ops;
  c.launchLatency = record("executor op dispatch (add of 16)", "s", 0, t);
  return failed;
}

/// A model-level function of \p rows tokens through a layer's products,
/// forward and backward, each op reading what an earlier one wrote (as in a
/// step): x [rows, D] and weights wq [D, D], w1 [D, F], w2 [F, D] in; 6
/// matmuls, 3 weight_grads, 2 transposes, 3 adds and 2 muls.
bundle::Bundle chainProbe(int64_t rows, int64_t D, int64_t F) {
  bundle::Bundle b;
  b.model = "ChainProbe";
  bundle::Function fn;
  auto value = [&](int64_t r, int64_t c) {
    fn.values.push_back({{r, c}, DType::F32});
    return static_cast<int>(fn.values.size()) - 1;
  };
  auto op = [&](const std::string &name, std::vector<int> in, int64_t r,
                int64_t c) {
    bundle::Op o;
    o.name = name;
    o.operands = std::move(in);
    o.results = {value(r, c)};
    o.loc = "calibrate:1:1";
    if (name == "transpose")
      o.attrs["perm"] = std::vector<int64_t>{1, 0};
    fn.ops.push_back(o);
    return o.results[0];
  };
  int x = value(rows, D), wq = value(D, D), w1 = value(D, F), w2 = value(F, D);
  fn.args = {x, wq, w1, w2};
  int h = op("matmul", {x, wq}, rows, D);
  int a = op("add", {h, x}, rows, D);
  int u = op("matmul", {a, w1}, rows, F);
  int g = op("mul", {u, u}, rows, F);
  int d = op("matmul", {g, w2}, rows, D);
  int y = op("add", {d, a}, rows, D);
  int w2t = op("transpose", {w2}, D, F);
  int dg = op("matmul", {y, w2t}, rows, F);
  int dw2 = op("weight_grad", {g, y}, F, D);
  int du = op("mul", {dg, u}, rows, F);
  int w1t = op("transpose", {w1}, F, D);
  int da = op("matmul", {du, w1t}, rows, D);
  int dw1 = op("weight_grad", {a, du}, D, F);
  int dx = op("add", {da, y}, rows, D);
  int dwq = op("weight_grad", {x, dx}, D, D);
  int back = op("matmul", {dx, wq}, rows, D);
  fn.results = {back, dwq, dw1, dw2};
  b.functions["forward"] = fn;
  return b;
}

Status Calibrator::chain() {
  // The profile so far prices the chain as the simulator would; what the
  // executor really takes beyond that is the step's cost of running ops
  // one after another (data moving between the threads' caches, the pool
  // forked and joined per op, OpenBLAS's blocks on cold operands).
  sim::Profile profile;
  profile.device.peakFlopsFP32 = profile.device.peakFlopsBF16 = c.peakFlops;
  for (const EfficiencyPoint &e : c.gemmEfficiency)
    profile.device.gemmEfficiency.points.push_back({e.flops, e.efficiency});
  for (const EfficiencyPoint &e : c.attentionEfficiency)
    profile.device.attentionEfficiency.points.push_back(
        {e.flops, e.efficiency});
  for (const GemmShapeEfficiency &g : c.gemmShapes)
    profile.device.gemmShapes.push_back(
        {double(g.m), double(g.n), double(g.k), g.efficiency});
  profile.device.memoryBandwidth = c.memoryBandwidth;
  profile.device.memoryBandwidthByKind = c.memoryBandwidthByKind;
  profile.device.launchLatency = c.launchLatency;
  sim::CostModel cost(profile, bundle::Precision::F32);
  const int64_t D = opts.quick ? 128 : 256, F = opts.quick ? 344 : 688;
  std::vector<int64_t> sizes =
      opts.quick ? std::vector<int64_t>{32, 128}
                 : std::vector<int64_t>{16, 32, 64, 128, 256, 1024};
  // Per size: measured and predicted seconds, and the kernels.
  std::vector<double> measured, work;
  double kernels = 0;
  Status failed = Status::success();
  for (int64_t rows : sizes) {
    bundle::Bundle b = chainProbe(rows, D, F);
    Expected<ProbeExecutor> ex = ProbeExecutor::open(b);
    if (!ex)
      return ex.status();
    const bundle::Function &fn = b.functions.at("forward");
    std::vector<float> x = filled(rows * D, 0.5f), wq(D * D), w1(D * F),
                       w2(F * D);
    // As in a step, the weights arrive by a copy on another thread (the
    // h2d stream's memcpy) before their layer runs: in the shared cache,
    // not in the kernel threads' own.
    const std::vector<float> wqHost = filled(D * D, 0.05f),
                             w1Host = filled(D * F, 0.05f),
                             w2Host = filled(F * D, 0.05f);
    auto load = [&] {
      std::thread copier([&] {
        std::memcpy(wq.data(), wqHost.data(), wq.size() * sizeof(float));
        std::memcpy(w1.data(), w1Host.data(), w1.size() * sizeof(float));
        std::memcpy(w2.data(), w2Host.data(), w2.size() * sizeof(float));
      });
      copier.join();
    };
    // Each op timed where it runs in the chain (Executor::setOpTimer); a
    // run's figure is the sum of its ops' times (the time between them is
    // the dispatch, priced apart), and the chain's is the statistic of the
    // runs, as a step's time is the statistic of whole steps: a sum of
    // per-op medians would leave out what every run pays somewhere (each
    // op's times are skewed; the slow calls fall on different ops in
    // different runs).
    std::set<const bundle::Op *> chainOps;
    for (const bundle::Op &op : fn.ops)
      chainOps.insert(&op);
    bool timing = false;
    double runTotal = 0;
    ex->executor->setOpTimer([&](const bundle::Op &op,
                                 const std::vector<int64_t> &,
                                 Clock::time_point b0, Clock::time_point b1) {
      if (timing && chainOps.count(&op))
        runTotal += seconds(b0, b1);
    });
    std::vector<double> runs;
    auto runChain = [&] {
      ex->executor->beginStep(1, 1);
      std::vector<exec::Tensor> values(fn.values.size());
      values[0] = exec::Tensor::view({rows, D}, x.data());
      values[1] = exec::Tensor::view({D, D}, wq.data());
      values[2] = exec::Tensor::view({D, F}, w1.data());
      values[3] = exec::Tensor::view({F, D}, w2.data());
      runTotal = 0;
      if (Status st = ex->executor->runOps(fn, values, 0, fn.ops.size());
          !st && failed)
        failed = st;
      if (timing)
        runs.push_back(runTotal);
    };
    load();
    runChain(); // warm-up: the executor's buffers, the pool's threads
    // Enough runs for the statistic to settle (a short chain's ops are a
    // few microseconds each, their spread on a shared machine large): about
    // 0.2 s of chain per size (0.02 s when quick), at least the repetitions
    // asked for.
    Clock::time_point w0 = Clock::now();
    load();
    runChain();
    double once = std::max(1e-6, seconds(w0, Clock::now()));
    const double budget = opts.quick ? 0.02 : 0.2;
    const int reps = std::clamp(static_cast<int>(budget / once),
                                std::max(c.repeats, 3), 400);
    timing = true;
    for (int r = 0; r < reps; ++r) {
      load();
      runChain();
    }
    Timing t = timingOf(runs);
    sim::Cost predicted = cost.function(fn, nullptr, 1, 1);
    kernels = static_cast<double>(predicted.kernels);
    double m = record("executor chain " + std::to_string(rows) + "x" +
                          std::to_string(D) + "x" + std::to_string(F),
                      "s", 0, t);
    measured.push_back(m - kernels * c.launchLatency);
    work.push_back(predicted.seconds - kernels * c.launchLatency);
    c.chainMeasured.push_back(m);
    c.chainPredicted.push_back(predicted.seconds);
  }
  if (!failed)
    return failed;
  KernelChainFit fit = fitKernelChain(work, measured, kernels);
  c.kernelTimeScale = fit.scale;
  c.kernelOverhead = fit.overhead;
  return Status::success();
}

void Calibrator::latencies() {
  // Small calls of the kernels the executor dispatches most (each goes
  // through the pool's parallelFor): the kernels' share of an op's fixed
  // cost (reported; the executor's dispatch below includes it).
  const int64_t n = 64;
  std::vector<float> x = filled(n, 0.5f), y(n), w = filled(n, 1.0f);
  record("small add (64)", "s", 0, time([&] {
           cpu::binary(cpu::Binary::Add, x.data(), {1, n}, w.data(), {1, n},
                       y.data(), {1, n});
         }));
  record("small silu (64)", "s", 0,
         time([&] { cpu::unary(cpu::Unary::Silu, x.data(), y.data(), n); }));
  record("small rmsnorm (64)", "s", 0, time([&] {
           cpu::rmsnorm(x.data(), w.data(), y.data(), 1, n, 1e-5f, 0);
         }));
  record("small gemm (8x8x8)", "s", 0, time([&] {
           cpu::matmul(x.data(), w.data(), nullptr, y.data(), 8, 8, 8);
         }));
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
  Expected<AutoDeviceMemory> mem = autoDeviceMemory("cpu");
  c.memoryBytes = mem ? mem->bytes : 0;
  c.seconds = seconds(start, Clock::now());
  return Status::success();
}

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
  Calibrator cal(opts, c);
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
