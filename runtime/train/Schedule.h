//===- Schedule.h - Learning-rate schedule ----------------------*- C++ -*-===//
//
// Part of mtc. Linear warmup from 0 to the peak, then cosine decay to
// minLrRatio * peak at totalSteps, constant afterwards. Steps are the 1-based
// optimizer step numbers (the t of AdamW's bias correction):
//
//   t <= warmup:          peak * t / warmup          (at(0) == 0)
//   warmup < t < total:   min + (peak - min) * (1 + cos(pi * progress)) / 2,
//                         progress = (t - warmup) / (total - warmup)
//   t >= total:           min = minLrRatio * peak
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_TRAIN_SCHEDULE_H
#define MTC_RUNTIME_TRAIN_SCHEDULE_H

#include <cstdint>

namespace mtc::train {

struct LrSchedule {
  double peakLr = 3e-4;
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0;
  double minLrRatio = 0.1;

  /// The learning rate of 1-based step \p t.
  double at(int64_t t) const;
};

} // namespace mtc::train

#endif // MTC_RUNTIME_TRAIN_SCHEDULE_H
