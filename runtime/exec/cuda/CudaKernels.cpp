//===- CudaKernels.cpp - The CUDA kernel table of the executor --*- C++ -*-===//
//
// Part of mtc. One entry per op kind, the CUDA counterpart of the CPU
// entries in runtime/exec/Exec*.cpp: the same shapes and attributes, with
// the launchers of runtime/cuda/ops (which mirror runtime/cpu/Kernels.h)
// queueing the work on the backend's stream instead of computing on the
// host. Storage is each tensor's (Tensor::dtype: f32, or bf16 under a bf16
// step plan, with f32 parameter gradients and scalars); an operand of
// another type than its kernel takes is converted into the op's scratch
// first (as()). moe and moe_grad route on the device (CudaMoeKernels.cpp).
// Fused regions run the CUDA C the compiler emitted for them
// (CudaFusedKernels.cpp).
// The KV cache of generation is the CPU's (attention and rope fail at run
// time while decoding).
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/cuda/CudaBackend.h"

#include "runtime/cuda/ops/Elementwise.h"
#include "runtime/cuda/ops/Embedding.h"
#include "runtime/cuda/ops/LinearCrossEntropy.h"
#include "runtime/cuda/ops/Loss.h"
#include "runtime/cuda/ops/Norm.h"
#include "runtime/cuda/ops/Reduce.h"
#include "runtime/cuda/ops/Rope.h"
#include "runtime/exec/cuda/CudaOpContext.h"

#include <cstring>

namespace mtc::exec {

namespace {

namespace ops = cuda::ops;
using namespace cudaops;
constexpr ops::DType F32 = ops::DType::F32;

//===----------------------------------------------------------------------===//
// Parameters, constants
//===----------------------------------------------------------------------===//

void paramGrad(OpContext &c) {
  ParamSlot &s = c.param();
  const Tensor &g = c.in(0);
  if (static_cast<size_t>(g.numel()) != s.value.size())
    c.fail("gradient size mismatch for '" + s.name + "'");
  auto dst = reinterpret_cast<DevPtr>(c.paramData(s, true));
  std::vector<int64_t> shape{g.numel()};
  // Gradients accumulate in f32 whatever the plan's precision.
  ops::Launch L = backendOf(c).launch();
  check(c, ops::binary(L, cpu::Binary::Add, dst, shape, as(c, L, g, F32), shape,
                       dst, shape));
}

void constant(OpContext &c) {
  Tensor t = c.newOutput();
  if (t.dtype != DType::F32)
    c.fail("a constant is f32 under every precision");
  float v = static_cast<float>(c.attrs<ConstantAttrs>().value);
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  backendOf(c).fill32(t.data(), bits, t.numel());
  c.setResult(std::move(t));
}

//===----------------------------------------------------------------------===//
// Elementwise, reductions, norms
//===----------------------------------------------------------------------===//

void binary(OpContext &c) {
  const Tensor &a = c.in(0), &b = c.in(1);
  Tensor y = c.newOutput();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(y);
  check(c, ops::binary(L, cpuBinary(c.attrs<BinaryAttrs>().fn), as(c, L, a, t),
                       a.shape, as(c, L, b, t), b.shape, ptr(y), y.shape, t));
  c.setResult(std::move(y));
}

void reduceTo(OpContext &c) {
  const Tensor &x = c.in(0);
  Tensor y = c.newResult();
  if (y.dtype != DType::F32)
    c.fail("reduce_to sums into f32");
  ops::Launch L = backendOf(c).launch();
  check(c, ops::reduceTo(L, as(c, L, x, F32), x.shape, ptr(y), y.shape));
  c.setResult(std::move(y));
}

void unary(OpContext &c) {
  const UnaryAttrs &a = c.attrs<UnaryAttrs>();
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(y);
  check(c, ops::unary(L, a.fn, as(c, L, x, t), ptr(y), x.numel(),
                      static_cast<float>(a.param), t));
  c.setResult(std::move(y));
}

void unaryGrad(OpContext &c) {
  const UnaryAttrs &a = c.attrs<UnaryAttrs>();
  const Tensor &x = c.in(0), &dy = c.in(1);
  Tensor dx = c.newOutput();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(dx);
  check(c, ops::unaryGrad(L, a.fn, as(c, L, x, t), as(c, L, dy, t), ptr(dx),
                          x.numel(), static_cast<float>(a.param), t));
  c.setResult(std::move(dx));
}

/// sum, mean, max and reduce_grad.
void reduce(OpContext &c) {
  const ReduceAttrs &a = c.attrs<ReduceAttrs>();
  const Tensor &x = c.in(0);
  int64_t outer, n, inner;
  split3(x.shape, a.axis, outer, n, inner);
  Tensor y = c.newResult();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(y);
  if (c.kind() == OpKind::ReduceGrad)
    check(c, ops::reduceGrad(L, cpuReduce(a.fn), as(c, L, x, t),
                             as(c, L, c.in(1), t), ptr(y), outer, n, inner, t));
  else
    check(c, ops::reduce(L, cpuReduce(a.fn), as(c, L, x, t), ptr(y), outer, n,
                         inner, t));
  c.setResult(std::move(y));
}

/// softmax and softmax_grad.
void softmax(OpContext &c) {
  const AxisAttrs &a = c.attrs<AxisAttrs>();
  const Tensor &x = c.in(0);
  int64_t outer, n, inner;
  split3(x.shape, a.axis, outer, n, inner);
  Tensor y = c.newOutput();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(y);
  if (c.kind() == OpKind::Softmax)
    check(c, ops::softmax(L, as(c, L, x, t), ptr(y), outer, n, inner, t));
  else
    check(c, ops::softmaxGrad(L, as(c, L, x, t), as(c, L, c.in(1), t), ptr(y),
                              outer, n, inner, t));
  c.setResult(std::move(y));
}

void rmsnorm(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1);
  Tensor y = c.newOutput();
  int64_t D = x.shape.back();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(y);
  check(c, ops::rmsnorm(L, as(c, L, x, t), as(c, L, w, t), ptr(y),
                        x.numel() / D, D, static_cast<float>(a.eps),
                        static_cast<float>(a.offset), t));
  c.setResult(std::move(y));
}

void rmsnormGrad(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &dy = c.in(2);
  Tensor dx = c.newOutput(0), dw = c.newResult(1);
  int64_t D = x.shape.back();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(x);
  // The kernel writes dx in f32 and accumulates dw in f32.
  if (dw.dtype != DType::F32)
    c.fail("a norm's weight gradient is f32 under every precision");
  DevPtr dx32 = typeOf(dx) == F32 ? ptr(dx) : scratchOf(c, L, dx.numel(), F32);
  check(c,
        ops::rmsnormGrad(L, ptr(x), as(c, L, w, t), as(c, L, dy, t), dx32,
                         ptr(dw), x.numel() / D, D, static_cast<float>(a.eps),
                         static_cast<float>(a.offset), t));
  check(c, ops::convert(L, dx32, F32, ptr(dx), typeOf(dx), dx.numel()));
  c.setResult(std::move(dx), 0);
  c.setResult(std::move(dw), 1);
}

void layernorm(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1);
  DevPtr b = c.numOperands() > 2 ? ptr(c.in(2)) : 0;
  Tensor y = c.newOutput();
  int64_t D = x.shape.back();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(y);
  if (b)
    b = as(c, L, c.in(2), t);
  check(c, ops::layernorm(L, as(c, L, x, t), as(c, L, w, t), b, ptr(y),
                          x.numel() / D, D, static_cast<float>(a.eps), t));
  c.setResult(std::move(y));
}

