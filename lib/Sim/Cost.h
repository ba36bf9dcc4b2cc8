//===- Cost.h - Per-op durations on a hardware profile ----------*- C++ -*-===//
//
// Part of mtc. Prices the ops of a bundle's functions on a hardware profile
// (Profile.h): GEMMs (matmul, weight_grad, the LM-head loss) by their FLOPs
// at the profile's GEMM efficiency for that size and shape (m x n x k, when
// the profile has measured shapes), attention by its FLOPs
// (causal halved, a window capping the keys) at the attention efficiency,
// every other op by the bytes it reads and writes (as stored on the device
// under the plan's precision) at the device's memory bandwidth for that op
// kind (memory_bandwidth_by_kind, else memory_bandwidth), and every
// kernel a launch latency. Every kernel's work time is multiplied by the
// profile's kernel_time_scale and every kernel pays kernel_overhead_s
// besides (a step's chain of ops against kernels timed alone; 1 and 0
// unless the profile says). A moe op runs each expert's function on the
// tokens routed to it on average (tokens x top_k / experts). Views
// (param_ref, reshape) cost nothing; param_grad accumulates a gradient into
// its buffer (a memory-bound kernel of three times the gradient's bytes).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SIM_COST_H
#define MTC_LIB_SIM_COST_H

#include "lib/Bundle/Bundle.h"
#include "lib/Bundle/Plan.h"
#include "lib/Sim/Profile.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mtc::sim {

/// What some ops cost on the device.
struct Cost {
  double seconds = 0;
  double flops = 0;     ///< GEMM and attention FLOPs (hardware FLOPs)
  double gemmFlops = 0; ///< of which GEMMs
  double bytes = 0;     ///< bytes memory-bound ops read and write
  int64_t kernels = 0;  ///< launches

  Cost &operator+=(const Cost &o) {
    seconds += o.seconds;
    flops += o.flops;
    gemmFlops += o.gemmFlops;
    bytes += o.bytes;
    kernels += o.kernels;
    return *this;
  }
  Cost scaled(double k) const {
    Cost c = *this;
    c.seconds *= k;
    c.flops *= k;
    c.gemmFlops *= k;
    c.bytes *= k;
    c.kernels = static_cast<int64_t>(c.kernels * k);
    return c;
  }
};

/// Prices ops of bundle functions on \p profile for device tensors stored
/// under \p precision.
class CostModel {
public:
  CostModel(const Profile &profile, bundle::Precision precision);

  /// Seconds of a GEMM of \p flops FLOPs (launch included), of no
  /// particular shape.
  double gemmSeconds(double flops) const;
  /// Seconds of an m x n x k GEMM (2 m n k FLOPs, launch included) at the
  /// profile's efficiency for that shape (DeviceProfile::gemmEfficiencyAt).
  double gemmSeconds(double m, double n, double k) const;
  /// Seconds of an attention kernel of \p flops FLOPs (launch included).
  double attentionSeconds(double flops) const;
  /// Seconds of a memory-bound kernel of op \p kind (a bundle op name; ""
  /// for none) moving \p bytes (launch included), at that kind's bandwidth.
  double memorySeconds(double bytes, const std::string &kind = "") const;

  /// Ops [begin, end) of \p fn (a function of \p layer, or of the model when
  /// \p layer is null) at micro-batch [batch, seq] and \p tokens routed
  /// tokens (expert functions). apply_layers ops are skipped (the step
  /// program runs them as loops).
  Cost function(const bundle::Function &fn, const bundle::Layer *layer,
                int64_t batch, int64_t seq, int64_t tokens = 0,
                size_t begin = 0, size_t end = SIZE_MAX) const;

private:
  Cost op(const bundle::Function &fn, const std::vector<DType> &storage,
          const bundle::Op &op, const bundle::Layer *layer, int64_t batch,
          int64_t seq, int64_t tokens) const;

  const Profile &p;
  bundle::Precision precision;
  double peak;
};

} // namespace mtc::sim

#endif // MTC_LIB_SIM_COST_H
