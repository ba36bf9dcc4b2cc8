//===- Moe.cpp - Launchers of the mixture-of-experts routing --------------===//
//
// Part of mtc.
//
// Geometry (moe.cu's banner): per-token kernels (top-k, gate gradients) one
// thread per token in blocks of 128; the list scan one block of 256 per
// expert; the row kernels one block per row of the expert's N-row capacity
// (128 threads, 256 for the gradient rows' double reduction); the aux loss
// one block of 256. The kernels index rows in int and elements in 64 bits:
// N, D, E, K each below 2^31.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ops/Moe.h"

#include "runtime/cuda/ops/Matmul.h"
#include "runtime/cuda/ops/Reduce.h"

#include <climits>
#include <string>

namespace mtc::cuda::ops {
namespace {

constexpr unsigned kTokenBlock = 128, kRowBlock = 128, kScanBlock = 256;

unsigned blocksFor(int64_t n, unsigned block) {
  return static_cast<unsigned>((n + block - 1) / block);
}

Status checkSizes(const char *what, const MoeRouting &r, int64_t D) {
  for (int64_t v : {r.N, r.E, r.K, D})
    if (v < 0 || v > INT_MAX)
      return Status::error(std::string(what) + ": N = " + std::to_string(r.N) +
                           ", E = " + std::to_string(r.E) + ", K = " +
                           std::to_string(r.K) + ", D = " + std::to_string(D) +
                           " is outside the kernels' range (each below 2^31)");
  if (r.K < 1 || r.K > r.E)
    return Status::error(std::string(what) +
                         ": top k = " + std::to_string(r.K) +
                         " must be in [1, " + std::to_string(r.E) + "]");
  return Status::success();
}

Status checkExpert(const char *what, const MoeRouting &r, int64_t e,
                   int64_t D) {
  if (Status s = checkSizes(what, r, D); !s)
    return s;
  if (e < 0 || e >= r.E)
    return Status::error(std::string(what) + ": expert " + std::to_string(e) +
                         " of " + std::to_string(r.E));
  return Status::success();
}

} // namespace

int64_t moeRoutingBytes(int64_t N, int64_t E, int64_t K) {
  auto up8 = [](int64_t b) { return (b + 7) / 8 * 8; };
  return 3 * up8(4 * N * E) + 3 * up8(4 * N * K) + up8(4 * E) +
         2 * up8(4 * E * N) + 8 * E * N;
}

MoeRouting moeRoutingAt(DevPtr base, int64_t N, int64_t E, int64_t K) {
  auto up8 = [](int64_t b) { return static_cast<DevPtr>((b + 7) / 8 * 8); };
  MoeRouting r;
  r.N = N, r.E = E, r.K = K;
  DevPtr p = base;
  // The doubles first: base is 8-byte aligned.
  r.dg = p, p += static_cast<DevPtr>(8 * E * N);
  r.probs = p, p += up8(4 * N * E);
  r.work = p, p += up8(4 * N * E);
  r.work2 = p, p += up8(4 * N * E);
  r.choice = p, p += up8(4 * N * K);
  r.gate = p, p += up8(4 * N * K);
  r.slotOf = p, p += up8(4 * N * K);
  r.count = p, p += up8(4 * E);
  r.list = p, p += up8(4 * E * N);
  r.slotGate = p;
  return r;
}

Status moeRoute(const Launch &L, DevPtr h, DevPtr router, const MoeRouting &r,
                int64_t D, bool normalize) {
  if (Status s = checkSizes("moeRoute", r, D); !s)
    return s;
  // Without tokens every expert's count is still written (zero).
  if (r.N > 0) {
    if (Status s = matmul(L, h, router, 0, r.work, r.N, D, r.E); !s)
      return s.withPrefix("moeRoute");
    if (Status s = softmax(L, r.work, r.probs, r.N, r.E, 1); !s)
      return s.withPrefix("moeRoute");
    int n = static_cast<int>(r.N), e = static_cast<int>(r.E),
        k = static_cast<int>(r.K), norm = normalize ? 1 : 0;
    DevPtr probs = r.probs, choice = r.choice, gate = r.gate;
    if (Status s = L.kernel("moe.cu", "moe_topk", {blocksFor(r.N, kTokenBlock)},
                            {kTokenBlock}, 0,
                            {&probs, &n, &e, &k, &norm, &choice, &gate});
        !s)
      return s.withPrefix("moeRoute");
  }
  int n = static_cast<int>(r.N), e = static_cast<int>(r.E),
      k = static_cast<int>(r.K);
  DevPtr choice = r.choice, gate = r.gate, count = r.count, list = r.list,
         slotGate = r.slotGate, slotOf = r.slotOf;
  return L
      .kernel("moe.cu", "moe_lists", {static_cast<unsigned>(r.E)}, {kScanBlock},
              0,
              {&choice, &gate, &n, &e, &k, &count, &list, &slotGate, &slotOf})
      .withPrefix("moeRoute");
}

Status moeGather(const Launch &L, DevPtr h, const MoeRouting &r, int64_t e,
                 DevPtr x, int64_t D, DType type) {
  if (Status s = checkExpert("moeGather", r, e, D); !s)
    return s;
  if (r.N == 0 || D == 0)
    return Status::success();
  DevPtr list = r.listOf(e), count = r.countOf(e);
  int n = static_cast<int>(r.N), d = static_cast<int>(D);
  return L
      .kernel("moe.cu", std::string("moe_gather_") + dtypeSuffix(type),
              {static_cast<unsigned>(r.N)}, {kRowBlock}, 0,
              {&h, &list, &count, &x, &n, &d})
      .withPrefix("moeGather");
}

Status moeScatter(const Launch &L, DevPtr out, const MoeRouting &r, int64_t e,
                  bool weighted, DevPtr y, int64_t D, DType type) {
  if (Status s = checkExpert("moeScatter", r, e, D); !s)
    return s;
  if (r.N == 0 || D == 0)
    return Status::success();
  DevPtr list = r.listOf(e), count = r.countOf(e),
         gates = weighted ? r.slotGateOf(e) : 0;
  int n = static_cast<int>(r.N), d = static_cast<int>(D);
  return L
      .kernel("moe.cu", std::string("moe_scatter_") + dtypeSuffix(type),
              {static_cast<unsigned>(r.N)}, {kRowBlock}, 0,
              {&out, &list, &gates, &count, &y, &n, &d})
      .withPrefix("moeScatter");
}

Status moeGradRows(const Launch &L, DevPtr dy, DevPtr out, const MoeRouting &r,
                   int64_t e, DevPtr dye, int64_t D, DType type) {
  if (Status s = checkExpert("moeGradRows", r, e, D); !s)
    return s;
  if (r.N == 0)
    return Status::success();
  DevPtr list = r.listOf(e), count = r.countOf(e), gates = r.slotGateOf(e),
         dg = r.dgOf(e);
  int n = static_cast<int>(r.N), d = static_cast<int>(D);
  return L
      .kernel("moe.cu", std::string("moe_grad_rows_") + dtypeSuffix(type),
              {static_cast<unsigned>(r.N)}, {kScanBlock}, 0,
              {&dy, &out, &list, &gates, &count, &dye, &dg, &n, &d})
      .withPrefix("moeGradRows");
}

Status moeRouterGrad(const Launch &L, DevPtr h, DevPtr router,
                     const MoeRouting &r, int64_t D, bool normalize,
                     double auxCoef, DevPtr dh, DevPtr drouter) {
  if (Status s = checkSizes("moeRouterGrad", r, D); !s)
    return s;
  if (r.N == 0)
    return Status::success();
  int n = static_cast<int>(r.N), e = static_cast<int>(r.E),
      k = static_cast<int>(r.K), norm = normalize ? 1 : 0;
  DevPtr probs = r.probs, choice = r.choice, gate = r.gate, slotOf = r.slotOf,
         dg = r.dg, count = r.count, dp = r.work;
  if (Status s = L.kernel("moe.cu", "moe_gate_grad",
                          {blocksFor(r.N, kTokenBlock)}, {kTokenBlock}, 0,
                          {&probs, &choice, &gate, &slotOf, &dg, &count, &n, &e,
                           &k, &norm, &auxCoef, &dp});
      !s)
    return s.withPrefix("moeRouterGrad");
  if (Status s = softmaxGrad(L, r.probs, r.work, r.work2, r.N, r.E, 1); !s)
    return s.withPrefix("moeRouterGrad");
  if (Status s =
          gemm(L, false, true, r.N, D, r.E, 1.0f, r.work2, router, 1.0f, dh);
      !s)
    return s.withPrefix("moeRouterGrad");
  return matmulGradWeightAcc(L, h, r.work2, drouter, r.N, D, r.E)
      .withPrefix("moeRouterGrad");
}

Status moeAuxLoss(const Launch &L, const MoeRouting &r, double coef,
                  DevPtr out) {
  if (Status s = checkSizes("moeAuxLoss", r, 0); !s)
    return s;
  DevPtr probs = r.probs, count = r.count;
  int n = static_cast<int>(r.N), e = static_cast<int>(r.E),
      k = static_cast<int>(r.K);
  return L
      .kernel("moe.cu", "moe_aux_loss", {1}, {kScanBlock}, 0,
              {&probs, &count, &n, &e, &k, &coef, &out})
      .withPrefix("moeAuxLoss");
}

} // namespace mtc::cuda::ops