void layernormGrad(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &dy = c.in(2);
  Tensor dx = c.newOutput(0), dw = c.newResult(1), db = c.newResult(2);
  int64_t D = x.shape.back();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(x);
  if (dw.dtype != DType::F32 || db.dtype != DType::F32)
    c.fail("a norm's weight gradient is f32 under every precision");
  DevPtr dx32 = typeOf(dx) == F32 ? ptr(dx) : scratchOf(c, L, dx.numel(), F32);
  check(c, ops::layernormGrad(L, ptr(x), as(c, L, w, t), as(c, L, dy, t), dx32,
                              ptr(dw), ptr(db), x.numel() / D, D,
                              static_cast<float>(a.eps), t));
  check(c, ops::convert(L, dx32, F32, ptr(dx), typeOf(dx), dx.numel()));
  c.setResult(std::move(dx), 0);
  c.setResult(std::move(dw), 1);
  c.setResult(std::move(db), 2);
}

//===----------------------------------------------------------------------===//
// Embeddings, rope
//===----------------------------------------------------------------------===//

void embedding(OpContext &c) {
  const Tensor &ids = c.in(0), &table = c.in(1);
  Tensor y = c.newOutput();
  int64_t V = table.shape[0], D = table.shape[1];
  CudaBackend &be = backendOf(c);
  DevPtr flag = be.tokenCheck((c.op.loc.empty() ? "" : c.op.loc + ": ") +
                                  "error in '" + c.op.name + "': ",
                              ids.ints(), ids.numel(), V);
  ops::Launch L = be.launch();
  ops::DType t = typeOf(y);
  check(c, ops::embedding(L, ptr(ids), as(c, L, table, t), ptr(y), ids.numel(),
                          V, D, flag, t));
  c.setResult(std::move(y));
}

void embeddingGrad(OpContext &c) {
  const Tensor &ids = c.in(0), &dy = c.in(1);
  Tensor dt = c.newResult();
  check(c, ops::embeddingGradAcc(backendOf(c).launch(), ptr(ids), ptr(dy),
                                 ptr(dt), ids.numel(), dt.shape[0], dt.shape[1],
                                 typeOf(dy), typeOf(dt)));
  c.setResult(std::move(dt));
}

