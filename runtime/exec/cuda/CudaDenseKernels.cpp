//===- CudaDenseKernels.cpp - CUDA entries: matmul, attention, movement ---===//
//
// Part of mtc. The CUDA kernel-table entries of matmul and weight_grad
// (GEMMs of the backend's engine), attention and its gradient (the flash
// kernels of runtime/cuda/kernels/attention.cu) and the data movement ops,
// mirroring runtime/exec/ExecMatmul.cpp, ExecAttention.cpp and
// ExecMovement.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/cuda/CudaOpContext.h"

#include "runtime/cuda/ops/Attention.h"
#include "runtime/cuda/ops/Matmul.h"
#include "runtime/cuda/ops/Movement.h"

namespace mtc::exec::cudaops {

namespace {

namespace ops = cuda::ops;

void matmul(OpContext &c) {
  const Tensor &a = c.in(0), &w = c.in(1);
  Tensor y = c.newOutput();
  ops::Launch L = backendOf(c).launch();
  // bf16 x bf16 with fp32 accumulation under a bf16 plan.
  ops::DType t = typeOf(y);
  if (w.shape.size() == 2) {
    int64_t K = w.shape[0], N = w.shape[1];
    DevPtr bias = c.numOperands() > 2 ? as(c, L, c.in(2), t) : 0;
    check(c, ops::matmul(L, as(c, L, a, t), as(c, L, w, t), bias, ptr(y),
                         a.numel() / K, K, N, t));
  } else {
    size_t r = w.shape.size();
    int64_t M = a.shape[r - 2], K = a.shape[r - 1], N = w.shape[r - 1];
    check(c, ops::batchedMatmul(L, as(c, L, a, t), as(c, L, w, t), ptr(y),
                                product(a.shape, 0, r - 2), M, K, N, t));
  }
  c.setResult(std::move(y));
}

void weightGrad(OpContext &c) {
  const Tensor &x = c.in(0), &dy = c.in(1);
  Tensor dw = c.newOutput();
  int64_t K = x.shape.back(), N = dy.shape.back();
  // dw is a parameter gradient: f32 from bf16 x and dy under a bf16 plan.
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(x);
  check(c, ops::matmulGradWeight(L, ptr(x), as(c, L, dy, t), ptr(dw),
                                 x.numel() / K, K, N, t, typeOf(dw)));
  c.setResult(std::move(dw));
}

void attention(OpContext &c) {
  noDecoding(c);
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  Tensor o = c.newOutput();
  int64_t b = q.shape[0], s = q.shape[1], hq = q.shape[2], d = q.shape[3];
  if (!o.lse)
    o.lse = Tensor::allocate(b * hq * s, false);
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(o);
  check(c, ops::attention(L, as(c, L, q, t), as(c, L, k, t), as(c, L, v, t),
                          ptr(o), reinterpret_cast<DevPtr>(o.lse.get()), b, s,
                          k.shape[1], hq, k.shape[2], d,
                          attentionParams(c.attrs<AttentionAttrs>()), 0, t));
  c.setResult(std::move(o));
}

void attentionGrad(OpContext &c) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2), &o = c.in(3),
               &dO = c.in(4);
  if (!o.lse)
    c.fail("the attention output lost its log-sum-exp");
  Tensor dq = c.newOutput(0), dk = c.newOutput(1), dv = c.newOutput(2);
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(dq);
  if (typeOf(dk) != t || typeOf(dv) != t)
    c.fail("dq, dk and dv must share a storage type");
  check(c,
        ops::attentionGrad(
            L, as(c, L, q, t), as(c, L, k, t), as(c, L, v, t), as(c, L, o, t),
            reinterpret_cast<DevPtr>(o.lse.get()), as(c, L, dO, t), ptr(dq),
            ptr(dk), ptr(dv), q.shape[0], q.shape[1], q.shape[2], k.shape[2],
            q.shape[3], attentionParams(c.attrs<AttentionAttrs>()), t));
  c.setResult(std::move(dq), 0);
  c.setResult(std::move(dk), 1);
  c.setResult(std::move(dv), 2);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

void transpose(OpContext &c) {
  const Tensor &x = c.in(0);
  if (x.isInt)
    c.fail("transposing integer tensors is not supported");
  Tensor y = c.newOutput();
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(y);
  check(c, ops::transpose(L, as(c, L, x, t), x.shape,
                          c.attrs<TransposeAttrs>().perm, ptr(y), t));
  c.setResult(std::move(y));
}

void split(OpContext &c) {
  const Tensor &x = c.in(0);
  int64_t axis = c.attrs<SplitAttrs>().axis, outer, n, inner;
  split3(x.shape, axis, outer, n, inner);
  int64_t start = 0;
  for (size_t r = 0; r < c.op.results.size(); ++r) {
    Tensor y = c.newOutput(r);
    if (typeOf(y) != typeOf(x))
      c.fail("split keeps its operand's storage type");
    int64_t size = y.shape[axis];
    check(c, ops::slice(backendOf(c).launch(), ptr(x), ptr(y), outer, n, inner,
                        start, start + size, typeOf(x)));
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
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(y);
  for (size_t k = 0; k < c.numOperands(); ++k) {
    parts.push_back(as(c, L, c.in(k), t));
    sizes.push_back(c.in(k).shape[axis]);
  }
  check(c, ops::concat(L, parts, sizes, ptr(y), outer, inner, t));
  c.setResult(std::move(y));
}

/// slice and pad. A range ending at S (a learned position table's first S
/// rows) is resolved as the CPU kernel resolves it (exec::resolveRange).
void sliceOrPad(OpContext &c) {
  const RangeAttrs &a = c.attrs<RangeAttrs>();
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  bool isSlice = c.kind() == OpKind::Slice;
  const Tensor &whole = isSlice ? x : y;
  Range r = resolveRange(a, (isSlice ? y : x).shape, whole.shape,
                         c.decoding() ? c.cachePosition() : 0);
  if (!r.error.empty())
    c.fail(r.error);
  int64_t outer, n, inner;
  split3(whole.shape, a.axis, outer, n, inner);
  ops::Launch L = backendOf(c).launch();
  ops::DType t = typeOf(y);
  DevPtr src = as(c, L, x, t);
  if (isSlice)
    check(c, ops::slice(L, src, ptr(y), outer, n, inner, r.start, r.end, t));
  else
    check(c, ops::pad(L, src, ptr(y), outer, n, inner, r.start, r.end, t));
  c.setResult(std::move(y));
}

} // namespace

void addDenseKernels(KernelTable &t) {
  t.set(OpKind::Matmul, matmul);
  t.set(OpKind::WeightGrad, weightGrad);
  t.set(OpKind::Attention, attention);
  t.set(OpKind::AttentionGrad, attentionGrad);
  t.set(OpKind::Transpose, transpose);
  t.set(OpKind::Split, split);
  t.set(OpKind::Concat, concat);
  t.set(OpKind::Slice, sliceOrPad);
  t.set(OpKind::Pad, sliceOrPad);
}

} // namespace mtc::exec::cudaops
