//===- Schedule.cpp - Learning-rate schedule ------------------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Schedule.h"

#include <cmath>

namespace mtc::train {

double LrSchedule::at(int64_t t) const {
  const double minLr = minLrRatio * peakLr;
  if (t <= 0)
    return warmupSteps > 0 ? 0.0 : peakLr;
  if (warmupSteps > 0 && t <= warmupSteps)
    return peakLr * static_cast<double>(t) / static_cast<double>(warmupSteps);
  if (t >= totalSteps)
    return totalSteps > warmupSteps ? minLr : peakLr;
  double progress = static_cast<double>(t - warmupSteps) /
                    static_cast<double>(totalSteps - warmupSteps);
  return minLr + (peakLr - minLr) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

} // namespace mtc::train
