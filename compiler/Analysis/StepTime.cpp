//===- StepTime.cpp - Predicted step time of a streaming plan ---*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "compiler/Analysis/StepTime.h"

#include <algorithm>

namespace mtc::analysis {

double StepRates::computeSeconds(double flops, double opFlops) const {
  double eff = efficiency.points.empty() ? 1.0 : efficiency.at(opFlops);
  return flops / (peakFlops * eff);
}

StepRates cpuDeviceStepRates() { return StepRates{}; }

StepRates gpuStepRates(const sim::Profile &profile,
                       bundle::Precision precision) {
  StepRates r;
  r.name = profile.name;
  r.peakFlops = profile.peakFlops(bundle::precisionName(precision));
  r.efficiency = profile.device.gemmEfficiency;
  r.h2dBytesPerSecond = profile.link.h2dBandwidth;
  r.d2hBytesPerSecond = profile.link.d2hBandwidth;
  r.duplexFactor = profile.link.duplexFactor;
  r.optimizerBytesPerSecond = profile.host.adamwBytesPerS;
  r.copiesShareCompute = false;
  return r;
}

double sharedLinkSeconds(double h2dSeconds, double d2hSeconds, double duplex) {
  double shorter = std::min(h2dSeconds, d2hSeconds);
  double longer = std::max(h2dSeconds, d2hSeconds);
  if (duplex <= 0)
    duplex = 1;
  return shorter / duplex + (longer - shorter);
}

StepTimeEstimate estimateStepTime(const ModelCost &cost,
                                  const PlanChoices &choices,
                                  const StepRates &rates) {
  StepTimeEstimate e;
  const double m =
      static_cast<double>(std::max<int64_t>(1, choices.microBatches));
  const int64_t k = std::max<int64_t>(1, choices.checkpointEvery);
  const bool hostActivations = choices.checkpointsOnHost && m > 1;
  int64_t instances = 0, largestWeights = 0, largestGrads = 0;
  double h2d = 0, d2h = 0;
  for (const auto &[name, count] : choices.forwardLoops) {
    const LayerCost *l = cost.layer(name);
    if (!l)
      continue;
    // Mixed recomputation: the instances past the first S keep their input
    // alone and recompute their whole forward.
    const int64_t kept = keptCheckpoints(choices, instances, count);
    instances += count;
    largestWeights = std::max(largestWeights, l->weightBytes);
    largestGrads = std::max(largestGrads, l->gradBytes);
    const double n = static_cast<double>(count);
    const double fwd = static_cast<double>(l->forwardFlops);
    // Forward and backward (twice the forward's FLOPs), the recomputation
    // the backward does, and segment checkpointing's extra forwards.
    double recompute =
        static_cast<double>(kept) * m * static_cast<double>(l->recomputeFlops) +
        static_cast<double>(count - kept) * m * fwd +
        static_cast<double>(segmentExtraForwards(count, k)) * m * fwd;
    e.recomputeFlops += recompute;
    e.computeSeconds +=
        rates.computeSeconds(3.0 * n * m * fwd + recompute, fwd);
    // Two loads of every instance's weights (the turnaround's resident
    // ones are taken off below); every gradient returns in fp32.
    h2d += 2.0 * n * static_cast<double>(l->weightBytes);
    d2h += n * static_cast<double>(l->gradBytes);
    if (choices.checkpointsOnHost) {
      // Under mixed recomputation (never with segments) a full instance
      // copies its input alone.
      double ckpt = kept < count
                        ? m * (static_cast<double>(kept) *
                                   static_cast<double>(l->checkpointBytes) +
                               static_cast<double>(count - kept) *
                                   static_cast<double>(l->boundaryBytes))
                        : static_cast<double>(segmentCount(count, k)) * m *
                              static_cast<double>(l->checkpointBytes);
      h2d += ckpt;
      d2h += ckpt;
    }
    if (hostActivations) {
      // Each instance's input comes in and its output goes out, forward
      // and backward, per micro-batch.
      double act = 2.0 * n * m * static_cast<double>(l->boundaryBytes);
      h2d += act;
      d2h += act;
    }
  }
  int64_t resident = std::min<int64_t>(choices.prefetchDepth, instances);
  h2d -= static_cast<double>(resident) * static_cast<double>(largestWeights);
  h2d += static_cast<double>(cost.modelWeightBytes);
  d2h += static_cast<double>(cost.modelGradBytes);
  // The model-level stage (embedding, head): as if every model-level
  // parameter took part in a product per token (an upper bound).
  const double modelFlops = 2.0 * static_cast<double>(cost.modelParams) *
                            static_cast<double>(cost.tokens);
  e.computeSeconds += rates.computeSeconds(3.0 * m * modelFlops, modelFlops);
  e.h2dBytes = h2d;
  e.d2hBytes = d2h;
  e.h2dSeconds = h2d / rates.h2dBytesPerSecond;
  e.d2hSeconds = d2h / rates.d2hBytesPerSecond;
  e.linkSeconds =
      sharedLinkSeconds(e.h2dSeconds, e.d2hSeconds, rates.duplexFactor);
  if (rates.optimizerBytesPerSecond > 0)
    e.optimizerSeconds = 28.0 * static_cast<double>(cost.totalParams()) /
                         rates.optimizerBytesPerSecond;
  if (rates.copiesShareCompute) {
    e.stepSeconds =
        e.computeSeconds + e.h2dSeconds + e.d2hSeconds + e.optimizerSeconds;
    e.bound =
        e.computeSeconds >= e.h2dSeconds + e.d2hSeconds ? "compute" : "copies";
    return e;
  }
  // The first layer's weights (and the model-level ones) load before any
  // compute; the last gradient returns after it.
  e.exposedSeconds =
      static_cast<double>(largestWeights + cost.modelWeightBytes) /
          rates.h2dBytesPerSecond +
      static_cast<double>(largestGrads) / rates.d2hBytesPerSecond;
  double longest =
      std::max({e.computeSeconds, e.linkSeconds, e.optimizerSeconds});
  e.stepSeconds = longest + e.exposedSeconds;
  if (longest == e.computeSeconds)
    e.bound = "compute";
  else if (longest == e.optimizerSeconds)
    e.bound = "optimizer";
  else
    e.bound = e.h2dSeconds >= e.d2hSeconds ? "h2d" : "d2h";
  return e;
}

} // namespace mtc::analysis
