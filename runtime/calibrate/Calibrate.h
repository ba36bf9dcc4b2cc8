//===- Calibrate.h - The CPU device measured into a profile ---*- C++ -*-===//
//
// Part of mtc. `mtc simulate --calibrate` measures what the CPU device of
// this machine does with the runtime's own code, and writes the figures as a
// hardware profile (docs/simulate.md, "Calibration"), so that the simulator
// predicts `mtc train --device cpu` step times:
//
//   device.peak_flops        the best GEMM rate over the measured shapes
//                            (runtime/cpu gemm: OpenBLAS sgemm blocks on
//                            the kernels' thread pool); bf16 = fp32 (the
//                            CPU device computes in fp32)
//   device.gemm_efficiency   each FLOP count's (2·m·n·k) rate / peak: the
//                            matmul (x @ w) and weight-gradient (xᵀ @ dy)
//                            products of the examples' layers at 64 to 2048
//                            rows
//   device.gemm_shapes       every measured (m, n, k) and its efficiency
//                            (the two forms of a shape apart: x @ w is
//                            rows x N x K, xᵀ @ dy is K x N x rows)
//   device.attention_efficiency  cpu::attention and attentionGrad at the
//                            examples' head shapes, FLOPs by attentionFlops
//   device.memory_bandwidth  bytes (operands + results) per second of the
//                            memory-bound kernels: norms, elementwise,
//                            softmax, rope, transposes, and their gradients
//   device.memory_bandwidth_by_kind  the same per op kind (bundle op names:
//                            transpose, rmsnorm_grad, add, ...)
//   device.launch_latency_s  the executor's fixed cost per op: a chain of
//                            small adds run through exec::Executor (decode,
//                            result allocation, the kernel table, the
//                            pool's parallelFor), nothing to compute
//   device.kernel_time_scale, device.kernel_overhead_s
//                            a layer's products and elementwise ops, forward
//                            and backward, each reading what an earlier op
//                            wrote, run through exec::Executor at 64, 256
//                            and 1024 tokens on the kernels' pool, each op
//                            timed where it runs: the chain's time over the
//                            price the figures above give it, fitted as a
//                            factor on the kernels' work plus seconds per
//                            kernel (the step's cost of running ops in a
//                            chain: data moving between the threads'
//                            caches, the pool's fork and join)
//   device.host_threads      the kernel threads (the simulator shares the
//                            host's cores between them and host work)
//   link.*                   CpuDevice copies (memcpy on the h2d / d2h
//                            stream threads): each direction alone, both at
//                            once (duplex_factor = alone / together), and a
//                            small copy's latency
//   host.*                   cores, a STREAM triad over all cores, and
//                            train::AdamW::step on the optimizer's threads
//                            (the cores the kernels leave free, at least
//                            one; 28 bytes per parameter)
//   device.memory_bytes      what `--device-memory auto` gives the CPU
//                            device (half of MemAvailable)
//
// Every figure is the best (by default; or the median) of `repeats` timed
// repetitions after a warm-up; the median, the best and the spread ((max -
// min) / median) are kept beside it, in the profile's "calibration" object,
// so a noisy machine shows.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CALIBRATE_CALIBRATE_H
#define MTC_RUNTIME_CALIBRATE_CALIBRATE_H

