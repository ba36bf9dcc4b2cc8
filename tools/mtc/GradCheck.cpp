//===- GradCheck.cpp - mtc gradcheck ----------------------------*- C++ -*-===//
//
// Part of mtc. `mtc gradcheck MODEL`: the compiled backward against finite
// differences.
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/Tool.h"

#include "lib/Support/ByteSize.h"
#include "runtime/driver/GradCheck.h"
#include "runtime/hf/HFWeights.h"

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

namespace mtc::cli {

int runGradCheck(const std::vector<std::string> &args) {
  if (wantsHelp("gradcheck", args))
    return 0;
  mtc::CompileOptions copts;
  mtc::driver::GradCheckOptions opts;
  int64_t coords = opts.coordinates;
  std::vector<std::string> pos;
  std::string input, hf, recompute, device = "cpu", deviceMemory;
  std::vector<std::string> sets;
  if (!parseArgs(
          "gradcheck", args,
          {{Flag::Int, "--batch", &opts.batch, 1, limits::kBatch},
           {Flag::Int, "--seq", &opts.seq, 1, limits::kSeq},
           {Flag::Uint, "--seed", &opts.seed, 0},
           {Flag::Double, "--tolerance", &opts.tolerance, 0},
           {Flag::Double, "--step", &opts.step, 1e-12},
           {Flag::Int, "--coordinates", &coords, 0, limits::kCoordinates},
           {Flag::String, "--tensors", &opts.tensors},
           {Flag::List, "--set", &sets},
           {Flag::String, "--recompute", &recompute},
           {Flag::String, "--cpu", &copts.cpu},
           {Flag::String, "--hf", &hf},
           {Flag::String, "--device", &device},
           {Flag::String, "--device-memory", &deviceMemory}},
          pos) ||
      !parseDeviceFlag("gradcheck", device, opts.device, copts) ||
      !parseOverrides("gradcheck", sets, copts.overrides) ||
      !modelInput("gradcheck", pos, hf, input) ||
      !parsePolicyFlags(recompute, "", copts))
    return 1;
  if (mtc::Status st =
          mtc::driver::checkStepTokens("gradcheck", opts.batch, opts.seq, 1);
      !st.ok())
    return error(st.message());
  opts.coordinates = static_cast<int>(coords);
  if (mtc::driver::isGpu(opts.device)) {
    // The whole model is resident: by default, all the device has.
    if (deviceMemory.empty())
      deviceMemory = "auto";
    if (!resolveAutoDeviceMemory("gradcheck", opts.device, deviceMemory))
      return 1;
    mtc::Expected<int64_t> bytes = mtc::parseDeviceBudget(deviceMemory);
    if (!bytes)
      return error("gradcheck: --device-memory: " + bytes.message());
    opts.deviceMemory = *bytes;
  } else if (!deviceMemory.empty()) {
    return error("gradcheck: --device-memory sizes a CUDA device (--device "
                 "cuda|cuda-emu); the CPU runs the model in host memory");
  }
  mtc::bundle::Bundle b;
  if (!loadInput(input, hf, copts, b))
    return 1;
  if (mtc::Status st = mtc::bundle::checkTokenShapes(b, opts.batch, opts.seq);
      !st.ok())
    return error("gradcheck: " + st.message());
  if (!hf.empty())
    opts.hfWeights = mtc::driver::hfWeightsPath(hf);
  int failures = mtc::driver::gradCheck(b, opts, std::cout, std::cerr);
  return failures == 0 ? 0 : 1;
}

} // namespace mtc::cli
