//===- Simulate.cpp - mtc simulate ------------------------------*- C++ -*-===//
//
// Part of mtc. `mtc simulate --calibrate ...`: the calibration of the CPU
// device (Calibrate.cpp).
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/Tool.h"

#include <string>
#include <vector>

namespace mtc::cli {

int runSimulate(const std::vector<std::string> &args) {
  if (wantsHelp("simulate", args))
    return 0;
  for (const std::string &a : args)
    if (a == "--calibrate")
      return runCalibrate(args);
  return error(std::string("simulate: only --calibrate is available (usage: ") +
               calibrateUsage() + ")");
}

} // namespace mtc::cli
