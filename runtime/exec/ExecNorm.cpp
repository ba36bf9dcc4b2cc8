//===- ExecNorm.cpp - Normalisation ops of the executor --------*- C++ -*-===//
//
// Part of mtc. The CPU kernels of rmsnorm, layernorm and their gradients
// (rows over the last axis).
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/OpContext.h"

#include "runtime/cpu/Kernels.h"

namespace mtc::exec {

namespace {

void rmsnorm(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1);
  Tensor y = c.newOutput();
  int64_t D = x.shape.back();
  cpu::rmsnorm(x.data(), w.data(), y.data(), x.numel() / D, D,
               static_cast<float>(a.eps), static_cast<float>(a.offset));
  c.setResult(std::move(y));
}

void rmsnormGrad(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &dy = c.in(2);
  Tensor dx = c.newOutput(0), dw = c.newResult(1);
  int64_t D = x.shape.back();
  cpu::rmsnormGrad(x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                   x.numel() / D, D, static_cast<float>(a.eps),
                   static_cast<float>(a.offset));
  c.setResult(std::move(dx), 0);
  c.setResult(std::move(dw), 1);
}

void layernorm(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1);
  const float *b = c.numOperands() > 2 ? c.in(2).data() : nullptr;
  Tensor y = c.newOutput();
  int64_t D = x.shape.back();
  cpu::layernorm(x.data(), w.data(), b, y.data(), x.numel() / D, D,
                 static_cast<float>(a.eps));
  c.setResult(std::move(y));
}

void layernormGrad(OpContext &c) {
  const NormAttrs &a = c.attrs<NormAttrs>();
  const Tensor &x = c.in(0), &w = c.in(1), &dy = c.in(2);
  Tensor dx = c.newOutput(0), dw = c.newResult(1), db = c.newResult(2);
  int64_t D = x.shape.back();
  cpu::layernormGrad(x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                     db.data(), x.numel() / D, D, static_cast<float>(a.eps));
  c.setResult(std::move(dx), 0);
  c.setResult(std::move(dw), 1);
  c.setResult(std::move(db), 2);
}

} // namespace

void addNormKernels(KernelTable &t) {
  t.set(OpKind::RmsNorm, rmsnorm);
  t.set(OpKind::RmsNormGrad, rmsnormGrad);
  t.set(OpKind::LayerNorm, layernorm);
  t.set(OpKind::LayerNormGrad, layernormGrad);
}

} // namespace mtc::exec
