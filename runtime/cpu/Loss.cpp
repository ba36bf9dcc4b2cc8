//===- Loss.cpp - Embedding lookup and cross entropy ----------------------===//
//
// Part of mtc.
//
// embedding: ids are validated first (the first out-of-range position is
// reported and nothing is written), then rows are copied in parallel.
// embeddingGradAcc: parallel over column blocks of D; each task adds every dy
// row into its columns in row order, so repeated ids accumulate in a fixed
// order without atomics.
//
// crossEntropy: rows are split into fixed chunks (count depends only on n);
// each row is one streaming pass for the max and one for sum exp(x - max)
// (exp by detail::fexp, ~2 ulp and vectorised; float lanes per block of
// 256, blocks summed in double), loss_row =
// log(sum) + max - x[target]. Nothing of
// size V is stored, so memory is O(1) per thread (well within the O(threads *
// V) bound). Per-chunk losses are double and are combined in chunk order:
// the result is bit-identical for any thread count.
// A target outside [0, V) that is not ignoreIndex makes the loss NaN (the row
// still counts), so the bad input cannot go unnoticed.
// crossEntropyGrad: count is recomputed from targets; with count == 0 all of
// dlogits is zero. Per row: max pass, one exp pass that stores exp(x - max)
// into dlogits while summing in double, one scaling pass.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/FastMath.h"
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace mtc::cpu {

bool embedding(const int32_t *ids, const float *table, float *y, int64_t n,
               int64_t V, int64_t D, int64_t *badIndex) {
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= V) {
      if (badIndex)
        *badIndex = i;
      return false;
    }
  parallelFor(n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      std::memcpy(y + r * D, table + int64_t(ids[r]) * D, sizeof(float) * D);
  });
  return true;
}

void embeddingGradAcc(const int32_t *ids, const float *dy, float *dtable,
                      int64_t n, int64_t V, int64_t D) {
  constexpr int64_t kCols = 64;
  int64_t blocks = (D + kCols - 1) / kCols;
  parallelFor(blocks, [&](int64_t b0, int64_t b1) {
    int64_t c0 = b0 * kCols, c1 = std::min(D, b1 * kCols);
    for (int64_t r = 0; r < n; ++r) {
      int64_t id = ids[r];
      if (id < 0 || id >= V)
        continue; // rejected by the forward already
      float *dst = dtable + id * D;
      const float *src = dy + r * D;
      for (int64_t c = c0; c < c1; ++c)
        dst[c] += src[c];
    }
  });
}

namespace {

using detail::fexp;

using detail::expSumRow;
using detail::maxRow;

/// log(sum_j exp(x_j)) - x_t, max-subtracted.
MTC_CLONES double rowLoss(const float *x, int64_t V, int64_t t) {
  float mx = maxRow(x, V);
  return std::log(expSumRow(x, V, mx, nullptr)) + double(mx) - double(x[t]);
}

/// d = g * softmax(x) - g * onehot(t).
MTC_CLONES void rowGrad(const float *x, int64_t V, int64_t t, float g,
                        float *d) {
  float mx = maxRow(x, V);
  double sum = expSumRow(x, V, mx, d);
  float scale = static_cast<float>(double(g) / sum);
  for (int64_t j = 0; j < V; ++j)
    d[j] *= scale;
  if (t >= 0 && t < V)
    d[t] -= g;
}

inline int64_t lossChunks(int64_t n) {
  return std::max<int64_t>(1, std::min<int64_t>(n, 256));
}

} // namespace

double crossEntropy(const float *logits, const int32_t *targets, int64_t n,
                    int64_t V, int64_t ignoreIndex, int64_t *count) {
  int64_t chunks = lossChunks(n);
  std::vector<double> part(chunks, 0.0);
  std::vector<int64_t> cnt(chunks, 0);
  parallelFor(chunks, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double acc = 0.0;
      int64_t k = 0;
      for (int64_t r = n * c / chunks; r < n * (c + 1) / chunks; ++r) {
        int64_t t = targets[r];
        if (t == ignoreIndex)
          continue;
        ++k;
        if (t < 0 || t >= V) {
          acc += std::numeric_limits<double>::quiet_NaN();
          continue;
        }
        acc += rowLoss(logits + r * V, V, t);
      }
      part[c] = acc;
      cnt[c] = k;
    }
  });
  double total = 0.0;
  int64_t k = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    total += part[c];
    k += cnt[c];
  }
  if (count)
    *count = k;
  return k > 0 ? total / double(k) : 0.0;
}

void crossEntropyGrad(const float *logits, const int32_t *targets, float dloss,
                      float *dlogits, int64_t n, int64_t V,
                      int64_t ignoreIndex) {
  int64_t count = 0;
  for (int64_t r = 0; r < n; ++r)
    count += targets[r] != ignoreIndex;
  float g = count > 0 ? static_cast<float>(double(dloss) / double(count)) : 0;
  parallelFor(n, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float *d = dlogits + r * V;
      int64_t t = targets[r];
      if (t == ignoreIndex || count == 0) {
        std::memset(d, 0, sizeof(float) * V);
        continue;
      }
      rowGrad(logits + r * V, V, t, g, d);
    }
  });
}

} // namespace mtc::cpu
