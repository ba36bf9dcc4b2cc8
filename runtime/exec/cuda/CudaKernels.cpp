//===- CudaKernels.cpp - The CUDA kernel table of the executor --*- C++ -*-===//
//
// Part of mtc. One entry per op kind, the CUDA counterpart of the CPU
// entries in runtime/exec/Exec*.cpp: the same shapes and attributes, with
// the launchers of runtime/cuda/ops (which mirror runtime/cpu/Kernels.h)
// queueing the work on the backend's stream instead of computing on the
// host. Storage is fp32. The ops that need the host in the middle of a step
// have no entry, so a bundle using them is refused when the executor is
// made, naming the op: moe and moe_grad (routing on the host); so are fused
// regions (the CUDA C of fused regions is not emitted yet: bundles for this
// backend are compiled without fusion, `mtc train --device cuda|cuda-emu`).
// The KV cache of generation is the CPU's (attention and rope fail at run
// time while decoding).
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/cuda/CudaBackend.h"

#include "runtime/cuda/ops/Attention.h"
#include "runtime/cuda/ops/Elementwise.h"
#include "runtime/cuda/ops/Embedding.h"
#include "runtime/cuda/ops/LinearCrossEntropy.h"
#include "runtime/cuda/ops/Loss.h"
#include "runtime/cuda/ops/Matmul.h"
#include "runtime/cuda/ops/Movement.h"
#include "runtime/cuda/ops/Norm.h"
#include "runtime/cuda/ops/Reduce.h"
#include "runtime/cuda/ops/Rope.h"
#include "runtime/exec/OpContext.h"

#include <cstring>

