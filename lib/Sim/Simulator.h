//===- Simulator.h - Event simulation of a step plan ------------*- C++ -*-===//
//
// Part of mtc. Replays one training step of a bundle's step plan
// (docs/streaming.md) on a hardware profile, as the streaming runtime
// (runtime/stream/StreamExecutor) would run it: the same streams (compute,
// h2d, d2h, optimizer; h2d.act and d2h.act with host activations), the same
// commands in the same order and the same events between them. Each command
// takes the time the profile gives it (Cost.h for device work; copies move
// their bytes over the link, sharing a direction's bandwidth with the copies
// running beside them and losing the duplex factor while the other
// direction copies; AdamW moves its bytes per parameter at the host's
// measured rate; fp32 -> bf16 conversions take their bytes at the host
// conversion pool's rate; a device on the host's cores, device.host_threads,
// shares them fairly with the host's commands). Segment checkpointing (the
// plan's checkpoint_every) is replayed as the runtime runs it: the backward of
// a segment first recomputes its forwards into the device segment buffer. Mixed
// recomputation (selective_layers) is replayed per instance: a full instance
// copies only its input and runs backward_full. The step is the steady state:
// with the deferred optimizer placement every layer's update of the previous
// step is pending when it starts.
//
// docs/simulate.md describes the model and its limits.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SIM_SIMULATOR_H
#define MTC_LIB_SIM_SIMULATOR_H

#include "lib/Bundle/Bundle.h"
#include "lib/Sim/Profile.h"
#include "lib/Support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mtc::sim {

/// What the simulated runtime does beside the plan.
struct SimOptions {
  /// Gradient clipping (deferred placement): the global gradient norm is
  /// computed on the host between steps (4 B/param read).
  bool clip = true;
  /// Bytes of one parameter's gradient in host memory: 4 (fp32), or 2
  /// (`--grad-dtype bf16`, deferred placement: each gradient return is
  /// converted from fp32 to bf16 on the host after its DMA, and AdamW and
  /// the gradient norm read 2 bytes per parameter).
  int64_t gradBytesPerParam = 4;
  /// fp32 -> bf16 conversions (bf16 weight loads before their DMA, bf16
  /// gradient returns after theirs) run on the host, in stream order (the
  /// CUDA backend; docs/cuda.md). Off: the "what if" of converting on the
  /// device (loads and returns move bf16 bytes, no host work).
  bool convertOnHost = true;
  /// Threads of the host conversion pool (MTC_CONVERT_THREADS); 0: the
  /// runtime's default, min(8, max(1, cores / 2)) of the profile's cores.
  /// A conversion runs at min(threads x host.convert_bytes_per_s,
  /// host.memory_bandwidth).
  int64_t convertThreads = 0;
  /// Keep every command's span for a timeline (Timeline.h).
  bool keepSpans = false;
};

/// Bytes per second of the host's fp32 -> bf16 conversion with \p threads
/// pool threads (0: the runtime's default for the profile's cores): \p
/// threads x host.convert_bytes_per_s (one thread's rate), at most the
/// host's memory bandwidth.
double convertBytesPerSecond(const Profile &profile, int64_t threads = 0);

/// One command as it ran: its stream, label, category and [start, end].
struct SimSpan {
  std::string stream, label, category;
  double start = 0, end = 0;
};

/// What one simulated step took and moved.
struct SimResult {
  double stepSeconds = 0;
  /// Busy time per stream ("compute", "h2d", ...).
  std::map<std::string, double> busy;
  /// Time the compute stream waited, by what it waited for along the
  /// critical path: "h2d", "d2h" (copies), "optimizer", "host-memory" (the
  /// host conversion of bf16 weights, the gradient norm).
  std::map<std::string, double> exposed;
  double computeSeconds = 0; ///< device work
  double hardwareFlops = 0;  ///< GEMM + attention FLOPs run (recompute too)
  double h2dBytes = 0, d2hBytes = 0;
  double optimizerSeconds = 0;       ///< AdamW work in the step
  double optimizerHiddenSeconds = 0; ///< of which under device work
  double exposedCopySeconds = 0;     ///< exposed h2d + d2h
  int64_t weightLoads = 0;
  int64_t commands = 0; ///< simulated commands
  /// compute | h2d | d2h | optimizer | host-memory: what the step waited
  /// for most (compute when the device was busy nearly all the step).
  std::string bottleneck;
  std::vector<SimSpan> spans; ///< with SimOptions::keepSpans
};

/// Simulates one step of \p b's step plan on \p profile. Errors: no step
/// plan, a program the runtime would refuse (unknown command, layer or
/// buffer).
Expected<SimResult> simulateStep(const bundle::Bundle &b,
                                 const Profile &profile,
                                 const SimOptions &options = {});

} // namespace mtc::sim

#endif // MTC_LIB_SIM_SIMULATOR_H
