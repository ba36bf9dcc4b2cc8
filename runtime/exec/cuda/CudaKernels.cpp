//===- CudaKernels.cpp - The CUDA kernel table of the executor --*- C++ -*-===//
//
// Part of mtc. One entry per op kind, the CUDA counterpart of the CPU
// entries in runtime/exec/Exec*.cpp: the same shapes and attributes, with
// the launchers of runtime/cuda/ops (which mirror runtime/cpu/Kernels.h)
// queueing the work on the backend's stream instead of computing on the
// host. Storage is fp32. moe and moe_grad route on the device
// (CudaMoeKernels.cpp). Fused regions have no entry, so a bundle using them
// is refused when the executor is made, naming the op (the CUDA C of fused
// regions is not emitted yet: bundles for this backend are compiled without
// fusion, `mtc train --device cuda|cuda-emu`).
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

//===----------------------------------------------------------------------===//
// Parameters, constants
//===----------------------------------------------------------------------===//

void paramGrad(OpContext &c) {
  ParamSlot &s = c.param();
  const Tensor &g = c.in(0);
  if (static_cast<size_t>(g.numel()) != s.grad.size())
    c.fail("gradient size mismatch for '" + s.name + "'");
  auto dst = reinterpret_cast<DevPtr>(c.paramData(s, true));
  std::vector<int64_t> shape{g.numel()};
  check(c, ops::binary(backendOf(c).launch(), cpu::Binary::Add, dst, shape,
                       ptr(g), shape, dst, shape));
}

void constant(OpContext &c) {
  Tensor t = c.newOutput();
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
  check(c,
        ops::binary(backendOf(c).launch(), cpuBinary(c.attrs<BinaryAttrs>().fn),
                    ptr(a), a.shape, ptr(b), b.shape, ptr(y), y.shape));
  c.setResult(std::move(y));
}

void reduceTo(OpContext &c) {
  const Tensor &x = c.in(0);
  Tensor y = c.newResult();
  check(c,
        ops::reduceTo(backendOf(c).launch(), ptr(x), x.shape, ptr(y), y.shape));
  c.setResult(std::move(y));
}

void unary(OpContext &c) {
  const UnaryAttrs &a = c.attrs<UnaryAttrs>();
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  check(c, ops::unary(backendOf(c).launch(), cpuUnary(a.fn), ptr(x), ptr(y),
                      x.numel(), static_cast<float>(a.param)));
  c.setResult(std::move(y));
}

void unaryGrad(OpContext &c) {
  const UnaryAttrs &a = c.attrs<UnaryAttrs>();
  const Tensor &x = c.in(0), &dy = c.in(1);
  Tensor dx = c.newOutput();
  check(c,
        ops::unaryGrad(backendOf(c).launch(), cpuUnary(a.fn), ptr(x), ptr(dy),
                       ptr(dx), x.numel(), static_cast<float>(a.param)));
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
  if (c.kind() == OpKind::ReduceGrad)
    check(c, ops::reduceGrad(L, cpuReduce(a.fn), ptr(x), ptr(c.in(1)), ptr(y),
                             outer, n, inner));
  else
    check(c, ops::reduce(L, cpuReduce(a.fn), ptr(x), ptr(y), outer, n, inner));
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
  if (c.kind() == OpKind::Softmax)
    check(c, ops::softmax(L, ptr(x), ptr(y), outer, n, inner));
  else
    check(c,
          ops::softmaxGrad(L, ptr(x), ptr(c.in(1)), ptr(y), outer, n, inner));
  c.setResult(std::move(y));
}

void rmsnorm(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1);
  Tensor y = c.newOutput();
  int64_t D = x.shape.back();
  check(c, ops::rmsnorm(backendOf(c).launch(), ptr(x), ptr(w), ptr(y),
                        x.numel() / D, D, static_cast<float>(a.eps),
                        static_cast<float>(a.offset)));
  c.setResult(std::move(y));
}

void rmsnormGrad(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &dy = c.in(2);
  Tensor dx = c.newOutput(0), dw = c.newResult(1);
  int64_t D = x.shape.back();
  check(c, ops::rmsnormGrad(backendOf(c).launch(), ptr(x), ptr(w), ptr(dy),
                            ptr(dx), ptr(dw), x.numel() / D, D,
                            static_cast<float>(a.eps),
                            static_cast<float>(a.offset)));
  c.setResult(std::move(dx), 0);
  c.setResult(std::move(dw), 1);
}

