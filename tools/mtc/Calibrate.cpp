//===- Calibrate.cpp - mtc simulate --calibrate -----------------*- C++ -*-===//
//
// Part of mtc. `mtc simulate --calibrate -o FILE.json [--threads N]
// [--quick] [--repeats N] [--statistic best|median]`: measures this machine's
// CPU device with the runtime's kernels (runtime/calibrate/Calibrate.h) and
// writes the figures as a hardware profile that `mtc simulate --gpu FILE.json`
// reads (docs/simulate.md, "Calibration").
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/Tool.h"

#include "lib/Support/Files.h"
#include "runtime/calibrate/Calibrate.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace mtc::cli {

const char *calibrateUsage() {
  return "mtc simulate --calibrate -o FILE.json [--threads N] [--quick] "
         "[--repeats N] [--statistic best|median]";
}

int runCalibrate(const std::vector<std::string> &args) {
  driver::CalibrateOptions opts;
  std::vector<std::string> valued, pos;
  for (const std::string &a : args) {
    if (a == "--calibrate")
      continue;
    if (a == "--quick")
      opts.quick = true;
    else
      valued.push_back(a == "-o" ? "--output" : a);
  }
  std::string output, statistic = "best";
  int64_t threads = 0, repeats = 0;
  if (!parseArgs("simulate --calibrate", valued,
                 {{Flag::String, "--output", &output},
                  {Flag::Int, "--threads", &threads, 1, limits::kThreads},
                  {Flag::Int, "--repeats", &repeats, 1, limits::kRepeats},
                  {Flag::String, "--statistic", &statistic}},
                 pos))
    return 1;
  if (!pos.empty())
    return error("simulate --calibrate: unexpected argument '" + pos[0] +
                 "' (it measures this machine; usage: " + calibrateUsage() +
                 ")");
  if (output.empty())
    return error("simulate --calibrate: -o FILE.json is required (usage: " +
                 std::string(calibrateUsage()) + ")");
  // The profile on stdout (-o -): the report goes to stderr.
  std::ostream &log = output == "-" ? std::cerr : std::cout;
  // Fail before measuring when the file cannot be written.
  if (mtc::Status st = mtc::checkOutputPath("-o", output); !st.ok())
    return error("simulate --calibrate: " + st.message());
  if (statistic == "best")
    opts.statistic = driver::CalibrateOptions::Statistic::Best;
  else if (statistic == "median")
    opts.statistic = driver::CalibrateOptions::Statistic::Median;
  else
    return error("simulate --calibrate: --statistic expects best or median, "
                 "got '" +
                 statistic + "'");
  opts.threads = static_cast<int>(threads);
  opts.repeats = static_cast<int>(repeats);
  opts.log = &log;
  log << "mtc: calibrating the CPU device" << (opts.quick ? " (quick)" : "")
      << "\n";
  Expected<driver::Calibration> c = driver::calibrate(opts);
  if (!c)
    return error("simulate --calibrate: " + c.message());
  driver::printCalibration(log, *c);
  std::string json =
      driver::calibrationProfileJson(*c, driver::calibrationSource(*c));
  if (!writeOutput(output, json))
    return 1;
  if (output != "-")
    log << "profile: " << output << "\n";
  return 0;
}

} // namespace mtc::cli
