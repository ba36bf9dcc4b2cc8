//===- CudaMoeKernels.cpp - The moe ops on a CUDA device ------------------===//
//
// Part of mtc. The CUDA kernel-table entries of `moe` and `moe_grad`: the
// CPU entries' semantics (runtime/exec/ExecMoE.cpp) with the routing on the
// device (runtime/cuda/ops/Moe.h), so that a moe op queues its work like any
// other op and never waits for the GPU:
//
//   - the router GEMM, softmax, top-k and per-expert token lists are
//     kernels; their buffers live in the backend's scratch region, held
//     (CudaBackend::ScratchHold) while the experts' own ops run;
//   - each expert's function runs through the executor (the same path as
//     the CPU's runExpert) over a capacity of N rows: its tokens, gathered in
//     ascending order, then zero rows. The host never learns how many
//     tokens an expert got, so every shape is fixed and an expert with no
//     tokens still runs (on zeros, adding nothing). The rows are the moe
//     op's planned workspace (lib/Bundle/Plan.cpp plans experts at T = N);
//   - the output sums each token's experts in ascending expert order (the
//     CPU's), one scatter kernel per expert;
//   - the aux loss is a kernel writing a slot of the backend's memory
//     (Backend::reserveAuxTerm), read with the step's loss after its
//     synchronisation; recomputations inside a layer's backward add none.
//
// Routing pins (gradient checks) and the routing fingerprint need the
// choices on the host: pinned routing is refused here (it runs on the CPU
// backend), and the fingerprint stays 0.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/ops/Moe.h"
#include "runtime/exec/cuda/CudaOpContext.h"

namespace mtc::exec::cudaops {

namespace {

namespace ops = cuda::ops;

/// The routing buffers of \p m in the op's scratch.
ops::MoeRouting routingBuffers(OpContext &c, const ops::Launch &L,
                               const MoeShape &m) {
  Expected<DevPtr> base = L.scratch(ops::moeRoutingBytes(m.N, m.E, m.K));
  if (!base)
    c.fail("routing buffers: " + base.message());
  return ops::moeRoutingAt(*base, m.N, m.E, m.K);
}

void noPinnedRouting(OpContext &c) {
  if (c.routingPinned())
    c.fail("pinned routing (gradient checks) runs on the CPU backend only");
}

/// The moe entries run fp32 plans only: their tensors are not yet passed to
/// the launchers with their storage type (docs/cuda.md, "Precisions").
void fp32Only(OpContext &c, std::initializer_list<const Tensor *> ts) {
  for (const Tensor *t : ts)
    if (t->dtype != DType::F32)
      c.fail("runs fp32 step plans only on the CUDA backend (compile with "
             "--precision fp32)");
}

/// Runs function \p fn of expert \p e and checks that it returns [N, D].
Tensor expertCall(OpContext &c, const bundle::Expert &expert,
                  const std::string &fn, int64_t e, std::vector<Tensor> args,
                  const MoeShape &m) {
  Tensor out = c.runExpert(expert, fn, e, std::move(args)).at(0);
  if (out.numel() != m.N * m.D)
    c.fail("expert '" + expert.name + "' " +
           (fn == "forward" ? std::string("returned") : fn + " returned") +
           " a wrong shape");
  return out;
}

void moe(OpContext &c) {
  noPinnedRouting(c);
  const MoeAttrs &a = c.attrs<MoeAttrs>();
  const bundle::Expert &expert = c.expert();
  const Tensor &h = c.in(0), &router = c.in(1);
  fp32Only(c, {&h, &router});
  const MoeShape m = moeShape(c.op, a.topK, h, router, expert.count);
  Tensor y = c.newResult();
  if (y.numel() != m.N * m.D)
    c.fail("result shape does not match the input");
  CudaBackend &be = backendOf(c);
  const ops::Launch L = be.launch();
  const ops::MoeRouting r = routingBuffers(c, L, m);
  CudaBackend::ScratchHold hold(be);
  check(c, ops::moeRoute(L, ptr(h), ptr(router), r, m.D, a.normalize));
  for (int64_t e = 0; e < m.E; ++e) {
    // Each expert's temporaries are released once its output is added in.
    WorkspaceRelease release;
    Tensor x = Tensor::empty({m.N, m.D});
    check(c, ops::moeGather(be.launch(), ptr(h), r, e, ptr(x), m.D));
    Tensor out = expertCall(c, expert, "forward", e, {x}, m);
    check(c, ops::moeScatter(be.launch(), ptr(out), r, e, true, ptr(y), m.D));
  }
  if (!c.inLayerBackward() && a.auxLoss > 0 && m.N > 0) {
    auto [term, at] = be.reserveAuxTerm();
    check(c, ops::moeAuxLoss(be.launch(), r, a.auxLoss,
                             reinterpret_cast<DevPtr>(at)));
    c.addAuxTerm(term);
  }
  c.setResult(std::move(y));
}

void moeGrad(OpContext &c) {
  noPinnedRouting(c);
  const MoeAttrs &a = c.attrs<MoeAttrs>();
  const bundle::Expert &expert = c.expert();
  const Tensor &h = c.in(0), &router = c.in(1), &dy = c.in(2);
  fp32Only(c, {&h, &router, &dy});
  // The same inputs as the forward pass, so the same choices.
  const MoeShape m = moeShape(c.op, a.topK, h, router, expert.count);
  Tensor dh = c.newResult(0), drouter = c.newResult(1);
  if (dy.numel() != m.N * m.D || dh.numel() != m.N * m.D ||
      drouter.numel() != m.D * m.E)
    c.fail("operand and result shapes do not match");
  CudaBackend &be = backendOf(c);
  const ops::Launch L = be.launch();
  const ops::MoeRouting r = routingBuffers(c, L, m);
  CudaBackend::ScratchHold hold(be);
  check(c, ops::moeRoute(L, ptr(h), ptr(router), r, m.D, a.normalize));
  for (int64_t e = 0; e < m.E; ++e) {
    WorkspaceRelease release;
    Tensor x = Tensor::empty({m.N, m.D});
    check(c, ops::moeGather(be.launch(), ptr(h), r, e, ptr(x), m.D));
    Tensor out = expertCall(c, expert, "forward", e, {x}, m);
    // dy_e = g * dy on the expert's rows (zeros after), dg = <dy_t, out>.
    Tensor dye = Tensor::empty({m.N, m.D});
    check(c, ops::moeGradRows(be.launch(), ptr(dy), ptr(out), r, e, ptr(dye),
                              m.D));
    Tensor dx = expertCall(c, expert, "backward", e, {x, dye}, m);
    check(c, ops::moeScatter(be.launch(), ptr(dx), r, e, false, ptr(dh), m.D));
  }
  check(c, ops::moeRouterGrad(be.launch(), ptr(h), ptr(router), r, m.D,
                              a.normalize, a.auxLoss, ptr(dh), ptr(drouter)));
  c.setResult(std::move(dh), 0);
  c.setResult(std::move(drouter), 1);
}

} // namespace

void addMoeKernels(KernelTable &t) {
  t.set(OpKind::Moe, moe);
  t.set(OpKind::MoeGrad, moeGrad);
}

} // namespace mtc::exec::cudaops