void rope(OpContext &c) {
  noDecoding(c);
  const RopeAttrs &a = c.attrs<RopeAttrs>();
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(y);
  check(c, ops::rope(L, as(c, L, x, t), ptr(y), x.shape[0], x.shape[1],
                     x.shape[2], x.shape[3], ropeParams(a), a.inverse, 0, t));
  c.setResult(std::move(y));
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

void crossEntropy(OpContext &c) {
  const Tensor &logits = c.in(0), &targets = c.in(1);
  int64_t V = logits.shape.back();
  Tensor y = c.newOutput();
  check(c, ops::crossEntropy(backendOf(c).launch(), ptr(logits), ptr(targets),
                             logits.numel() / V, V,
                             c.attrs<CrossEntropyAttrs>().ignoreIndex, ptr(y),
                             0, typeOf(logits)));
  c.setResult(std::move(y));
}

void crossEntropyGrad(OpContext &c) {
  const Tensor &logits = c.in(0), &targets = c.in(1), &dl = c.in(2);
  Tensor dx = c.newOutput();
  int64_t V = logits.shape.back();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(dx);
  check(c,
        ops::crossEntropyGrad(L, as(c, L, logits, t), ptr(targets),
                              as(c, L, dl, F32), ptr(dx), logits.numel() / V, V,
                              c.attrs<CrossEntropyAttrs>().ignoreIndex, t));
  c.setResult(std::move(dx));
}

void linearCrossEntropy(OpContext &c) {
  const LinearCrossEntropyAttrs &a = c.attrs<LinearCrossEntropyAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &targets = c.in(2);
  bool tw = a.transposeWeight;
  int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1];
  Tensor y = c.newOutput();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(x);
  check(c, ops::linearCrossEntropy(L, ptr(x), as(c, L, w, t), tw, ptr(targets),
                                   x.numel() / D, D, V, a.ignoreIndex,
                                   a.softcap, ptr(y), 0, t));
  c.setResult(std::move(y));
}

void linearCrossEntropyGrad(OpContext &c) {
  const LinearCrossEntropyAttrs &a = c.attrs<LinearCrossEntropyAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &targets = c.in(2), &dl = c.in(3);
  bool tw = a.transposeWeight;
  int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1];
  Tensor dx = c.newOutput(0), dw = c.newResult(1);
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(dx);
  check(c, ops::linearCrossEntropyGrad(
               L, as(c, L, x, t), as(c, L, w, t), tw, ptr(targets),
               as(c, L, dl, F32), ptr(dx), ptr(dw), x.numel() / D, D, V,
               a.ignoreIndex, a.softcap, t, typeOf(dw)));
  c.setResult(std::move(dx), 0);
  c.setResult(std::move(dw), 1);
}

} // namespace

namespace cudaops {

DevPtr scratchOf(OpContext &c, const ops::Launch &L, int64_t n,
                 ops::DType type) {
  Expected<DevPtr> p = L.scratch(n * ops::dtypeBytes(type));
  if (!p)
    c.fail(p.message());
  return *p;
}

DevPtr as(OpContext &c, const ops::Launch &L, const Tensor &t,
          ops::DType want) {
  if (t.isInt || typeOf(t) == want)
    return ptr(t);
  DevPtr p = scratchOf(c, L, t.numel(), want);
  check(c, ops::convert(L, ptr(t), typeOf(t), p, want, t.numel()));
  return p;
}

} // namespace cudaops

const KernelTable &cudaKernelTable() {
  static const KernelTable table = [] {
    KernelTable t("CUDA");
    // What touches no values is the CPU's entry (views, layer and region
    // calls, zero-filled results through the backend).
    const KernelTable &cpu = cpuKernelTable();
    for (OpKind k : {OpKind::ParamRef, OpKind::ApplyLayers,
                     OpKind::ApplyLayersGrad, OpKind::Reshape, OpKind::Zeros})
      t.set(k, cpu[k]);
    t.set(OpKind::ParamGrad, paramGrad);
    t.set(OpKind::Constant, constant);
    for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div})
      t.set(k, binary);
    t.set(OpKind::ReduceTo, reduceTo);
    for (size_t k = 0; k < bundle::kNumOpKinds; ++k)
      if (bundle::isUnaryFnOp(static_cast<OpKind>(k)))
        t.set(static_cast<OpKind>(k), unary);
    t.set(OpKind::UnaryGrad, unaryGrad);
    for (OpKind k :
         {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::ReduceGrad})
      t.set(k, reduce);
    t.set(OpKind::Softmax, softmax);
    t.set(OpKind::SoftmaxGrad, softmax);
    t.set(OpKind::RmsNorm, rmsnorm);
    t.set(OpKind::RmsNormGrad, rmsnormGrad);
    t.set(OpKind::LayerNorm, layernorm);
    t.set(OpKind::LayerNormGrad, layernormGrad);
    t.set(OpKind::Embedding, embedding);
    t.set(OpKind::EmbeddingGrad, embeddingGrad);
    t.set(OpKind::Rope, rope);
    addDenseKernels(t);
    cudaops::addMoeKernels(t);
    cudaops::addFusedKernels(t);
    t.set(OpKind::CrossEntropy, crossEntropy);
    t.set(OpKind::CrossEntropyGrad, crossEntropyGrad);
    t.set(OpKind::LinearCrossEntropy, linearCrossEntropy);
    t.set(OpKind::LinearCrossEntropyGrad, linearCrossEntropyGrad);
    return t;
  }();
  return table;
}

} // namespace mtc::exec
