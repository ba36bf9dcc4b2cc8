//===- ExecElementwise.cpp - Elementwise ops and reductions ----*- C++ -*-===//
//
// Part of mtc. The CPU kernels of constant and zeros, the broadcasting binary
// ops and reduce_to (their gradient), the unary ops and unary_grad, the
// reductions (sum, mean, max, reduce_grad) and softmax(_grad).
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/OpContext.h"

#include "runtime/cpu/Kernels.h"

namespace mtc::exec {

cpu::Binary cpuBinary(BinaryFn fn) {
  switch (fn) {
  case BinaryFn::Add:
    return cpu::Binary::Add;
  case BinaryFn::Sub:
    return cpu::Binary::Sub;
  case BinaryFn::Mul:
    return cpu::Binary::Mul;
  case BinaryFn::Div:
    return cpu::Binary::Div;
  }
  return cpu::Binary::Add;
}

cpu::Reduce cpuReduce(ReduceFn fn) {
  switch (fn) {
  case ReduceFn::Sum:
    return cpu::Reduce::Sum;
  case ReduceFn::Mean:
    return cpu::Reduce::Mean;
  case ReduceFn::Max:
    return cpu::Reduce::Max;
  }
  return cpu::Reduce::Sum;
}

namespace {

void constant(OpContext &c) {
  Tensor t = c.newOutput();
  t.data()[0] = static_cast<float>(c.attrs<ConstantAttrs>().value);
  c.setResult(std::move(t));
}

void zeros(OpContext &c) { c.setResult(c.newResult()); }

void binary(OpContext &c) {
  const Tensor &a = c.in(0), &b = c.in(1);
  Tensor y = c.newOutput();
  cpu::binary(cpuBinary(c.attrs<BinaryAttrs>().fn), a.data(), a.shape, b.data(),
              b.shape, y.data(), y.shape);
  c.setResult(std::move(y));
}

void reduceTo(OpContext &c) {
  const Tensor &x = c.in(0);
  Tensor y = c.newResult();
  cpu::reduceTo(x.data(), x.shape, y.data(), y.shape);
  c.setResult(std::move(y));
}

void unary(OpContext &c) {
  const UnaryAttrs &a = c.attrs<UnaryAttrs>();
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  cpu::unary(a.fn, x.data(), y.data(), x.numel(), static_cast<float>(a.param));
  c.setResult(std::move(y));
}

void unaryGrad(OpContext &c) {
  const UnaryAttrs &a = c.attrs<UnaryAttrs>();
  const Tensor &x = c.in(0), &dy = c.in(1);
  Tensor dx = c.newOutput();
  cpu::unaryGrad(a.fn, x.data(), dy.data(), dx.data(), x.numel(),
                 static_cast<float>(a.param));
  c.setResult(std::move(dx));
}

/// sum, mean, max and reduce_grad.
void reduce(OpContext &c) {
  const ReduceAttrs &a = c.attrs<ReduceAttrs>();
  c.checkDecodable(a.axis);
  const Tensor &x = c.in(0);
  int64_t outer, n, inner;
  split3(x.shape, a.axis, outer, n, inner);
  Tensor y = c.newResult();
  if (c.kind() == OpKind::ReduceGrad)
    cpu::reduceGrad(cpuReduce(a.fn), x.data(), c.in(1).data(), y.data(), outer,
                    n, inner);
  else
    cpu::reduce(cpuReduce(a.fn), x.data(), y.data(), outer, n, inner);
  c.setResult(std::move(y));
}

/// softmax and softmax_grad.
void softmax(OpContext &c) {
  const AxisAttrs &a = c.attrs<AxisAttrs>();
  const Tensor &x = c.in(0);
  c.checkDecodable(a.axis);
  int64_t outer, n, inner;
  split3(x.shape, a.axis, outer, n, inner);
  Tensor y = c.newResult();
  if (c.kind() == OpKind::Softmax)
    cpu::softmax(x.data(), y.data(), outer, n, inner);
  else
    cpu::softmaxGrad(x.data(), c.in(1).data(), y.data(), outer, n, inner);
  c.setResult(std::move(y));
}

} // namespace

void addElementwiseKernels(KernelTable &t) {
  t.set(OpKind::Constant, constant);
  t.set(OpKind::Zeros, zeros);
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div})
    t.set(k, binary);
  t.set(OpKind::ReduceTo, reduceTo);
  for (size_t k = 0; k < bundle::kNumOpKinds; ++k)
    if (bundle::isUnaryFnOp(static_cast<OpKind>(k)))
      t.set(static_cast<OpKind>(k), unary);
  t.set(OpKind::UnaryGrad, unaryGrad);
  for (OpKind k : {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::ReduceGrad})
    t.set(k, reduce);
  t.set(OpKind::Softmax, softmax);
  t.set(OpKind::SoftmaxGrad, softmax);
}

} // namespace mtc::exec
