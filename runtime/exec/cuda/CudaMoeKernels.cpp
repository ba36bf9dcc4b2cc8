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
// Under a bf16 plan (docs/cuda.md, "Precisions") the rows the experts get
// are stored as their functions' arguments are (bf16), the routing is f32
// (the router GEMM on h and the router widened to f32, exact), and the sums
// over experts (y, dh) and the router gradient accumulate in f32 scratch,
// rounded once into their results.
//
// Routing pins (gradient checks) and the routing fingerprint need the
// choices on the host: pinned routing is refused here (it runs on the CPU
// backend), and the fingerprint stays 0.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/ops/Elementwise.h"
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

/// How argument \p i of expert function \p fn is stored (the plan's
/// bundle::valueStorage: bf16 rows under a bf16 plan): the rows the op
/// builds for it.
DType argStorage(OpContext &c, const bundle::Expert &expert,
                 const std::string &fn, size_t i) {
  auto it = expert.functions.find(fn);
  if (it == expert.functions.end() || i >= it->second.args.size())
    c.fail("expert '" + expert.name + "' has no " + fn +
           " function taking argument " + std::to_string(i));
  return c.storageOf(it->second, it->second.args[i]);
}

ops::DType launchType(DType t) {
  return t == DType::BF16 ? ops::DType::BF16 : ops::DType::F32;
}

/// An f32 accumulator for result \p t, zero: \p t itself when it is f32
/// (newResult zeroed it), else the op's scratch (\p L, before the
/// ScratchHold), rounded into \p t once by storeAccumulator. The sums over
/// experts round once, not once per expert.
DevPtr accumulatorFor(OpContext &c, const ops::Launch &L, const Tensor &t) {
  if (typeOf(t) == ops::DType::F32)
    return ptr(t);
  DevPtr p = scratchOf(c, L, t.numel(), ops::DType::F32);
  check(c, L.zero(p, t.numel() * 4));
  return p;
}

void storeAccumulator(OpContext &c, DevPtr acc, Tensor &t) {
  if (acc != ptr(t))
    check(c, ops::convert(backendOf(c).launch(), acc, ops::DType::F32, ptr(t),
                          typeOf(t), t.numel()));
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
  const MoeShape m = moeShape(c.op, a.topK, h, router, expert.count);
  Tensor y = c.newResult();
  if (y.numel() != m.N * m.D)
    c.fail("result shape does not match the input");
  CudaBackend &be = backendOf(c);
  const ops::Launch L = be.launch();
  const ops::MoeRouting r = routingBuffers(c, L, m);
  // The router GEMM runs in f32 on h and the router widened from their
  // storage (exact for bf16), accumulating into the f32 logits; the rows
  // go to the experts as their forward function stores them.
  const DType xT = argStorage(c, expert, "forward", 0);
  const ops::DType rowT = launchType(xT), F32 = ops::DType::F32;
  const DevPtr h32 = as(c, L, h, F32), router32 = as(c, L, router, F32),
               hRows = as(c, L, h, rowT), y32 = accumulatorFor(c, L, y);
  CudaBackend::ScratchHold hold(be);
  check(c, ops::moeRoute(L, h32, router32, r, m.D, a.normalize));
  for (int64_t e = 0; e < m.E; ++e) {
    // Each expert's temporaries are released once its output is added in.
    WorkspaceRelease release;
    Tensor x = Tensor::empty({m.N, m.D}, xT);
    check(c, ops::moeGather(be.launch(), hRows, r, e, ptr(x), m.D, rowT));
    Tensor out = expertCall(c, expert, "forward", e, {x}, m);
    const ops::Launch Le = be.launch();
    check(c, ops::moeScatter(Le, as(c, Le, out, F32), r, e, true, y32, m.D));
  }
  storeAccumulator(c, y32, y);
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
  // The same inputs as the forward pass, so the same choices.
  const MoeShape m = moeShape(c.op, a.topK, h, router, expert.count);
  Tensor dh = c.newResult(0), drouter = c.newResult(1);
  if (dy.numel() != m.N * m.D || dh.numel() != m.N * m.D ||
      drouter.numel() != m.D * m.E)
    c.fail("operand and result shapes do not match");
  CudaBackend &be = backendOf(c);
  const ops::Launch L = be.launch();
  const ops::MoeRouting r = routingBuffers(c, L, m);
  // As moe; the backward function takes the forward's rows (x) and the
  // output gradient's rows (dye) as it stores them. dh and the router
  // gradient accumulate in f32 (drouter is a parameter gradient: f32 under
  // every precision).
  const DType xT = argStorage(c, expert, "forward", 0),
              dyeT = argStorage(c, expert, "backward", 1);
  if (argStorage(c, expert, "backward", 0) != xT)
    c.fail("expert '" + expert.name +
           "': its forward and backward functions store their input rows "
           "differently");
  const ops::DType rowT = launchType(xT), dyRowT = launchType(dyeT),
                   F32 = ops::DType::F32;
  const DevPtr h32 = as(c, L, h, F32), router32 = as(c, L, router, F32),
               hRows = as(c, L, h, rowT), dyRows = as(c, L, dy, dyRowT),
               dh32 = accumulatorFor(c, L, dh),
               drouter32 = accumulatorFor(c, L, drouter);
  CudaBackend::ScratchHold hold(be);
  check(c, ops::moeRoute(L, h32, router32, r, m.D, a.normalize));
  for (int64_t e = 0; e < m.E; ++e) {
    WorkspaceRelease release;
    Tensor x = Tensor::empty({m.N, m.D}, xT);
    check(c, ops::moeGather(be.launch(), hRows, r, e, ptr(x), m.D, rowT));
    Tensor out = expertCall(c, expert, "forward", e, {x}, m);
    // dy_e = g * dy on the expert's rows (zeros after), dg = <dy_t, out>.
    Tensor dye = Tensor::empty({m.N, m.D}, dyeT);
    const ops::Launch Lg = be.launch();
    check(c, ops::moeGradRows(Lg, dyRows, as(c, Lg, out, dyRowT), r, e,
                              ptr(dye), m.D, dyRowT));
    Tensor dx = expertCall(c, expert, "backward", e, {x, dye}, m);
    const ops::Launch Ls = be.launch();
    check(c, ops::moeScatter(Ls, as(c, Ls, dx, F32), r, e, false, dh32, m.D));
  }
  check(c, ops::moeRouterGrad(be.launch(), h32, router32, r, m.D, a.normalize,
                              a.auxLoss, dh32, drouter32));
  storeAccumulator(c, dh32, dh);
  storeAccumulator(c, drouter32, drouter);
  c.setResult(std::move(dh), 0);
  c.setResult(std::move(drouter), 1);
}

} // namespace

void addMoeKernels(KernelTable &t) {
  t.set(OpKind::Moe, moe);
  t.set(OpKind::MoeGrad, moeGrad);
}

} // namespace mtc::exec::cudaops
