//===- GradCheck.h - Compiled gradients vs finite differences ---*- C++ -*-===//
//
// Part of mtc. What `mtc gradcheck` runs.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_GRADCHECK_H
#define MTC_RUNTIME_DRIVER_GRADCHECK_H

#include "lib/Bundle/Bundle.h"
#include "runtime/driver/DeviceKind.h"

#include <cstdint>
#include <ostream>

#include <string>

namespace mtc::driver {

struct GradCheckOptions {
  int64_t batch = 8;
  int64_t seq = 32;
  uint64_t seed = 1;
  /// Largest first step of a coordinate difference (absolute); along the
  /// random direction, the largest first step moves each coordinate by about
  /// 2.5 * step * max(RMS of the tensor, 0.02). Smaller first steps are taken
  /// where the loss noise allows (GradCheck.cpp).
  double step = 2e-2;
  /// Relative error accepted on top of the finite differences' own error
  /// bound (docs/training.md, "mtc gradcheck").
  double tolerance = 5e-3;
  /// Coordinates checked per tensor besides the directional check.
  int coordinates = 3;
  /// Comma-separated glob patterns (fnmatch) of the tensors to check, e.g.
  /// "Block.2.*,tok_emb"; "" : every tensor.
  std::string tensors;
  /// A HuggingFace checkpoint to start from instead of the initializers
  /// (hf/HFWeights.h); "" : none.
  std::string hfWeights;
  /// The device the model runs on (cpu, cuda, cuda-emu; DeviceModel.h) and,
  /// on a CUDA device, its memory in bytes.
  DeviceKind device = DeviceKind::Cpu;
  int64_t deviceMemory = 0;
};

/// For every parameter tensor (each layer instance separately) compares the
/// compiled gradient of the loss with central finite differences: along a
/// random unit direction over the whole tensor, and on the tensor's largest
/// gradient coordinates. Each difference comes with an estimate of its own
/// error (truncation by Richardson extrapolation, rounding from the measured
/// noise of the fp32 loss); a check fails when the compiled and the finite
/// difference gradient differ by more than that bound plus `tolerance`
/// relative. Prints one line per tensor and returns the number of tensors
/// that failed (0: passed), or -1 after an error (printed to \p err).
/// Token ids and targets are random in [0, vocab).
int gradCheck(const bundle::Bundle &b, const GradCheckOptions &opts,
              std::ostream &out, std::ostream &err);

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_GRADCHECK_H
