//===- LinearCrossEntropy.cpp - LM head + cross-entropy on the GPU --------===//
//
// Part of mtc. The chunked LM head of LinearCrossEntropy.h: GEMMs through
// L.gemmOp, the loss.cu kernels through LossDetail.h.
//
// Gradient scaling: the CPU passes dloss * chunkCount / totalCount to a
// per-chunk crossEntropyGrad that divides by chunkCount again; here the
// kernel reads dloss and the whole batch's count on the device and scales
// by dloss / totalCount directly (the same value up to one rounding).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/ops/LinearCrossEntropy.h"

#include "runtime/cuda/ops/LossDetail.h"

#include <algorithm>

namespace mtc::cuda::ops {

using namespace detail;

namespace {

/// cpu::Unary::Softcap's number in elementwise.cu's mtc_unary_T.
constexpr int kUnarySoftcap = 12;
constexpr unsigned kUnaryThreads = 256;
/// Grid-stride cap of mtc_unary_T: a few waves of a large GPU.
constexpr int64_t kUnaryMaxBlocks = 132 * 16;

ElemType elemType(DType t) {
  return t == DType::F32 ? ElemType::F32 : ElemType::BF16;
}

const void *cptr(DevPtr p) { return reinterpret_cast<const void *>(p); }
void *mptr(DevPtr p) { return reinterpret_cast<void *>(p); }

Status checkLinear(const char *op, int64_t n, int64_t D, int64_t V,
                   int64_t ignoreIndex, double softcap) {
  if (D < 1)
    return Status::error(std::string(op) + ": bad size D=" + std::to_string(D));
  if (!(softcap >= 0))
    return Status::error(std::string(op) + ": softcap " +
                         std::to_string(softcap) + " is negative");
  return checkLossSizes(op, n, V, ignoreIndex);
}

/// logits [c, V] (of dtype) = x[r0 : r0 + c] @ op(W), unscaled by the
/// softcap (the loss kernels apply it).
Status chunkLogits(const Launch &L, DevPtr x, DevPtr w, bool transposeW,
                   int64_t r0, int64_t c, int64_t D, int64_t V, DevPtr logits,
                   DType dtype) {
  GemmShape shape;
  shape.transB = transposeW;
  shape.m = c;
  shape.n = V;
  shape.k = D;
  GemmOperands ops;
  ops.a = cptr(x + r0 * D * dtypeBytes(dtype));
  ops.b = cptr(w);
  ops.c = mptr(logits);
  ops.aType = ops.bType = ops.cType = elemType(dtype);
  return L.gemmOp(shape, ops);
}

} // namespace

int64_t linearCrossEntropyChunkRows(int64_t V, int64_t elemBytes,
                                    int64_t chunkBytes) {
  int64_t row = std::max<int64_t>(V, 1) * std::max<int64_t>(elemBytes, 1);
  return std::max<int64_t>(chunkBytes / row, 1);
}

Status linearCrossEntropy(const Launch &L, DevPtr x, DevPtr w, bool transposeW,
                          DevPtr targets, int64_t n, int64_t D, int64_t V,
                          int64_t ignoreIndex, double softcap, DevPtr lossOut,
                          DevPtr count, DType dtype, int64_t chunkBytes) {
  const char *op = "linearCrossEntropy";
  if (Status s = checkLinear(op, n, D, V, ignoreIndex, softcap); !s)
    return s;
  const int64_t eb = dtypeBytes(dtype);
  const int64_t chunk =
      std::min(n, linearCrossEntropyChunkRows(V, eb, chunkBytes));
  // Row losses of all rows, then an int for the count when the caller does
  // not want it (cross_entropy_mean writes one).
  Expected<DevPtr> rowLoss = scratchFor(L, op, 4 * n + 4);
  if (!rowLoss)
    return rowLoss.status();
  if (!count)
    count = *rowLoss + 4 * n;
  if (n > 0) {
    Expected<DevPtr> logits = scratchFor(L, op, chunk * V * eb);
    if (!logits)
      return logits.status();
    for (int64_t r0 = 0; r0 < n; r0 += chunk) {
      const int64_t c = std::min(chunk, n - r0);
      if (Status s =
              chunkLogits(L, x, w, transposeW, r0, c, D, V, *logits, dtype);
          !s)
        return Status::error(std::string(op) + ": " + s.message());
      if (Status s = rowLosses(L, *logits, targets + 4 * r0, c, V, ignoreIndex,
                               softcap, *rowLoss + 4 * r0, dtype);
          !s)
        return s;
    }
  }
  return meanLoss(L, *rowLoss, targets, n, ignoreIndex, lossOut, count);
}

Status linearCrossEntropyGrad(const Launch &L, DevPtr x, DevPtr w,
                              bool transposeW, DevPtr targets, DevPtr dloss,
                              DevPtr dx, DevPtr dwAcc, int64_t n, int64_t D,
                              int64_t V, int64_t ignoreIndex, double softcap,
                              DType dtype, DType dwType, int64_t chunkBytes) {
  const char *op = "linearCrossEntropyGrad";
  if (Status s = checkLinear(op, n, D, V, ignoreIndex, softcap); !s)
    return s;
  if (n == 0)
    return Status::success();
  const int64_t eb = dtypeBytes(dtype);
  const int64_t chunk =
      std::min(n, linearCrossEntropyChunkRows(V, eb, chunkBytes));
  Expected<DevPtr> count = scratchFor(L, op, 4);
  if (!count)
    return count.status();
  Expected<DevPtr> logits = scratchFor(L, op, chunk * V * eb);
  if (!logits)
    return logits.status();
  // The whole batch's count first: every chunk's rows weigh 1 / count.
  if (Status s = countRows(L, targets, n, ignoreIndex, *count); !s)
    return s;
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    const int64_t c = std::min(chunk, n - r0);
    if (Status s =
            chunkLogits(L, x, w, transposeW, r0, c, D, V, *logits, dtype);
        !s)
      return Status::error(std::string(op) + ": " + s.message());
    if (Status s = gradRows(L, *logits, targets + 4 * r0, c, V, ignoreIndex,
                            softcap, dloss, *count, dtype);
        !s)
      return s;
    const DevPtr xc = x + r0 * D * eb;
    // dx_c [c, D] = dlogits @ op(W)^T: W [D, V] transposed, or W [V, D].
    GemmShape dxShape;
    dxShape.transB = !transposeW;
    dxShape.m = c;
    dxShape.n = D;
    dxShape.k = V;
    GemmOperands dxOps;
    dxOps.a = cptr(*logits);
    dxOps.b = cptr(w);
    dxOps.c = mptr(dx + r0 * D * eb);
    dxOps.aType = dxOps.bType = dxOps.cType = elemType(dtype);
    if (Status s = L.gemmOp(dxShape, dxOps); !s)
      return Status::error(std::string(op) + ": dx: " + s.message());
    // dW += x_c^T @ dlogits (W [D, V]) or dlogits^T @ x_c (W [V, D]), one
    // chunk after the other: a fixed order of fp32 accumulations.
    GemmShape dwShape;
    dwShape.transA = true;
    dwShape.m = transposeW ? V : D;
    dwShape.n = transposeW ? D : V;
    dwShape.k = c;
    GemmOperands dwOps;
    dwOps.a = cptr(transposeW ? *logits : xc);
    dwOps.b = cptr(transposeW ? xc : *logits);
    dwOps.c = mptr(dwAcc);
    dwOps.aType = dwOps.bType = elemType(dtype);
    dwOps.cType = elemType(dwType);
    dwOps.beta = 1;
    if (Status s = L.gemmOp(dwShape, dwOps); !s)
      return Status::error(std::string(op) + ": dW: " + s.message());
  }
  return Status::success();
}

Status linearLogits(const Launch &L, DevPtr x, DevPtr w, bool transposeW,
                    int64_t n, int64_t D, int64_t V, double softcap,
                    DevPtr logits, DType dtype) {
  const char *op = "linearLogits";
  if (Status s = checkLinear(op, n, D, V, 0, softcap); !s)
    return s;
  if (n == 0)
    return Status::success();
  if (Status s = chunkLogits(L, x, w, transposeW, 0, n, D, V, logits, dtype);
      !s)
    return Status::error(std::string(op) + ": " + s.message());
  if (softcap <= 0)
    return Status::success();
  // In place, the CPU's Softcap unary (what cpu::linearLogits applies).
  long long count = n * V;
  int unaryOp = kUnarySoftcap;
  float cap = static_cast<float>(softcap);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(
      (count + kUnaryThreads - 1) / kUnaryThreads, kUnaryMaxBlocks));
  return L.kernel(
      "elementwise.cu", std::string("mtc_unary_") + dtypeSuffix(dtype),
      {blocks}, {kUnaryThreads}, 0, {&logits, &logits, &count, &unaryOp, &cap});
}

} // namespace mtc::cuda::ops
