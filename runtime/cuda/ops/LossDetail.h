//===- LossDetail.h - Cross-entropy launches of the loss ops ----*- C++ -*-===//
//
// Part of mtc. The single launches of loss.cu that Loss.cpp and
// LinearCrossEntropy.cpp both queue (not an API: the launchers in Loss.h
// and LinearCrossEntropy.h are).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_LOSSDETAIL_H
#define MTC_RUNTIME_CUDA_OPS_LOSSDETAIL_H

#include "runtime/cuda/ops/Launch.h"

namespace mtc::cuda::ops::detail {

/// Threads per row of cross_entropy_* and per block of the one-block
/// reductions (cross_entropy_mean, cross_entropy_count).
constexpr unsigned kLossRowThreads = 256;
constexpr unsigned kLossMeanThreads = 1024;

/// An error naming \p op unless n, V and ignoreIndex fit the kernels' ints.
Status checkLossSizes(const char *op, int64_t n, int64_t V,
                      int64_t ignoreIndex);
/// rowLoss[rows] = each row's loss (cross_entropy_T).
Status rowLosses(const Launch &L, DevPtr logits, DevPtr targets, int64_t rows,
                 int64_t V, int64_t ignoreIndex, double softcap, DevPtr rowLoss,
                 DType dtype);
/// *lossOut, *count = the mean of rowLoss over the counted rows and their
/// number (cross_entropy_mean).
Status meanLoss(const Launch &L, DevPtr rowLoss, DevPtr targets, int64_t rows,
                int64_t ignoreIndex, DevPtr lossOut, DevPtr count);
/// *count = the rows whose target != ignoreIndex (cross_entropy_count).
Status countRows(const Launch &L, DevPtr targets, int64_t rows,
                 int64_t ignoreIndex, DevPtr count);
/// logits [rows, V] become their gradient in place for *dloss / *count
/// (cross_entropy_grad_dloss_T).
Status gradRows(const Launch &L, DevPtr logits, DevPtr targets, int64_t rows,
                int64_t V, int64_t ignoreIndex, double softcap, DevPtr dloss,
                DevPtr count, DType dtype);
/// \p bytes of L.scratch; the error names \p op.
Expected<DevPtr> scratchFor(const Launch &L, const char *op, int64_t bytes);

} // namespace mtc::cuda::ops::detail

#endif // MTC_RUNTIME_CUDA_OPS_LOSSDETAIL_H
