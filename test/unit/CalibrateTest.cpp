//===- CalibrateTest.cpp - mtc simulate --calibrate's measurements --------===//
//
// Part of mtc. A quick calibration of this machine's CPU device: every figure
// a profile needs is measured (positive, finite), the efficiency curves are
// well formed, every memory-bound kind and GEMM shape has its own figure,
// and the JSON carries them under the schema's names with the
// measurements' spreads.
//
//===----------------------------------------------------------------------===//
#include "runtime/calibrate/Calibrate.h"

#include "lib/Sim/Profile.h"
#include "runtime/cpu/Kernels.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

using namespace mtc::driver;

namespace {

/// One quick calibration shared by the tests (about a second).
const Calibration &quick() {
  static const Calibration c = [] {
    CalibrateOptions opts;
    opts.quick = true;
    opts.threads = 1;
    mtc::Expected<Calibration> r = calibrate(opts);
    EXPECT_TRUE(r.ok()) << r.message();
    mtc::cpu::setThreads(0);
    return r.ok() ? *r : Calibration{};
  }();
  return c;
}

bool positive(double x) { return std::isfinite(x) && x > 0; }

void expectCurve(const std::vector<EfficiencyPoint> &curve, size_t minPoints) {
  ASSERT_GE(curve.size(), minPoints);
  for (size_t i = 0; i < curve.size(); ++i) {
    EXPECT_TRUE(positive(curve[i].flops));
    EXPECT_GT(curve[i].efficiency, 0);
    EXPECT_LE(curve[i].efficiency, 1.0);
    if (i > 0) {
      EXPECT_GT(curve[i].flops, curve[i - 1].flops);
    }
  }
}

} // namespace

TEST(Calibrate, AttentionFlopsCountTheTwoProducts) {
  // q [2, 8, 4, 16], 8 keys: 4 B Hq S Sk D = 4 * 2 * 4 * 8 * 8 * 16.
  EXPECT_DOUBLE_EQ(attentionFlops(2, 8, 8, 4, 16, false, false), 32768.0);
  EXPECT_DOUBLE_EQ(attentionFlops(2, 8, 8, 4, 16, true, false), 16384.0);
  EXPECT_DOUBLE_EQ(attentionFlops(2, 8, 8, 4, 16, true, true), 40960.0);
  // A query block against a longer cache is not halved.
  EXPECT_DOUBLE_EQ(attentionFlops(1, 4, 16, 1, 8, true, false), 2048.0);
}

TEST(Calibrate, KernelChainFit) {
  // Exact data: 1.2 x work + 10 kernels x 3 us.
  std::vector<double> work = {1e-3, 4e-3, 16e-3}, measured;
  for (double w : work)
    measured.push_back(1.2 * w + 10 * 3e-6);
  KernelChainFit f = fitKernelChain(work, measured, 10);
  EXPECT_NEAR(f.scale, 1.2, 1e-9);
  EXPECT_NEAR(f.overhead, 3e-6, 1e-12);
  // A negative intercept (the small chain faster than the line) drops the
  // overhead and fits the scale through the origin.
  f = fitKernelChain({1e-3, 2e-3}, {0.5e-3, 2e-3}, 10);
  EXPECT_EQ(f.overhead, 0);
  EXPECT_NEAR(f.scale, (0.5e-6 + 4e-6) / (1e-6 + 4e-6), 1e-9);
  // One size: the scale alone.
  f = fitKernelChain({2e-3}, {3e-3}, 5);
  EXPECT_NEAR(f.scale, 1.5, 1e-12);
  EXPECT_EQ(f.overhead, 0);
  // Clamped: a chain 10x its price is 4x; nothing to fit is {1, 0}.
  f = fitKernelChain({1e-3, 2e-3}, {10e-3, 20e-3}, 10);
  EXPECT_EQ(f.scale, 4.0);
  f = fitKernelChain({}, {}, 10);
  EXPECT_EQ(f.scale, 1.0);
  EXPECT_EQ(f.overhead, 0.0);
}

