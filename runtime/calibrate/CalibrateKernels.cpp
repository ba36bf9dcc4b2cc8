//===- CalibrateKernels.cpp - The kernels measured --------------*- C++ -*-===//
//
// Part of mtc. Steps 2 to 4 and 7 of the algorithm (Calibrate.cpp): GEMMs,
// attention, the memory-bound kernels, the per-op dispatch and the chain of
// a layer's ops, each timed by the Calibrator (Calibrator.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/calibrate/Calibrator.h"

#include "lib/Bundle/OpKind.h"

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

namespace mtc::driver::calib {

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
    o.name = bundle::opKindName(bundle::OpKind::Add);
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
  using bundle::OpKind;
  auto op = [&](OpKind kind, std::vector<int> in, int64_t r, int64_t c) {
    bundle::Op o;
    o.name = bundle::opKindName(kind);
    o.operands = std::move(in);
    o.results = {value(r, c)};
    o.loc = "calibrate:1:1";
    if (kind == OpKind::Transpose)
      o.attrs["perm"] = std::vector<int64_t>{1, 0};
    fn.ops.push_back(o);
    return o.results[0];
  };
  int x = value(rows, D), wq = value(D, D), w1 = value(D, F), w2 = value(F, D);
  fn.args = {x, wq, w1, w2};
  int h = op(OpKind::Matmul, {x, wq}, rows, D);
  int a = op(OpKind::Add, {h, x}, rows, D);
  int u = op(OpKind::Matmul, {a, w1}, rows, F);
  int g = op(OpKind::Mul, {u, u}, rows, F);
  int d = op(OpKind::Matmul, {g, w2}, rows, D);
  int y = op(OpKind::Add, {d, a}, rows, D);
  int w2t = op(OpKind::Transpose, {w2}, D, F);
  int dg = op(OpKind::Matmul, {y, w2t}, rows, F);
  int dw2 = op(OpKind::WeightGrad, {g, y}, F, D);
  int du = op(OpKind::Mul, {dg, u}, rows, F);
  int w1t = op(OpKind::Transpose, {w1}, F, D);
  int da = op(OpKind::Matmul, {du, w1t}, rows, D);
  int dw1 = op(OpKind::WeightGrad, {a, du}, D, F);
  int dx = op(OpKind::Add, {da, y}, rows, D);
  int dwq = op(OpKind::WeightGrad, {x, dx}, D, D);
  int back = op(OpKind::Matmul, {dx, wq}, rows, D);
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

} // namespace mtc::driver::calib
