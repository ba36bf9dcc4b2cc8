//===- ExecLoss.cpp - Loss ops of the executor -----------------*- C++ -*-===//
//
// Part of mtc. The CPU kernels of cross_entropy, linear_cross_entropy (the
// head matmul fused into the loss, chunked over the vocabulary) and their
// gradients. The loss ops also hand the executor the loss in double
// precision (Executor::totalLoss).
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/OpContext.h"

#include "runtime/cpu/Kernels.h"

namespace mtc::exec {

namespace {

void crossEntropy(OpContext &c) {
  const Tensor &logits = c.in(0), &targets = c.in(1);
  int64_t V = logits.shape.back(), count = 0;
  double loss =
      cpu::crossEntropy(logits.data(), targets.ints(), logits.numel() / V, V,
                        c.attrs<CrossEntropyAttrs>().ignoreIndex, &count);
  c.setLoss(loss);
  Tensor y = c.newOutput();
  y.data()[0] = static_cast<float>(loss);
  c.setResult(std::move(y));
}

void crossEntropyGrad(OpContext &c) {
  const Tensor &logits = c.in(0), &targets = c.in(1), &dl = c.in(2);
  Tensor dx = c.newOutput();
  int64_t V = logits.shape.back();
  cpu::crossEntropyGrad(logits.data(), targets.ints(), dl.data()[0], dx.data(),
                        logits.numel() / V, V,
                        c.attrs<CrossEntropyAttrs>().ignoreIndex);
  c.setResult(std::move(dx));
}

void linearCrossEntropy(OpContext &c) {
  const LinearCrossEntropyAttrs &a = c.attrs<LinearCrossEntropyAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &targets = c.in(2);
  bool tw = a.transposeWeight;
  int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1], count = 0;
  double loss = cpu::linearCrossEntropy(x.data(), w.data(), tw, targets.ints(),
                                        x.numel() / D, D, V, a.ignoreIndex,
                                        a.softcap, &count);
  c.setLoss(loss);
  Tensor y = c.newOutput();
  y.data()[0] = static_cast<float>(loss);
  c.setResult(std::move(y));
}

void linearCrossEntropyGrad(OpContext &c) {
  const LinearCrossEntropyAttrs &a = c.attrs<LinearCrossEntropyAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &targets = c.in(2), &dl = c.in(3);
  bool tw = a.transposeWeight;
  int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1];
  Tensor dx = c.newOutput(0), dw = c.newResult(1);
  cpu::linearCrossEntropyGrad(x.data(), w.data(), tw, targets.ints(),
                              dl.data()[0], dx.data(), dw.data(), x.numel() / D,
                              D, V, a.ignoreIndex, a.softcap);
  c.setResult(std::move(dx), 0);
  c.setResult(std::move(dw), 1);
}

} // namespace

void addLossKernels(KernelTable &t) {
  t.set(OpKind::CrossEntropy, crossEntropy);
  t.set(OpKind::CrossEntropyGrad, crossEntropyGrad);
  t.set(OpKind::LinearCrossEntropy, linearCrossEntropy);
  t.set(OpKind::LinearCrossEntropyGrad, linearCrossEntropyGrad);
}

} // namespace mtc::exec