namespace mtc::exec {

namespace {

namespace ops = cuda::ops;
using ops::DevPtr;

CudaBackend &cudaOf(OpContext &c) {
  return static_cast<CudaBackend &>(c.backend());
}

DevPtr ptr(const Tensor &t) {
  return t.isInt ? reinterpret_cast<DevPtr>(t.i.get())
                 : reinterpret_cast<DevPtr>(t.f.get());
}

void check(OpContext &c, const Status &st) {
  if (!st)
    c.fail(st.message());
}

void noDecoding(OpContext &c) {
  if (c.decoding())
    c.fail("KV-cache decoding runs on the CPU backend only");
}

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
  check(c, ops::binary(cudaOf(c).launch(), cpu::Binary::Add, dst, shape,
                       ptr(g), shape, dst, shape));
}

void constant(OpContext &c) {
  Tensor t = c.newOutput();
  float v = static_cast<float>(c.attrs<ConstantAttrs>().value);
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  cudaOf(c).fill32(t.data(), bits, t.numel());
  c.setResult(std::move(t));
}

//===----------------------------------------------------------------------===//
// Elementwise, reductions, norms
//===----------------------------------------------------------------------===//

void binary(OpContext &c) {
  const Tensor &a = c.in(0), &b = c.in(1);
  Tensor y = c.newOutput();
  check(c, ops::binary(cudaOf(c).launch(),
                       cpuBinary(c.attrs<BinaryAttrs>().fn), ptr(a), a.shape,
                       ptr(b), b.shape, ptr(y), y.shape));
  c.setResult(std::move(y));
}

void reduceTo(OpContext &c) {
  const Tensor &x = c.in(0);
  Tensor y = c.newResult();
  check(c, ops::reduceTo(cudaOf(c).launch(), ptr(x), x.shape, ptr(y),
                         y.shape));
  c.setResult(std::move(y));
}

void unary(OpContext &c) {
  const UnaryAttrs &a = c.attrs<UnaryAttrs>();
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  check(c, ops::unary(cudaOf(c).launch(), cpuUnary(a.fn), ptr(x), ptr(y),
                      x.numel(), static_cast<float>(a.param)));
  c.setResult(std::move(y));
}

void unaryGrad(OpContext &c) {
  const UnaryAttrs &a = c.attrs<UnaryAttrs>();
  const Tensor &x = c.in(0), &dy = c.in(1);
  Tensor dx = c.newOutput();
  check(c, ops::unaryGrad(cudaOf(c).launch(), cpuUnary(a.fn), ptr(x),
                          ptr(dy), ptr(dx), x.numel(),
                          static_cast<float>(a.param)));
  c.setResult(std::move(dx));
}

/// sum, mean, max and reduce_grad.
void reduce(OpContext &c) {
  const ReduceAttrs &a = c.attrs<ReduceAttrs>();
  const Tensor &x = c.in(0);
  int64_t outer, n, inner;
  split3(x.shape, a.axis, outer, n, inner);
  Tensor y = c.newResult();
  ops::Launch L = cudaOf(c).launch();
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
  ops::Launch L = cudaOf(c).launch();
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
  check(c, ops::rmsnorm(cudaOf(c).launch(), ptr(x), ptr(w), ptr(y),
                        x.numel() / D, D, static_cast<float>(a.eps),
                        static_cast<float>(a.offset)));
  c.setResult(std::move(y));
}

void rmsnormGrad(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &dy = c.in(2);
  Tensor dx = c.newOutput(0), dw = c.newResult(1);
  int64_t D = x.shape.back();
  check(c, ops::rmsnormGrad(cudaOf(c).launch(), ptr(x), ptr(w), ptr(dy),
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
  check(c, ops::layernorm(cudaOf(c).launch(), ptr(x), ptr(w), b, ptr(y),
                          x.numel() / D, D, static_cast<float>(a.eps)));
  c.setResult(std::move(y));
}

void layernormGrad(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &dy = c.in(2);
  Tensor dx = c.newOutput(0), dw = c.newResult(1), db = c.newResult(2);
  int64_t D = x.shape.back();
  check(c, ops::layernormGrad(cudaOf(c).launch(), ptr(x), ptr(w), ptr(dy),
                              ptr(dx), ptr(dw), ptr(db), x.numel() / D, D,
                              static_cast<float>(a.eps)));
  c.setResult(std::move(dx), 0);
  c.setResult(std::move(dw), 1);
  c.setResult(std::move(db), 2);
}

//===----------------------------------------------------------------------===//
// Matrix products, embeddings, attention
//===----------------------------------------------------------------------===//

void embedding(OpContext &c) {
  const Tensor &ids = c.in(0), &table = c.in(1);
  Tensor y = c.newOutput();
  int64_t V = table.shape[0], D = table.shape[1];
  CudaBackend &be = cudaOf(c);
  DevPtr flag =
      be.tokenCheck((c.op.loc.empty() ? "" : c.op.loc + ": ") +
                        "error in '" + c.op.name + "': ",
                    ids.ints(), ids.numel(), V);
  check(c, ops::embedding(be.launch(), ptr(ids), ptr(table), ptr(y),
                          ids.numel(), V, D, flag));
  c.setResult(std::move(y));
}

void embeddingGrad(OpContext &c) {
  const Tensor &ids = c.in(0), &dy = c.in(1);
  Tensor dt = c.newResult();
  check(c, ops::embeddingGradAcc(cudaOf(c).launch(), ptr(ids), ptr(dy),
                                 ptr(dt), ids.numel(), dt.shape[0],
                                 dt.shape[1]));
  c.setResult(std::move(dt));
}

void matmul(OpContext &c) {
  const Tensor &a = c.in(0), &w = c.in(1);
  Tensor y = c.newOutput();
  ops::Launch L = cudaOf(c).launch();
  if (w.shape.size() == 2) {
    int64_t K = w.shape[0], N = w.shape[1];
    DevPtr bias = c.numOperands() > 2 ? ptr(c.in(2)) : 0;
    check(c, ops::matmul(L, ptr(a), ptr(w), bias, ptr(y), a.numel() / K, K, N));
  } else {
    size_t r = w.shape.size();
    int64_t M = a.shape[r - 2], K = a.shape[r - 1], N = w.shape[r - 1];
    check(c, ops::batchedMatmul(L, ptr(a), ptr(w), ptr(y),
                                product(a.shape, 0, r - 2), M, K, N));
  }
  c.setResult(std::move(y));
}

void weightGrad(OpContext &c) {
  const Tensor &x = c.in(0), &dy = c.in(1);
  Tensor dw = c.newOutput();
  int64_t K = x.shape.back(), N = dy.shape.back();
  check(c, ops::matmulGradWeight(cudaOf(c).launch(), ptr(x), ptr(dy), ptr(dw),
                                 x.numel() / K, K, N));
  c.setResult(std::move(dw));
}

void rope(OpContext &c) {
  noDecoding(c);
  const RopeAttrs &a = c.attrs<RopeAttrs>();
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  check(c, ops::rope(cudaOf(c).launch(), ptr(x), ptr(y), x.shape[0],
                     x.shape[1], x.shape[2], x.shape[3], ropeParams(a),
                     a.inverse));
  c.setResult(std::move(y));
}

void attention(OpContext &c) {
  noDecoding(c);
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  Tensor o = c.newOutput();
  int64_t b = q.shape[0], s = q.shape[1], hq = q.shape[2], d = q.shape[3];
  if (!o.lse)
    o.lse = Tensor::allocate(b * hq * s, false);
  check(c, ops::attention(cudaOf(c).launch(), ptr(q), ptr(k), ptr(v), ptr(o),
                          reinterpret_cast<DevPtr>(o.lse.get()), b, s,
                          k.shape[1], hq, k.shape[2], d,
                          attentionParams(c.attrs<AttentionAttrs>())));
  c.setResult(std::move(o));
}

void attentionGrad(OpContext &c) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2), &o = c.in(3),
               &dO = c.in(4);
  if (!o.lse)
    c.fail("the attention output lost its log-sum-exp");
  Tensor dq = c.newOutput(0), dk = c.newOutput(1), dv = c.newOutput(2);
  check(c, ops::attentionGrad(
               cudaOf(c).launch(), ptr(q), ptr(k), ptr(v), ptr(o),
               reinterpret_cast<DevPtr>(o.lse.get()), ptr(dO), ptr(dq),
               ptr(dk), ptr(dv), q.shape[0], q.shape[1], q.shape[2],
               k.shape[2], q.shape[3],
               attentionParams(c.attrs<AttentionAttrs>())));
  c.setResult(std::move(dq), 0);
  c.setResult(std::move(dk), 1);
  c.setResult(std::move(dv), 2);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

void crossEntropy(OpContext &c) {
  const Tensor &logits = c.in(0), &targets = c.in(1);
  int64_t V = logits.shape.back();
  Tensor y = c.newOutput();
  check(c, ops::crossEntropy(cudaOf(c).launch(), ptr(logits), ptr(targets),
                             logits.numel() / V, V,
                             c.attrs<CrossEntropyAttrs>().ignoreIndex,
                             ptr(y)));
  c.setResult(std::move(y));
}

void crossEntropyGrad(OpContext &c) {
  const Tensor &logits = c.in(0), &targets = c.in(1), &dl = c.in(2);
  Tensor dx = c.newOutput();
  int64_t V = logits.shape.back();
  check(c, ops::crossEntropyGrad(cudaOf(c).launch(), ptr(logits),
                                 ptr(targets), ptr(dl), ptr(dx),
                                 logits.numel() / V, V,
                                 c.attrs<CrossEntropyAttrs>().ignoreIndex));
  c.setResult(std::move(dx));
}

void linearCrossEntropy(OpContext &c) {
  const LinearCrossEntropyAttrs &a = c.attrs<LinearCrossEntropyAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &targets = c.in(2);
  bool tw = a.transposeWeight;
  int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1];
  Tensor y = c.newOutput();
  check(c, ops::linearCrossEntropy(cudaOf(c).launch(), ptr(x), ptr(w), tw,
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
  check(c, ops::linearCrossEntropyGrad(
               cudaOf(c).launch(), ptr(x), ptr(w), tw, ptr(targets), ptr(dl),
               ptr(dx), ptr(dw), x.numel() / D, D, V, a.ignoreIndex,
               a.softcap));
  c.setResult(std::move(dx), 0);
  c.setResult(std::move(dw), 1);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

void transpose(OpContext &c) {
  const Tensor &x = c.in(0);
  if (x.isInt)
    c.fail("transposing integer tensors is not supported");
  Tensor y = c.newOutput();
  check(c, ops::transpose(cudaOf(c).launch(), ptr(x), x.shape,
                          c.attrs<TransposeAttrs>().perm, ptr(y)));
  c.setResult(std::move(y));
}

void split(OpContext &c) {
  const Tensor &x = c.in(0);
  int64_t axis = c.attrs<SplitAttrs>().axis, outer, n, inner;
  split3(x.shape, axis, outer, n, inner);
  int64_t start = 0;
  for (size_t r = 0; r < c.op.results.size(); ++r) {
    Tensor y = c.newOutput(r);
    int64_t size = y.shape[axis];
    check(c, ops::slice(cudaOf(c).launch(), ptr(x), ptr(y), outer, n, inner,
                        start, start + size));
    start += size;
    c.setResult(std::move(y), r);
  }
}

void concat(OpContext &c) {
  Tensor y = c.newOutput();
  int64_t axis = c.attrs<AxisAttrs>().axis, outer, n, inner;
  split3(y.shape, axis, outer, n, inner);
  std::vector<DevPtr> parts;
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < c.numOperands(); ++k) {
    parts.push_back(ptr(c.in(k)));
    sizes.push_back(c.in(k).shape[axis]);
  }
  check(c, ops::concat(cudaOf(c).launch(), parts, sizes, ptr(y), outer, inner));
  c.setResult(std::move(y));
}

/// slice and pad.
void sliceOrPad(OpContext &c) {
  const RangeAttrs &a = c.attrs<RangeAttrs>();
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  int64_t outer, n, inner;
  ops::Launch L = cudaOf(c).launch();
  if (c.kind() == OpKind::Slice) {
    split3(x.shape, a.axis, outer, n, inner);
    check(c, ops::slice(L, ptr(x), ptr(y), outer, n, inner, a.start, a.end));
  } else {
    split3(y.shape, a.axis, outer, n, inner);
    check(c, ops::pad(L, ptr(x), ptr(y), outer, n, inner, a.start, a.end));
  }
  c.setResult(std::move(y));
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
    for (OpKind k : {OpKind::Neg, OpKind::Exp, OpKind::Log, OpKind::Silu,
                     OpKind::Relu, OpKind::Sigmoid, OpKind::Tanh, OpKind::Rsqrt,
                     OpKind::Sqrt, OpKind::Square, OpKind::Gelu, OpKind::Softcap})
      t.set(k, unary);
    t.set(OpKind::UnaryGrad, unaryGrad);
    for (OpKind k : {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::ReduceGrad})
      t.set(k, reduce);
    t.set(OpKind::Softmax, softmax);
    t.set(OpKind::SoftmaxGrad, softmax);
    t.set(OpKind::RmsNorm, rmsnorm);
    t.set(OpKind::RmsNormGrad, rmsnormGrad);
    t.set(OpKind::LayerNorm, layernorm);
    t.set(OpKind::LayerNormGrad, layernormGrad);
    t.set(OpKind::Embedding, embedding);
    t.set(OpKind::EmbeddingGrad, embeddingGrad);
    t.set(OpKind::Matmul, matmul);
    t.set(OpKind::WeightGrad, weightGrad);
    t.set(OpKind::Rope, rope);
    t.set(OpKind::Attention, attention);
    t.set(OpKind::AttentionGrad, attentionGrad);
    t.set(OpKind::CrossEntropy, crossEntropy);
    t.set(OpKind::CrossEntropyGrad, crossEntropyGrad);
    t.set(OpKind::LinearCrossEntropy, linearCrossEntropy);
    t.set(OpKind::LinearCrossEntropyGrad, linearCrossEntropyGrad);
    t.set(OpKind::Transpose, transpose);
    t.set(OpKind::Split, split);
    t.set(OpKind::Concat, concat);
    t.set(OpKind::Slice, sliceOrPad);
    t.set(OpKind::Pad, sliceOrPad);
    return t;
  }();
  return table;
}

} // namespace mtc::exec
