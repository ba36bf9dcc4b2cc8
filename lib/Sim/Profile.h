//===- Profile.h - Hardware profiles for the step simulator -----*- C++ -*-===//
//
// Part of mtc. A hardware profile describes one machine (a GPU, its host link
// and its host CPU) by the numbers the step simulator (Simulator.h) prices
// work with: peak FLOP/s, achievable GEMM and attention efficiency as a
// function of an op's FLOPs, memory bandwidth, link bandwidth per direction
// and the penalty when both directions run, and the host's memory bandwidth
// and AdamW rate. It is a JSON document (docs/simulate.md lists every
// field); the profiles of common GPUs are built into the tool from
// data/hardware/*.json.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SIM_PROFILE_H
#define MTC_LIB_SIM_PROFILE_H

#include "lib/Support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mtc::sim {

/// One point of an efficiency curve: ops of \p flops FLOPs reach \p
/// efficiency of the peak.
struct EfficiencyPoint {
  double flops = 0;
  double efficiency = 0;
};

/// An efficiency curve: points with strictly increasing FLOPs, interpolated
/// log-linearly in FLOPs and clamped at both ends.
struct EfficiencyCurve {
  std::vector<EfficiencyPoint> points;
  /// The efficiency of an op of \p flops FLOPs (in (0, 1]).
  double at(double flops) const;
};

/// A measured GEMM shape: C[m, n] += A[m, k] B[k, n] reached \p efficiency
/// of the peak. For a weight_grad (xᵀ dy over x [rows, K], dy [rows, N]) m
/// is K, n is N and k is rows.
struct GemmShapePoint {
  double m = 0, n = 0, k = 0;
  double efficiency = 0;
};

struct DeviceProfile {
  int64_t memoryBytes = 0;
  double peakFlopsBF16 = 0, peakFlopsFP32 = 0; ///< dense, per second
  EfficiencyCurve gemmEfficiency;              ///< GEMMs (2 m n k FLOPs)
  /// Optional ("gemm_shapes"): measured shapes correcting gemmEfficiency
  /// (gemmEfficiencyAt).
  std::vector<GemmShapePoint> gemmShapes;
  EfficiencyCurve attentionEfficiency; ///< fused attention kernels
  double memoryBandwidth = 0;          ///< bytes/s for memory-bound kernels
  /// Optional ("memory_bandwidth_by_kind"): bytes/s of the memory-bound
  /// kernels of one op kind (a bundle op name: "transpose",
  /// "rmsnorm_grad"); other kinds run at memoryBandwidth.
  std::map<std::string, double> memoryBandwidthByKind;
  double launchLatency = 0; ///< seconds added to every kernel
  /// Optional ("kernel_time_scale", default 1): every kernel's work time
  /// (its FLOPs or bytes over the rates above; not the latencies) is
  /// multiplied by it. Kernels in a step, where each op reads what the
  /// previous one wrote and the threads fork and join per op, against the
  /// same kernels timed alone (`mtc simulate --calibrate` fits it to a
  /// chain of ops run through the executor).
  double kernelTimeScale = 1;
  /// Optional ("kernel_overhead_s", default 0): seconds added to every
  /// kernel besides launchLatency (the chain's fixed cost per op beyond the
  /// executor's dispatch: the pool's fork and join).
  double kernelOverhead = 0;
  /// Optional ("host_threads", default 0: the device has processors of its
  /// own): the device's kernels run on this many threads of the host's
  /// cores (the CPU device, `--threads`). The simulator then shares
  /// host.cores between them and the host's commands (copies, AdamW,
  /// conversions): past the cores, each runs at cores / threads wanted.
  int64_t hostThreads = 0;
  /// The fixed seconds of one kernel: launchLatency + kernelOverhead.
  double kernelFixedSeconds() const { return launchLatency + kernelOverhead; }

  /// The bandwidth of memory-bound kernels of op \p kind.
  double bandwidthOf(const std::string &kind) const {
    auto it = memoryBandwidthByKind.find(kind);
    return it == memoryBandwidthByKind.end() ? memoryBandwidth : it->second;
  }
  /// The efficiency (in (0, 1]) of an m x n x k GEMM: gemmEfficiency at
  /// its 2 m n k FLOPs, corrected by the measured shape nearest in (log m,
  /// log n, log k) when there are any: x (that shape's efficiency /
  /// gemmEfficiency at that shape's FLOPs), capped at 1. A measured shape
  /// gets its own efficiency; another the curve's trend scaled by its
  /// neighbour's deviation from the curve.
  double gemmEfficiencyAt(double m, double n, double k) const;
};

struct LinkProfile {
  double h2dBandwidth = 0, d2hBandwidth = 0; ///< bytes/s, one direction alone
  /// Each direction's share of its bandwidth while both directions copy
  /// (1: full duplex; 0.5: the directions halve each other).
  double duplexFactor = 1;
  double copyLatency = 0; ///< seconds added to every copy
};

struct HostProfile {
  int64_t cores = 1;
  double memoryBandwidth = 0; ///< host DRAM bytes/s
  /// Bytes per second the CPU AdamW kernel moves (measured on the machine).
  double adamwBytesPerS = 0;
  /// Optional ("convert_bytes_per_s"; default: memory_bandwidth / cores):
  /// bytes per second (read + written) of the fp32 -> bf16 conversion the
  /// CUDA backend runs on one host thread, in stream order, before the DMA
  /// of a bf16 weight load (docs/cuda.md).
  double convertBytesPerS = 0;
};

/// One machine (data/hardware/*.json, docs/simulate.md).
struct Profile {
  std::string name, description, source;
  DeviceProfile device;
  LinkProfile link;
  HostProfile host;

  /// Peak dense FLOP/s for device compute in \p precision ("bf16", "fp32").
  double peakFlops(const std::string &precision) const {
    return precision == "bf16" ? device.peakFlopsBF16 : device.peakFlopsFP32;
  }
};

/// Parses and checks a profile. Errors read "WHERE: field 'a.b': problem"
/// (WHERE is \p origin: the file name or "profile 'h100-sxm'"): a missing
/// or unknown field, a wrong type, a value out of range, an efficiency curve
/// that is empty, not increasing or outside (0, 1].
Expected<Profile> parseProfile(const std::string &text,
                               const std::string &origin);

/// The names of the built-in profiles (data/hardware/*.json), sorted.
std::vector<std::string> builtinProfileNames();

/// The profile \p nameOrFile: a built-in profile's name ("h100-sxm"), or a
/// path to a JSON file (anything containing '/' or ending in ".json").
/// Errors name the file, or list the built-in names.
Expected<Profile> loadProfile(const std::string &nameOrFile);

} // namespace mtc::sim

#endif // MTC_LIB_SIM_PROFILE_H
