//===- Moe.h - Launchers of the mixture-of-experts routing ------*- C++ -*-===//
//
// Part of mtc. The host side of runtime/cuda/kernels/moe.cu: a moe op's
// routing, the gather and scatter of each expert's rows, the aux loss and
// the routing's gradients, all queued on the Launch's stream; none
// synchronises and none reads a device value on the host. The semantics
// are the CPU executor's (runtime/exec/ExecMoE.cpp, cpu::moeTopK).
//
// How an op uses them (runtime/exec/cuda/CudaMoeKernels.cpp):
//
//   forward   moeRoute; y = 0; for e: moeGather(e) -> x_e [N, D], run the
//             expert on x_e, moeScatter(e) its output into y; moeAuxLoss
//   backward  moeRoute; for e: moeGather(e), the expert's forward,
//             moeGradRows(e) -> dy_e and the gate gradients, the expert's
//             backward on (x_e, dy_e), moeScatter(e, unweighted) into dh;
//             moeRouterGrad
//
// Capacity. Which tokens an expert gets is known on the device only, so every
// expert runs over N rows (its tokens first, in ascending order, then zero
// rows): shapes are fixed, no count comes back to the host. The cost is E / K
// times the expert FLOPs of an exact split (docs/cuda-kernels.md). Zero input
// rows with zero output gradients add exactly nothing to the experts' weight
// gradients for row-wise expert bodies (the experts of mtc's models).
//
// Storage: the rows (h, x_e, y, dy, dh and the experts' outputs) are f32 or
// bf16 (`type`); the routing itself (probabilities, gates, gradients) is
// fp32, the router GEMMs f32.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_MOE_H
#define MTC_RUNTIME_CUDA_OPS_MOE_H

#include "runtime/cuda/ops/Launch.h"

#include <cstdint>

namespace mtc::cuda::ops {

/// One moe op's routing buffers in device memory (moe.cu's layout), carved
/// from one allocation of moeRoutingBytes(N, E, K) bytes by moeRoutingAt.
struct MoeRouting {
  int64_t N = 0, E = 0, K = 0;
  DevPtr probs = 0;    ///< [N, E] f32: the router softmax
  DevPtr work = 0;     ///< [N, E] f32: the router logits, later dp
  DevPtr work2 = 0;    ///< [N, E] f32: d(logits)
  DevPtr choice = 0;   ///< [N, K] i32: the chosen experts, best first
  DevPtr gate = 0;     ///< [N, K] f32: their gate weights
  DevPtr slotOf = 0;   ///< [N, K] i32: the token's row in the expert's list
  DevPtr count = 0;    ///< [E] i32: tokens per expert
  DevPtr list = 0;     ///< [E, N] i32: each expert's tokens, ascending
  DevPtr slotGate = 0; ///< [E, N] f32: their gate weights
  DevPtr dg = 0;       ///< [E, N] f64: the gate gradients (backward)

  /// Expert e's slices.
  DevPtr countOf(int64_t e) const { return count + 4 * e; }
  DevPtr listOf(int64_t e) const { return list + 4 * e * N; }
  DevPtr slotGateOf(int64_t e) const { return slotGate + 4 * e * N; }
  DevPtr dgOf(int64_t e) const { return dg + 8 * e * N; }
};

/// Bytes of the routing buffers of N tokens, E experts, top K.
int64_t moeRoutingBytes(int64_t N, int64_t E, int64_t K);
/// The buffers at \p base (moeRoutingBytes(N, E, K) bytes, 8-byte aligned).
MoeRouting moeRoutingAt(DevPtr base, int64_t N, int64_t E, int64_t K);

/// Routes h [N, D] (f32) with router [D, E]: probs = softmax(h @ router),
/// each token's top K (gates divided by their sum when \p normalize), and
/// the per-expert lists. Errors: sizes outside the kernels' int range,
/// K outside [1, E].
Status moeRoute(const Launch &L, DevPtr h, DevPtr router, const MoeRouting &r,
                int64_t D, bool normalize);

/// x [N, D] = expert e's rows of h [N, D], then zero rows.
Status moeGather(const Launch &L, DevPtr h, const MoeRouting &r, int64_t e,
                 DevPtr x, int64_t D, DType type = DType::F32);

/// y[t] += g * out[j] for expert e's rows j (token t, gate g; weight 1 when
/// \p weighted is false). Deterministic: a token is once in a list.
Status moeScatter(const Launch &L, DevPtr out, const MoeRouting &r, int64_t e,
                  bool weighted, DevPtr y, int64_t D, DType type = DType::F32);

/// For expert e's rows j (token t, gate g): dye[j] = g * dy[t] and the gate
/// gradient <dy[t], out[j]> (into r.dg); zero rows after them.
Status moeGradRows(const Launch &L, DevPtr dy, DevPtr out, const MoeRouting &r,
                   int64_t e, DevPtr dye, int64_t D, DType type = DType::F32);

/// The router's gradients once every expert's moeGradRows has run: dp from
/// the gate gradients (through the renormalisation when \p normalize) plus
/// the aux loss' c * E * f_e / N (\p auxCoef = c > 0), d(logits) through the
/// softmax, then dh [N, D] += d(logits) @ router^T and drouter [D, E] +=
/// h^T d(logits). All f32.
Status moeRouterGrad(const Launch &L, DevPtr h, DevPtr router,
                     const MoeRouting &r, int64_t D, bool normalize,
                     double auxCoef, DevPtr dh, DevPtr drouter);

/// *out (one double) = coef * E * sum_e f_e P_e (the aux loss, CPU order of
/// terms; each P_e a fixed tree).
Status moeAuxLoss(const Launch &L, const MoeRouting &r, double coef,
                  DevPtr out);

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_MOE_H
