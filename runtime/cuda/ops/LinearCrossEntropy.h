//===- LinearCrossEntropy.h - LM head + cross-entropy -----------*- C++ -*-===//
//
// Part of mtc. The launchers of cpu::linearCrossEntropy,
// cpu::linearCrossEntropyGrad and cpu::linearLogits (runtime/cpu/Kernels.h)
// with device pointers: the [n, V] logits never exist at once. Rows are
// processed in chunks of linearCrossEntropyChunkRows(V, chunkBytes); a
// chunk's logits are one GEMM (L.gemmOp) into L.scratch, then the loss.cu
// kernels run on them:
//
//   loss: per-row losses of every chunk into one array over all rows, then
//         one cross_entropy_mean (double sums in a fixed order);
//   grad: the count of counted rows first (on the device), then per chunk:
//         the logits again, cross_entropy_grad in place (scale *dloss /
//         count read on the device), dx_chunk = dlogits x op(W)^T, and
//         dW += by a GEMM with beta = 1, chunk after chunk in row order
//         (deterministic).
//
// x, W and dx are of `dtype` (the logits chunk too: bf16 logits under bf16);
// dW accumulates in `dwType`. softcap > 0 applies cap * tanh(l / cap) to
// the logits. Launchers never synchronise; dloss and the loss stay in
// device memory (see Loss.h).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_LINEARCROSSENTROPY_H
#define MTC_RUNTIME_CUDA_OPS_LINEARCROSSENTROPY_H

#include "runtime/cuda/ops/Launch.h"

namespace mtc::cuda::ops {

/// The default bound on one chunk's logits: 64 MiB.
constexpr int64_t kLinearCrossEntropyChunkBytes = int64_t(64) << 20;

/// Rows per chunk for a vocabulary of \p V with logits of \p elemBytes:
/// as many as fit in \p chunkBytes, at least 1.
int64_t linearCrossEntropyChunkRows(int64_t V, int64_t elemBytes,
                                    int64_t chunkBytes);

/// *lossOut (device float) = the mean cross-entropy of softcap?(x @ W) over
/// the rows whose target != ignoreIndex (0 when none); *count (device int32;
/// 0: not wanted) = their number. x [n, D]; W [D, V], or [V, D] when
/// \p transposeW (a tied embedding table). Scratch: one chunk of logits and
/// n floats.
Status linearCrossEntropy(const Launch &L, DevPtr x, DevPtr w, bool transposeW,
                          DevPtr targets, int64_t n, int64_t D, int64_t V,
                          int64_t ignoreIndex, double softcap, DevPtr lossOut,
                          DevPtr count = 0, DType dtype = DType::F32,
                          int64_t chunkBytes = kLinearCrossEntropyChunkBytes);

/// Its gradients for the upstream *dloss (a device float): dx [n, D]
/// overwritten, dwAcc (W's layout, \p dwType) accumulated. Logits are
/// recomputed chunk by chunk. Scratch: one chunk of logits and one int32.
Status
linearCrossEntropyGrad(const Launch &L, DevPtr x, DevPtr w, bool transposeW,
                       DevPtr targets, DevPtr dloss, DevPtr dx, DevPtr dwAcc,
                       int64_t n, int64_t D, int64_t V, int64_t ignoreIndex,
                       double softcap, DType dtype = DType::F32,
                       DType dwType = DType::F32,
                       int64_t chunkBytes = kLinearCrossEntropyChunkBytes);

/// The logits themselves, softcap?(x @ W) into logits [n, V] of \p dtype
/// (generation needs them): one GEMM, then the softcap in place.
Status linearLogits(const Launch &L, DevPtr x, DevPtr w, bool transposeW,
                    int64_t n, int64_t D, int64_t V, double softcap,
                    DevPtr logits, DType dtype = DType::F32);

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_LINEARCROSSENTROPY_H
