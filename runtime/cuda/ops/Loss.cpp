//===- Loss.cpp - Cross-entropy on the GPU --------------------------------===//
//
// Part of mtc. The host side of loss.cu's cross-entropy entries; the
// kernels' banner has the launch rules this file follows.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/ops/Loss.h"

#include "runtime/cuda/ops/LossDetail.h"

#include <climits>

namespace mtc::cuda::ops {

namespace detail {

Status checkLossSizes(const char *op, int64_t n, int64_t V,
                      int64_t ignoreIndex) {
  if (n < 0 || V < 1)
    return Status::error(std::string(op) + ": bad sizes n=" +
                         std::to_string(n) + " V=" + std::to_string(V));
  if (n > INT_MAX || V > INT_MAX)
    return Status::error(std::string(op) + ": n=" + std::to_string(n) +
                         " V=" + std::to_string(V) +
                         " exceed the kernels' 32-bit sizes");
  if (ignoreIndex < INT_MIN || ignoreIndex > INT_MAX)
    return Status::error(std::string(op) + ": ignoreIndex " +
                         std::to_string(ignoreIndex) +
                         " is not a 32-bit target");
  return Status::success();
}

Status rowLosses(const Launch &L, DevPtr logits, DevPtr targets, int64_t rows,
                 int64_t V, int64_t ignoreIndex, double softcap, DevPtr rowLoss,
                 DType dtype) {
  if (rows == 0)
    return Status::success();
  int ri = static_cast<int>(rows), vi = static_cast<int>(V),
      ii = static_cast<int>(ignoreIndex);
  float cap = static_cast<float>(softcap);
  DevPtr noLse = 0;
  return L.kernel("loss.cu", std::string("cross_entropy_") + dtypeSuffix(dtype),
                  {static_cast<unsigned>(rows)}, {kLossRowThreads}, 0,
                  {&logits, &targets, &ri, &vi, &ii, &cap, &rowLoss, &noLse});
}

Status meanLoss(const Launch &L, DevPtr rowLoss, DevPtr targets, int64_t rows,
                int64_t ignoreIndex, DevPtr lossOut, DevPtr count) {
  int ri = static_cast<int>(rows), ii = static_cast<int>(ignoreIndex);
  return L.kernel("loss.cu", "cross_entropy_mean", {1}, {kLossMeanThreads}, 0,
                  {&rowLoss, &targets, &ri, &ii, &lossOut, &count});
}

Status countRows(const Launch &L, DevPtr targets, int64_t rows,
                 int64_t ignoreIndex, DevPtr count) {
  int ri = static_cast<int>(rows), ii = static_cast<int>(ignoreIndex);
  return L.kernel("loss.cu", "cross_entropy_count", {1}, {kLossMeanThreads}, 0,
                  {&targets, &ri, &ii, &count});
}

Status gradRows(const Launch &L, DevPtr logits, DevPtr targets, int64_t rows,
                int64_t V, int64_t ignoreIndex, double softcap, DevPtr dloss,
                DevPtr count, DType dtype) {
  if (rows == 0)
    return Status::success();
  int ri = static_cast<int>(rows), vi = static_cast<int>(V),
      ii = static_cast<int>(ignoreIndex);
  float cap = static_cast<float>(softcap);
  DevPtr noLse = 0;
  return L.kernel(
      "loss.cu", std::string("cross_entropy_grad_dloss_") + dtypeSuffix(dtype),
      {static_cast<unsigned>(rows)}, {kLossRowThreads}, 0,
      {&logits, &targets, &noLse, &ri, &vi, &ii, &cap, &dloss, &count});
}

Expected<DevPtr> scratchFor(const Launch &L, const char *op, int64_t bytes) {
  Expected<DevPtr> p = L.scratch(bytes);
  if (!p)
    return Status::error(std::string(op) + ": " + p.message());
  return *p;
}

} // namespace detail

using namespace detail;

Status crossEntropy(const Launch &L, DevPtr logits, DevPtr targets, int64_t n,
                    int64_t V, int64_t ignoreIndex, DevPtr lossOut,
                    DevPtr count, DType dtype) {
  if (Status s = checkLossSizes("crossEntropy", n, V, ignoreIndex); !s)
    return s;
  // Row losses, then an int for the count (cross_entropy_mean writes one
  // whether the caller wants it or not).
  Expected<DevPtr> rowLoss = scratchFor(L, "crossEntropy", 4 * n + 4);
  if (!rowLoss)
    return rowLoss.status();
  if (!count)
    count = *rowLoss + 4 * n;
  if (Status s =
          rowLosses(L, logits, targets, n, V, ignoreIndex, 0, *rowLoss, dtype);
      !s)
    return s;
  return meanLoss(L, *rowLoss, targets, n, ignoreIndex, lossOut, count);
}

Status crossEntropyGrad(const Launch &L, DevPtr logits, DevPtr targets,
                        DevPtr dloss, DevPtr dlogits, int64_t n, int64_t V,
                        int64_t ignoreIndex, DType dtype) {
  if (Status s = checkLossSizes("crossEntropyGrad", n, V, ignoreIndex); !s)
    return s;
  if (n == 0)
    return Status::success();
  Expected<DevPtr> count = scratchFor(L, "crossEntropyGrad", 4);
  if (!count)
    return count.status();
  // The kernel works in place; a separate dlogits starts as the logits.
  if (Status s = L.copy(dlogits, logits, n * V * dtypeBytes(dtype)); !s)
    return s;
  if (Status s = countRows(L, targets, n, ignoreIndex, *count); !s)
    return s;
  return gradRows(L, dlogits, targets, n, V, ignoreIndex, 0, dloss, *count,
                  dtype);
}

} // namespace mtc::cuda::ops
