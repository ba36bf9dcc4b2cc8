//===- StepTime.h - Predicted step time of a streaming plan -----*- C++ -*-===//
//
// Part of mtc. Prices a candidate step plan (a recompute policy, where its
// checkpoints live, a segment length) by the time one training step is
// predicted to take on the target, so that `--recompute auto` can keep the
// fastest plan that fits (docs/streaming.md, "Choosing what to recompute").
//
// The streaming runtime runs four kinds of work on their own streams: device
// compute (forward, backward, recomputation), host-to-device copies (weight
// loads, checkpoints and host activations coming back), device-to-host
// copies (gradients, checkpoints and host activations going out) and the
// CPU AdamW. On a GPU they overlap, so a step takes about the longest of
// them plus what cannot overlap (the first weight load before any compute,
// the last gradient return after it). The two copy directions share the
// link: while both run, each keeps the link's duplex factor of its
// bandwidth. On the CPU device the copies are memcpys on the cores the
// kernels use, so they add to the compute instead of hiding under it.
//
// The rates are the target's: a GPU's hardware profile (lib/Sim/Profile.h,
// the profiles `mtc simulate` uses) or the CPU device's DeviceRates. This is
// a closed-form estimate for ranking plans, not the event simulation of
// `mtc simulate`: `--recompute auto` prices the CPU device's candidates with
// it, and a GPU's by that simulation (compiler/Driver/CompileModel.cpp),
// which also models the streams' events; estimateStepTime on gpuStepRates
// is the cheap approximation of it.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_ANALYSIS_STEPTIME_H
#define MTC_COMPILER_ANALYSIS_STEPTIME_H

#include "compiler/Analysis/MemoryModel.h"
#include "lib/Bundle/Plan.h"
#include "lib/Sim/Profile.h"

#include <string>

namespace mtc::analysis {

/// What the streams of a step run at on one target.
struct StepRates {
  /// The target in words ("h100-sxm", "the CPU device").
  std::string name = "the CPU device";
  /// Peak device FLOP/s for the plan's precision.
  double peakFlops = DeviceRates{}.flopsPerSecond;
  /// The fraction of the peak an op of so many FLOPs reaches (empty: 1).
  sim::EfficiencyCurve efficiency;
  /// Bytes/s of one copy direction alone.
  double h2dBytesPerSecond = DeviceRates{}.copyBytesPerSecond;
  double d2hBytesPerSecond = DeviceRates{}.copyBytesPerSecond;
  /// Each direction's share of its bandwidth while both directions copy.
  double duplexFactor = 1;
  /// Bytes/s the CPU AdamW moves; 0: not priced (the CPU device, where it
  /// is the same work for every plan).
  double optimizerBytesPerSecond = 0;
  /// Copies run on the cores that compute (the CPU device): they add to
  /// the compute time instead of overlapping it.
  bool copiesShareCompute = true;

  /// Seconds of \p flops FLOPs run in ops of \p opFlops FLOPs each.
  double computeSeconds(double flops, double opFlops) const;
};

/// The CPU device's rates: DeviceRates' defaults, copies on the compute
/// cores.
StepRates cpuDeviceStepRates();

/// The rates of the GPU \p profile for device tensors stored in \p
/// precision: its peak and GEMM efficiency curve, its link (both
/// directions, duplex factor) and its host's AdamW rate.
StepRates gpuStepRates(const sim::Profile &profile,
                       bundle::Precision precision);

/// One step of a plan, stream by stream.
struct StepTimeEstimate {
  double computeSeconds = 0;   ///< forward, backward and recomputation
  double h2dSeconds = 0;       ///< host-to-device bytes alone on the link
  double d2hSeconds = 0;       ///< device-to-host bytes alone on the link
  double linkSeconds = 0;      ///< both directions, sharing the link
  double optimizerSeconds = 0; ///< the CPU AdamW
  double exposedSeconds = 0;   ///< what overlaps nothing
  double stepSeconds = 0;      ///< the prediction
  double h2dBytes = 0, d2hBytes = 0;
  double recomputeFlops = 0; ///< forward FLOPs run again in the backward
  /// What the step is bound by: "compute", "h2d", "d2h" or "optimizer"
  /// (the CPU device: "compute" or "copies").
  std::string bound;
};

/// Predicts one step of the plan \p choices of \p cost on \p rates:
/// - compute: every forward loop instance's forward and backward (twice
///   the forward) per micro-batch, plus its recomputeFlops and segment
///   checkpointing's extra forwards, plus the model-level work (2 FLOPs per
///   model-level parameter and token, forward and backward: 6);
/// - h2d: two weight loads per layer instance less the instances resident
///   at the turnaround, the model-level weights, and with host checkpoints
///   every kept checkpoint coming back (and, over several micro-batches,
///   each instance's input and gradient activations);
/// - d2h: every gradient (fp32) and the checkpoints and activations going
///   out;
/// - optimizer: 28 bytes per parameter at the host's AdamW rate.
/// On a GPU the step is max(compute, link, optimizer) plus the first
/// weight load and the last gradient return; on the CPU device compute plus
/// both copy directions.
StepTimeEstimate estimateStepTime(const ModelCost &cost,
                                  const PlanChoices &choices,
                                  const StepRates &rates);

/// Seconds both copy directions take on a link where each keeps \p duplex
/// of its bandwidth while the other copies: the shorter one runs beside the
/// longer at the duplex rate, the rest of the longer alone.
double sharedLinkSeconds(double h2dSeconds, double d2hSeconds, double duplex);

} // namespace mtc::analysis

#endif // MTC_COMPILER_ANALYSIS_STEPTIME_H