#include "lib/Support/Status.h"

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace mtc::driver {

struct CalibrateOptions {
  /// Kernel threads (cpu::setThreads); 0: the default (all cores, or
  /// MTC_NUM_THREADS), as `mtc train --threads` takes it.
  int threads = 0;
  /// Small shapes and sizes, two repetitions: seconds instead of tens of
  /// seconds, for tests (the figures are rougher).
  bool quick = false;
  /// Timed repetitions of each measurement (0: 21 for the best, 7 for the
  /// median, 2 with quick).
  int repeats = 0;
  /// Which repetition a figure keeps: the best (the machine's speed when
  /// nothing else takes its cores: the most repeatable figure on a shared
  /// machine) or the median.
  enum class Statistic { Best, Median } statistic = Statistic::Best;
  /// One line per measurement as it completes (nullptr: quiet).
  std::ostream *log = nullptr;
};

/// One measured figure: the median over the repetitions and its spread.
struct Measurement {
  std::string name;  ///< e.g. "gemm 1024x256x688 nn"
  std::string unit;  ///< "flop/s", "B/s", "s"
  double value = 0;  ///< the kept statistic (CalibrateOptions::statistic)
  double median = 0; ///< the median repetition's figure
  double best = 0;   ///< the best repetition's figure
  double spread = 0; ///< (max - min) / median of the repetitions' times
  double work = 0;   ///< FLOPs or bytes of one call (0 for latencies)
};

/// A point of an efficiency curve: efficiency at a FLOP count.
struct EfficiencyPoint {
  double flops = 0;
  double efficiency = 0;
};

/// A measured GEMM shape (m x n x k; a weight gradient xᵀ dy over [rows, K]
/// and [rows, N] is K x N x rows) and its efficiency.
struct GemmShapeEfficiency {
  int64_t m = 0, n = 0, k = 0;
  double efficiency = 0;
};

/// The figures of a profile (see the file comment), and what they came from.
struct Calibration {
  double peakFlops = 0;
  std::vector<EfficiencyPoint> gemmEfficiency, attentionEfficiency;
  std::vector<GemmShapeEfficiency> gemmShapes;
  double memoryBandwidth = 0;
  /// Bundle op name -> bytes/s of its memory-bound kernel.
  std::map<std::string, double> memoryBandwidthByKind;
  double launchLatency = 0;
  /// A chain of a layer's ops run through the executor (six sizes) against
  /// the price the figures above give it: measured - dispatch = scale x
  /// work + kernels x overhead, least squares (kernel_time_scale,
  /// kernel_overhead_s).
  double kernelTimeScale = 1, kernelOverhead = 0;
  /// The chain's seconds at each size, measured and predicted (before the
  /// fit).
  std::vector<double> chainMeasured, chainPredicted;
  double h2dBandwidth = 0, d2hBandwidth = 0, duplexFactor = 1;
  double copyLatency = 0;
  int cores = 0;
  int threads = 0, optimizerThreads = 0;
  double hostMemoryBandwidth = 0;
  double adamwBytesPerSecond = 0;
  int64_t memoryBytes = 0;

  int repeats = 0;
  std::string statistic; ///< "best" or "median"
  bool quick = false;
  double seconds = 0; ///< wall time of the whole calibration
  std::vector<Measurement> measurements;
};

/// The FLOPs the profile's attention efficiency counts for one attention
/// call over q [B, S, Hq, D] and keys [B, Sk, Hkv, D]: 4·B·Hq·S·Sk·D (the
/// two products QKᵀ and PV), halved when causal with S == Sk (the blocks
/// above the diagonal are skipped); the backward 2.5 times the forward (five
/// products instead of two).
double attentionFlops(int64_t B, int64_t S, int64_t Sk, int64_t Hq, int64_t D,
                      bool causal, bool backward);

/// A chain's fit: kernel_time_scale and kernel_overhead_s.
struct KernelChainFit {
  double scale = 1;    ///< in [0.5, 4]
  double overhead = 0; ///< seconds per kernel, in [0, 1e-3]
};

/// Fits measured[i] = scale x work[i] + kernels x overhead by least squares
/// over the chain's sizes (work: the chain's price at the measured rates,
/// both without the dispatch latency; \p kernels per chain). A negative
/// overhead is dropped (0) and the scale refitted through the origin; a
/// single size fits the scale alone. {1, 0} without data.
KernelChainFit fitKernelChain(const std::vector<double> &work,
                              const std::vector<double> &measured,
                              double kernels);

/// Measures this machine (see the file comment). Errors: the CPU device's
/// arena or a host buffer cannot be allocated.
Expected<Calibration> calibrate(const CalibrateOptions &opts);

/// The profile JSON (the schema of docs/simulate.md) of \p c, named
/// "cpu-device"; \p source says where and when it was measured.
std::string calibrationProfileJson(const Calibration &c,
                                   const std::string &source);

/// "measured by mtc simulate --calibrate on DATE (UTC) on HOST: CPU, N
/// cores, T kernel threads" for the profile's "source".
std::string calibrationSource(const Calibration &c);

/// A table of \p c's measurements (name, value, spread) for the terminal.
void printCalibration(std::ostream &os, const Calibration &c);

} // namespace mtc::driver

#endif // MTC_RUNTIME_CALIBRATE_CALIBRATE_H