TEST(Calibrate, QuickMeasuresEveryFigure) {
  const Calibration &c = quick();
  EXPECT_TRUE(c.quick);
  EXPECT_EQ(c.repeats, 2);
  EXPECT_EQ(c.threads, 1);
  EXPECT_GE(c.optimizerThreads, 1);
  EXPECT_GE(c.cores, 1);
  EXPECT_TRUE(positive(c.peakFlops));
  expectCurve(c.gemmEfficiency, 3);
  expectCurve(c.attentionEfficiency, 2);
  // The best GEMM defines the peak: some point of the curve reaches it
  // within the merging of the three forms of a shape.
  double best = 0;
  for (const EfficiencyPoint &p : c.gemmEfficiency)
    best = std::max(best, p.efficiency);
  EXPECT_GT(best, 0.3);
  EXPECT_TRUE(positive(c.memoryBandwidth));
  // Every memory-bound kind measured, each at its own rate.
  std::set<std::string> kinds;
  for (const auto &[kind, bw] : c.memoryBandwidthByKind) {
    kinds.insert(kind);
    EXPECT_TRUE(positive(bw)) << kind;
  }
  // (On one kernel thread the kinds that run on one thread anyway, fused
  // and param_grad, take the mix's rate: they have none of their own.)
  EXPECT_EQ(kinds,
            (std::set<std::string>{"add", "layernorm", "layernorm_grad", "mul",
                                   "rmsnorm", "rmsnorm_grad", "rope", "silu",
                                   "softmax", "transpose", "unary_grad"}));
  // Both forms of every GEMM shape: x @ w (rows x N x K) and xᵀ @ dy
  // (K x N x rows); 256 rows x [256, 688] gives the same shape twice.
  EXPECT_EQ(c.gemmShapes.size(), 5u);
  for (const GemmShapeEfficiency &g : c.gemmShapes) {
    EXPECT_GT(g.efficiency, 0);
    EXPECT_LE(g.efficiency, 1.0);
  }
  auto has = [&](int64_t m, int64_t n, int64_t k) {
    for (const GemmShapeEfficiency &g : c.gemmShapes)
      if (g.m == m && g.n == n && g.k == k)
        return true;
    return false;
  };
  EXPECT_TRUE(has(1024, 688, 256)); // 1024 rows x [256, 688]
  EXPECT_TRUE(has(256, 688, 1024)); // its weight gradient
  EXPECT_TRUE(positive(c.launchLatency));
  EXPECT_LT(c.launchLatency, 0.01);
  // The chain of ops at two sizes (quick), priced before the fit; the fit
  // within its bounds, and the larger chain the longer.
  ASSERT_EQ(c.chainMeasured.size(), 2u);
  ASSERT_EQ(c.chainPredicted.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(positive(c.chainMeasured[i]));
    EXPECT_TRUE(positive(c.chainPredicted[i]));
  }
  EXPECT_GT(c.chainPredicted[1], c.chainPredicted[0]);
  EXPECT_GE(c.kernelTimeScale, 0.5);
  EXPECT_LE(c.kernelTimeScale, 4.0);
  EXPECT_GE(c.kernelOverhead, 0.0);
  EXPECT_LE(c.kernelOverhead, 1e-3);
  EXPECT_TRUE(positive(c.h2dBandwidth));
  EXPECT_TRUE(positive(c.d2hBandwidth));
  EXPECT_GE(c.duplexFactor, 0.5);
  EXPECT_LE(c.duplexFactor, 1.0);
  EXPECT_TRUE(positive(c.copyLatency));
  EXPECT_TRUE(positive(c.hostMemoryBandwidth));
  EXPECT_TRUE(positive(c.adamwBytesPerSecond));
  EXPECT_GT(c.memoryBytes, 0);
  EXPECT_TRUE(positive(c.seconds));
  EXPECT_EQ(c.statistic, "best");
  for (const Measurement &m : c.measurements) {
    EXPECT_TRUE(positive(m.value)) << m.name;
    EXPECT_EQ(m.value, m.best) << m.name;
    // The best repetition is the fastest: the highest rate, or the
    // shortest latency.
    if (m.unit == "s")
      EXPECT_LE(m.best, m.median) << m.name;
    else
      EXPECT_GE(m.best, m.median) << m.name;
    EXPECT_GE(m.spread, 0) << m.name;
    EXPECT_FALSE(m.unit.empty()) << m.name;
  }
}

