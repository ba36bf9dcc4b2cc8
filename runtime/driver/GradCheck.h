//===- GradCheck.h - Compiled gradients vs finite differences ---*- C++ -*-===//
//
// Part of mtc. What `mtc gradcheck` runs.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_GRADCHECK_H
#define MTC_RUNTIME_DRIVER_GRADCHECK_H

#include "lib/Bundle/Bundle.h"

#include <cstdint>
#include <ostream>

#include <string>

namespace mtc::driver {

struct GradCheckOptions {
  int64_t batch = 8;
  int64_t seq = 32;
  uint64_t seed = 1;
  /// Step of the five-point finite differences (absolute). Large enough
  /// that fp32 rounding of the loss does not matter, small enough for the
  /// O(h^4) truncation error (measured: 1e-2 suits weights of RMS 0.02 to 0.3).
  double step = 1e-2;
  /// Largest accepted relative error.
  double tolerance = 2e-2;
  /// Coordinates checked per tensor besides the directional check.
  int coordinates = 3;
  /// A HuggingFace checkpoint to start from instead of the initializers
  /// (driver/HFWeights.h); "" : none.
  std::string hfWeights;
};

/// For every parameter tensor (each layer instance separately) compares the
/// compiled gradient of the loss with central finite differences: along a
/// random unit direction over the whole tensor, and on the tensor's largest
/// gradient coordinates. Prints one line per tensor with the largest relative
/// error and returns the number of tensors beyond tolerance (0: passed).
/// Token ids and targets are random in [0, vocab).
int gradCheck(const bundle::Bundle &b, const GradCheckOptions &opts,
              std::ostream &os);

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_GRADCHECK_H
