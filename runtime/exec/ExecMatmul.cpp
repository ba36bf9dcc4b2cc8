//===- ExecMatmul.cpp - Embeddings and matrix products ---------*- C++ -*-===//
//
// Part of mtc. The CPU kernels of embedding, embedding_grad, matmul (2-D
// weights, optional bias; batched products for higher ranks) and weight_grad.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/OpContext.h"

#include "runtime/cpu/Kernels.h"

namespace mtc::exec {

namespace {

void embedding(OpContext &c) {
  const Tensor &ids = c.in(0), &table = c.in(1);
  Tensor y = c.newOutput();
  int64_t V = table.shape[0], D = table.shape[1], bad = 0;
  if (!cpu::embedding(ids.ints(), table.data(), y.data(), ids.numel(), V, D,
                      &bad))
    c.fail("token id " + std::to_string(ids.ints()[bad]) + " at position " +
           std::to_string(bad) + " is outside the vocabulary [0, " +
           std::to_string(V) + ")");
  c.setResult(std::move(y));
}

void embeddingGrad(OpContext &c) {
  const Tensor &ids = c.in(0), &dy = c.in(1);
  Tensor dt = c.newResult();
  cpu::embeddingGradAcc(ids.ints(), dy.data(), dt.data(), ids.numel(),
                        dt.shape[0], dt.shape[1]);
  c.setResult(std::move(dt));
}

void matmul(OpContext &c) {
  const Tensor &a = c.in(0), &w = c.in(1);
  Tensor y = c.newOutput();
  if (w.shape.size() == 2) {
    int64_t K = w.shape[0], N = w.shape[1];
    const float *bias = c.numOperands() > 2 ? c.in(2).data() : nullptr;
    cpu::matmul(a.data(), w.data(), bias, y.data(), a.numel() / K, K, N);
  } else {
    size_t r = w.shape.size();
    int64_t M = a.shape[r - 2], K = a.shape[r - 1], N = w.shape[r - 1];
    cpu::batchedMatmul(a.data(), w.data(), y.data(), product(a.shape, 0, r - 2),
                       M, K, N);
  }
  c.setResult(std::move(y));
}

void weightGrad(OpContext &c) {
  const Tensor &x = c.in(0), &dy = c.in(1);
  Tensor dw = c.newOutput();
  int64_t K = x.shape.back(), N = dy.shape.back();
  cpu::matmulGradWeight(x.data(), dy.data(), dw.data(), x.numel() / K, K, N);
  c.setResult(std::move(dw));
}

} // namespace

void addMatmulKernels(KernelTable &t) {
  t.set(OpKind::Embedding, embedding);
  t.set(OpKind::EmbeddingGrad, embeddingGrad);
  t.set(OpKind::Matmul, matmul);
  t.set(OpKind::WeightGrad, weightGrad);
}

} // namespace mtc::exec