TEST(Calibrate, TwoKernelThreadsAndTheKindsOnOneThread) {
  // On two kernel threads the kinds the executor runs on the calling thread
  // (fused, param_grad) get a rate of their own from an add on one thread;
  // the kernels' thread count is back to the calibration's afterwards, and
  // the profile says how many threads its kernels used.
  CalibrateOptions opts;
  opts.quick = true;
  opts.threads = 2;
  mtc::Expected<Calibration> r = calibrate(opts);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(mtc::cpu::threads(), 2);
  mtc::cpu::setThreads(0);
  EXPECT_EQ(r->threads, 2);
  // fused and param_grad: the mix's rate times what an add keeps on one
  // thread against the pool (at most all of it).
  ASSERT_TRUE(r->memoryBandwidthByKind.count("fused"));
  ASSERT_TRUE(r->memoryBandwidthByKind.count("param_grad"));
  double fused = r->memoryBandwidthByKind.at("fused");
  EXPECT_GT(fused, 0);
  EXPECT_LE(fused, r->memoryBandwidth);
  EXPECT_EQ(r->memoryBandwidthByKind.at("param_grad"), fused);
  EXPECT_FALSE(r->memoryBandwidthByKind.count("add (one thread)"));
  bool measured = false;
  for (const Measurement &m : r->measurements)
    measured |= m.name.rfind("add on one thread", 0) == 0;
  EXPECT_TRUE(measured);
  mtc::Expected<mtc::sim::Profile> p = mtc::sim::parseProfile(
      calibrationProfileJson(*r, calibrationSource(*r)), "calibration");
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->device.hostThreads, 2);
}

TEST(Calibrate, ProfileJsonHasTheSchemaFields) {
  const Calibration &c = quick();
  std::string source = calibrationSource(c);
  EXPECT_NE(source.find("mtc simulate --calibrate --quick on "),
            std::string::npos)
      << source;
  nlohmann::json j = nlohmann::json::parse(calibrationProfileJson(c, source));
  EXPECT_EQ(j["name"], "cpu-device");
  EXPECT_EQ(j["source"], source);
  const nlohmann::json &d = j["device"];
  EXPECT_EQ(d["memory_bytes"].get<int64_t>(), c.memoryBytes);
  EXPECT_EQ(d["peak_flops"]["fp32"].get<double>(), c.peakFlops);
  EXPECT_EQ(d["peak_flops"]["bf16"].get<double>(), c.peakFlops);
  ASSERT_EQ(d["gemm_efficiency"].size(), c.gemmEfficiency.size());
  EXPECT_EQ(d["gemm_efficiency"][0]["flops"].get<double>(),
            c.gemmEfficiency[0].flops);
  EXPECT_EQ(d["gemm_efficiency"][0]["efficiency"].get<double>(),
            c.gemmEfficiency[0].efficiency);
  EXPECT_EQ(d["attention_efficiency"].size(), c.attentionEfficiency.size());
  EXPECT_EQ(d["memory_bandwidth"].get<double>(), c.memoryBandwidth);
  EXPECT_EQ(d["memory_bandwidth_by_kind"]["transpose"].get<double>(),
            c.memoryBandwidthByKind.at("transpose"));
  ASSERT_EQ(d["gemm_shapes"].size(), c.gemmShapes.size());
  EXPECT_EQ(d["gemm_shapes"][0]["m"].get<int64_t>(), c.gemmShapes[0].m);
  EXPECT_EQ(d["gemm_shapes"][0]["efficiency"].get<double>(),
            c.gemmShapes[0].efficiency);
  EXPECT_EQ(d["launch_latency_s"].get<double>(), c.launchLatency);
  EXPECT_EQ(d["kernel_time_scale"].get<double>(), c.kernelTimeScale);
  EXPECT_EQ(d["kernel_overhead_s"].get<double>(), c.kernelOverhead);
  EXPECT_EQ(d["host_threads"].get<int>(), c.threads);
  const nlohmann::json &l = j["link"];
  EXPECT_EQ(l["h2d_bandwidth"].get<double>(), c.h2dBandwidth);
  EXPECT_EQ(l["d2h_bandwidth"].get<double>(), c.d2hBandwidth);
  EXPECT_EQ(l["duplex_factor"].get<double>(), c.duplexFactor);
  EXPECT_EQ(l["copy_latency_s"].get<double>(), c.copyLatency);
  const nlohmann::json &h = j["host"];
  EXPECT_EQ(h["cores"].get<int>(), c.cores);
  EXPECT_EQ(h["memory_bandwidth"].get<double>(), c.hostMemoryBandwidth);
  EXPECT_EQ(h["adamw_bytes_per_s"].get<double>(), c.adamwBytesPerSecond);
  const nlohmann::json &cal = j["calibration"];
  EXPECT_EQ(cal["repeats"].get<int>(), 2);
  EXPECT_EQ(cal["statistic"], "best");
  ASSERT_EQ(cal["measurements"].size(), c.measurements.size());
  std::set<std::string> names;
  for (const nlohmann::json &m : cal["measurements"]) {
    names.insert(m["name"].get<std::string>());
    EXPECT_TRUE(m.contains("spread"));
    EXPECT_TRUE(m.contains("median"));
    EXPECT_TRUE(m.contains("best"));
  }
  EXPECT_EQ(names.size(), c.measurements.size()) << "names are unique";
}

