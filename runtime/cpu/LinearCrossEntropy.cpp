//===- LinearCrossEntropy.cpp - LM head + cross-entropy, chunked
//-----------===//
//
// Part of mtc. The loss of softcap?(x @ W) without ever holding all [n, V]
// logits: for each chunk of rows, one sgemm produces the chunk's logits, the
// (softcapped) cross-entropy kernels consume them, and in the backward pass
// two more sgemms turn the chunk's logit gradients into dx and dW.
//
// Gradient scaling: crossEntropyGrad divides by the rows counted in the chunk
// it sees; passing dloss * chunkCount / totalCount makes every row's share
// 1 / totalCount as the mean over the whole batch requires.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <vector>

namespace mtc::cpu {

int64_t linearCrossEntropyChunk(int64_t V) {
  int64_t rows = (int64_t(4) << 20) / (static_cast<int64_t>(sizeof(float)) *
                                       std::max<int64_t>(V, 1));
  return std::max<int64_t>(rows, 16);
}

namespace {

/// logits[c, V] = softcap?(x_c @ W) for rows [r0, r0 + c).
void chunkLogits(const float *x, const float *w, bool transposeW, int64_t r0,
                 int64_t c, int64_t D, int64_t V, double softcap,
                 float *logits) {
  gemm(false, transposeW, c, V, D, 1.0f, x + r0 * D, w, 0.0f, logits);
  if (softcap > 0)
    unary(Unary::Softcap, logits, logits, c * V, static_cast<float>(softcap));
}

int64_t countTargets(const int32_t *targets, int64_t n, int64_t ignoreIndex) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i)
    count += targets[i] != ignoreIndex;
  return count;
}

} // namespace

double linearCrossEntropy(const float *x, const float *w, bool transposeW,
                          const int32_t *targets, int64_t n, int64_t D,
                          int64_t V, int64_t ignoreIndex, double softcap,
                          int64_t *count) {
  int64_t chunk = std::min(n, linearCrossEntropyChunk(V));
  std::vector<float> logits(
      static_cast<size_t>(std::max<int64_t>(chunk, 1) * V));
  double total = 0;
  int64_t counted = 0;
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    int64_t c = std::min(chunk, n - r0), cnt = 0;
    chunkLogits(x, w, transposeW, r0, c, D, V, softcap, logits.data());
    double mean =
        crossEntropy(logits.data(), targets + r0, c, V, ignoreIndex, &cnt);
    total += mean * static_cast<double>(cnt);
    counted += cnt;
  }
  if (count)
    *count = counted;
  return counted ? total / static_cast<double>(counted) : 0.0;
}

void linearCrossEntropyGrad(const float *x, const float *w, bool transposeW,
                            const int32_t *targets, float dloss, float *dx,
                            float *dwAcc, int64_t n, int64_t D, int64_t V,
                            int64_t ignoreIndex, double softcap) {
  int64_t totalCount = countTargets(targets, n, ignoreIndex);
  int64_t chunk = std::min(n, linearCrossEntropyChunk(V));
  std::vector<float> logits(
      static_cast<size_t>(std::max<int64_t>(chunk, 1) * V)),
      dlogits(logits.size());
  for (int64_t r0 = 0; r0 < n; r0 += chunk) {
    int64_t c = std::min(chunk, n - r0);
    int64_t cnt = countTargets(targets + r0, c, ignoreIndex);
    if (totalCount == 0 || cnt == 0) {
      std::fill(dx + r0 * D, dx + (r0 + c) * D, 0.0f);
      continue;
    }
    chunkLogits(x, w, transposeW, r0, c, D, V, softcap, logits.data());
    float scale =
        dloss * static_cast<float>(cnt) / static_cast<float>(totalCount);
    crossEntropyGrad(logits.data(), targets + r0, scale, dlogits.data(), c, V,
                     ignoreIndex);
    if (softcap > 0) {
      // d(cap tanh(l / cap))/dl = 1 - (y / cap)^2 with y the capped logit.
      float inv = static_cast<float>(1.0 / softcap);
      parallelFor(c * V, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          float t = logits[i] * inv;
          dlogits[i] *= 1.0f - t * t;
        }
      });
    }
    // dx_c = dlogits @ W^T  (W [D, V])   or   dlogits @ W  (W [V, D]).
    gemm(false, !transposeW, c, D, V, 1.0f, dlogits.data(), w, 0.0f,
         dx + r0 * D);
    if (transposeW) // dW [V, D] += dlogits^T @ x_c
      gemm(true, false, V, D, c, 1.0f, dlogits.data(), x + r0 * D, 1.0f, dwAcc);
    else // dW [D, V] += x_c^T @ dlogits
      gemm(true, false, D, V, c, 1.0f, x + r0 * D, dlogits.data(), 1.0f, dwAcc);
  }
}

void linearLogits(const float *x, const float *w, bool transposeW, int64_t n,
                  int64_t D, int64_t V, double softcap, float *logits) {
  chunkLogits(x, w, transposeW, 0, n, D, V, softcap, logits);
}

} // namespace mtc::cpu