void layernorm(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1);
  DevPtr b = c.numOperands() > 2 ? ptr(c.in(2)) : 0;
  Tensor y = c.newOutput();
  int64_t D = x.shape.back();
  check(c, ops::layernorm(backendOf(c).launch(), ptr(x), ptr(w), b, ptr(y),
                          x.numel() / D, D, static_cast<float>(a.eps)));
  c.setResult(std::move(y));
}

void layernormGrad(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &dy = c.in(2);
  Tensor dx = c.newOutput(0), dw = c.newResult(1), db = c.newResult(2);
  int64_t D = x.shape.back();
  check(c, ops::layernormGrad(backendOf(c).launch(), ptr(x), ptr(w), ptr(dy),
                              ptr(dx), ptr(dw), ptr(db), x.numel() / D, D,
                              static_cast<float>(a.eps)));
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
  check(c, ops::embedding(be.launch(), ptr(ids), ptr(table), ptr(y),
                          ids.numel(), V, D, flag));
  c.setResult(std::move(y));
}

void embeddingGrad(OpContext &c) {
  const Tensor &ids = c.in(0), &dy = c.in(1);
  Tensor dt = c.newResult();
  check(c,
        ops::embeddingGradAcc(backendOf(c).launch(), ptr(ids), ptr(dy), ptr(dt),
                              ids.numel(), dt.shape[0], dt.shape[1]));
  c.setResult(std::move(dt));
}

void rope(OpContext &c) {
  noDecoding(c);
  const RopeAttrs &a = c.attrs<RopeAttrs>();
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  check(c,
        ops::rope(backendOf(c).launch(), ptr(x), ptr(y), x.shape[0], x.shape[1],
                  x.shape[2], x.shape[3], ropeParams(a), a.inverse));
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
                             c.attrs<CrossEntropyAttrs>().ignoreIndex, ptr(y)));
  c.setResult(std::move(y));
}

void crossEntropyGrad(OpContext &c) {
  const Tensor &logits = c.in(0), &targets = c.in(1), &dl = c.in(2);
  Tensor dx = c.newOutput();
  int64_t V = logits.shape.back();
  check(c,
        ops::crossEntropyGrad(backendOf(c).launch(), ptr(logits), ptr(targets),
                              ptr(dl), ptr(dx), logits.numel() / V, V,
                              c.attrs<CrossEntropyAttrs>().ignoreIndex));
  c.setResult(std::move(dx));
}

void linearCrossEntropy(OpContext &c) {
  const LinearCrossEntropyAttrs &a = c.attrs<LinearCrossEntropyAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &targets = c.in(2);
  bool tw = a.transposeWeight;
  int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1];
  Tensor y = c.newOutput();
  check(c, ops::linearCrossEntropy(backendOf(c).launch(), ptr(x), ptr(w), tw,
                                   ptr(targets), x.numel() / D, D, V,
                                   a.ignoreIndex, a.softcap, ptr(y)));
  c.setResult(std::move(y));
}

void linearCrossEntropyGrad(OpContext &c) {
  const LinearCrossEntropyAttrs &a = c.attrs<LinearCrossEntropyAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &targets = c.in(2), &dl = c.in(3);
  bool tw = a.transposeWeight;
  int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1];
  Tensor dx = c.newOutput(0), dw = c.newResult(1);
  check(c, ops::linearCrossEntropyGrad(backendOf(c).launch(), ptr(x), ptr(w),
                                       tw, ptr(targets), ptr(dl), ptr(dx),
                                       ptr(dw), x.numel() / D, D, V,
                                       a.ignoreIndex, a.softcap));
  c.setResult(std::move(dx), 0);
  c.setResult(std::move(dw), 1);
}

} // namespace

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
    for (OpKind k :
         {OpKind::Neg, OpKind::Exp, OpKind::Log, OpKind::Silu, OpKind::Relu,
          OpKind::Sigmoid, OpKind::Tanh, OpKind::Rsqrt, OpKind::Sqrt,
          OpKind::Square, OpKind::Gelu, OpKind::Softcap})
      t.set(k, unary);
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
    t.set(OpKind::CrossEntropy, crossEntropy);
    t.set(OpKind::CrossEntropyGrad, crossEntropyGrad);
    t.set(OpKind::LinearCrossEntropy, linearCrossEntropy);
    t.set(OpKind::LinearCrossEntropyGrad, linearCrossEntropyGrad);
    return t;
  }();
  return table;
}

} // namespace mtc::exec