TEST(Calibrate, TheSimulatorReadsTheProfile) {
  // The profile the simulator loads (lib/Sim/Profile.h) carries the
  // calibration's figures unchanged.
  const Calibration &c = quick();
  mtc::Expected<mtc::sim::Profile> p = mtc::sim::parseProfile(
      calibrationProfileJson(c, calibrationSource(c)), "calibration");
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->name, "cpu-device");
  EXPECT_EQ(p->device.peakFlopsFP32, c.peakFlops);
  EXPECT_EQ(p->device.memoryBandwidth, c.memoryBandwidth);
  EXPECT_EQ(p->device.launchLatency, c.launchLatency);
  EXPECT_EQ(p->device.kernelTimeScale, c.kernelTimeScale);
  EXPECT_EQ(p->device.kernelOverhead, c.kernelOverhead);
  EXPECT_EQ(p->device.hostThreads, c.threads);
  EXPECT_EQ(p->link.h2dBandwidth, c.h2dBandwidth);
  EXPECT_EQ(p->link.duplexFactor, c.duplexFactor);
  EXPECT_EQ(p->host.adamwBytesPerS, c.adamwBytesPerSecond);
  EXPECT_EQ(p->host.cores, c.cores);
  ASSERT_EQ(p->device.gemmEfficiency.points.size(), c.gemmEfficiency.size());
  // The curve answers the measured points exactly.
  for (const EfficiencyPoint &e : c.gemmEfficiency)
    EXPECT_DOUBLE_EQ(p->device.gemmEfficiency.at(e.flops), e.efficiency);
  // The per-kind rates and the measured shapes too: a measured shape gets
  // its own efficiency.
  EXPECT_EQ(p->device.memoryBandwidthByKind, c.memoryBandwidthByKind);
  ASSERT_EQ(p->device.gemmShapes.size(), c.gemmShapes.size());
  for (const GemmShapeEfficiency &g : c.gemmShapes)
    EXPECT_NEAR(
        p->device.gemmEfficiencyAt(double(g.m), double(g.n), double(g.k)),
        std::min(1.0, g.efficiency), 1e-12)
        << g.m << "x" << g.n << "x" << g.k;
}
