//===- ExecMovement.cpp - Data movement ops of the executor ----*- C++ -*-===//
//
// Part of mtc. The CPU kernels of reshape (a view), transpose, split,
// concat, slice and pad.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/OpContext.h"

#include "runtime/cpu/Kernels.h"

namespace mtc::exec {

namespace {

void reshape(OpContext &c) {
  Tensor t = c.in(0);
  t.shape = c.resultShape();
  t.lse.reset();
  c.setResult(std::move(t));
}

void transpose(OpContext &c) {
  const Tensor &x = c.in(0);
  if (x.isInt)
    c.fail("transposing integer tensors is not supported");
  Tensor y = c.newOutput();
  cpu::transpose(x.data(), x.shape, c.attrs<TransposeAttrs>().perm, y.data());
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
    cpu::slice(x.data(), y.data(), outer, n, inner, start, start + size);
    start += size;
    c.setResult(std::move(y), r);
  }
}

void concat(OpContext &c) {
  Tensor y = c.newOutput();
  int64_t axis = c.attrs<AxisAttrs>().axis, outer, n, inner;
  split3(y.shape, axis, outer, n, inner);
  std::vector<const float *> parts;
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < c.numOperands(); ++k) {
    parts.push_back(c.in(k).data());
    sizes.push_back(c.in(k).shape[axis]);
  }
  cpu::concat(parts, sizes, y.data(), outer, inner);
  c.setResult(std::move(y));
}

/// slice and pad.
void sliceOrPad(OpContext &c) {
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  bool isSlice = c.kind() == OpKind::Slice;
  const Tensor &whole = isSlice ? x : y;
  const Tensor &part = isSlice ? y : x;
  Range r = resolveRange(c.attrs<RangeAttrs>(), part.shape, whole.shape,
                         c.decoding() ? c.cachePosition() : 0);
  if (!r.error.empty())
    c.fail(r.error);
  int64_t outer, n, inner;
  split3(whole.shape, c.attrs<RangeAttrs>().axis, outer, n, inner);
  if (isSlice)
    cpu::slice(x.data(), y.data(), outer, n, inner, r.start, r.end);
  else
    cpu::pad(x.data(), y.data(), outer, n, inner, r.start, r.end);
  c.setResult(std::move(y));
}

} // namespace

void addMovementKernels(KernelTable &t) {
  t.set(OpKind::Reshape, reshape);
  t.set(OpKind::Transpose, transpose);
  t.set(OpKind::Split, split);
  t.set(OpKind::Concat, concat);
  t.set(OpKind::Slice, sliceOrPad);
  t.set(OpKind::Pad, sliceOrPad);
}

} // namespace mtc::exec
