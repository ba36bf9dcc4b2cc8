//===- ScheduleTest.cpp - Unit tests of runtime/train/Schedule ------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Schedule.h"

#include <gtest/gtest.h>

using namespace mtc::train;

namespace {

TEST(LrSchedule, WarmupCosineFloor) {
  LrSchedule s{1e-3, 10, 110, 0.1};
  EXPECT_EQ(s.at(0), 0.0);
  EXPECT_DOUBLE_EQ(s.at(1), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(5), 5e-4);
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);
  // Halfway through the decay: (peak + min) / 2.
  EXPECT_NEAR(s.at(60), (1e-3 + 1e-4) / 2, 1e-15);
  EXPECT_NEAR(s.at(109), 1e-4, 1e-6);
  EXPECT_GT(s.at(109), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(110), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(1000), 1e-4);
  // Monotone decay.
  for (int64_t t = 10; t < 110; ++t)
    EXPECT_GE(s.at(t), s.at(t + 1));
}

TEST(LrSchedule, NoWarmupOrNoDecay) {
  LrSchedule s{2e-4, 0, 100, 0.0};
  EXPECT_DOUBLE_EQ(s.at(0), 2e-4);
  EXPECT_LT(s.at(1), 2e-4);
  EXPECT_EQ(s.at(100), 0.0);
  LrSchedule c{2e-4, 5, 5, 0.1}; // total <= warmup: constant after warmup
  EXPECT_DOUBLE_EQ(c.at(5), 2e-4);
  EXPECT_DOUBLE_EQ(c.at(50), 2e-4);
}

} // namespace
