//===- Optimizer.cpp - Host AdamW and exact global-norm clipping ----------===//
//
// Part of mtc. Chunking and threading of the AdamW kernels (AdamWKernel.cpp),
// deterministic sums of squares and the clipping scale.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mtc::train {

namespace {

/// Elements [b, e) of \p t.
void updateRange(const AdamWTensor &t, size_t b, size_t e,
                 const AdamWConfig &cfg, int64_t s, float lr, float gradScale) {
  if (t.gradBf16)
    adamwKernelBf16(t.param + b, t.m + b, t.v + b, t.gradBf16 + b, e - b, cfg,
                    s, lr, gradScale, t.decay);
  else
    adamwKernel(t.param + b, t.m + b, t.v + b, t.grad + b, e - b, cfg, s, lr,
                gradScale, t.decay);
}

} // namespace

AdamW::AdamW(AdamWConfig c, ThreadPool *pool) : cfg(c), pool(pool) {}

void AdamW::step(const AdamWTensor &t, int64_t s, float lr,
                 float gradScale) const {
  size_t chunks = numChunks(t.n, kChunk);
  auto task = [&](size_t c) {
    size_t b = c * kChunk, e = std::min(t.n, b + kChunk);
    updateRange(t, b, e, cfg, s, lr, gradScale);
  };
  if (pool)
    pool->parallelFor(chunks, task);
  else
    for (size_t c = 0; c < chunks; ++c)
      task(c);
}

void AdamW::step(const std::vector<AdamWTensor> &tensors, int64_t s, float lr,
                 float gradScale) const {
  // One task list over all tensors so small tensors do not serialise.
  std::vector<std::pair<size_t, size_t>> tasks; // tensor, chunk
  for (size_t i = 0; i < tensors.size(); ++i)
    for (size_t c = 0, e = numChunks(tensors[i].n, kChunk); c < e; ++c)
      tasks.emplace_back(i, c);
  auto task = [&](size_t k) {
    const AdamWTensor &t = tensors[tasks[k].first];
    size_t b = tasks[k].second * kChunk, e = std::min(t.n, b + kChunk);
    updateRange(t, b, e, cfg, s, lr, gradScale);
  };
  if (pool)
    pool->parallelFor(tasks.size(), task);
  else
    for (size_t k = 0; k < tasks.size(); ++k)
      task(k);
}

namespace {

inline double widenToDouble(float x) { return static_cast<double>(x); }
inline double widenToDouble(uint16_t x) {
  uint32_t bits = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return static_cast<double>(f);
}

template <typename T>
double chunkSumOfSquares(const T *__restrict x, size_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      double d = widenToDouble(x[i + k]);
      acc[k] += d * d;
    }
  for (int k = 0; i < n; ++i, ++k) {
    double d = widenToDouble(x[i]);
    acc[k] += d * d;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

template <typename T>
double sumOfSquaresOf(const T *x, size_t n, ThreadPool *pool) {
  size_t chunks = numChunks(n, kSumChunk);
  if (chunks <= 1)
    return chunkSumOfSquares(x, n);
  std::vector<double> partial(chunks);
  auto task = [&](size_t c) {
    size_t b = c * kSumChunk, e = std::min(n, b + kSumChunk);
    partial[c] = chunkSumOfSquares(x + b, e - b);
  };
  if (pool)
    pool->parallelFor(chunks, task);
  else
    for (size_t c = 0; c < chunks; ++c)
      task(c);
  double total = 0;
  for (double d : partial)
    total += d;
  return total;
}

/// Round to nearest even, as device::convertF32ToBF16 (a NaN stays a quiet
/// NaN with its sign), widened back.
inline float roundOne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  uint32_t h;
  if ((u & 0x7fffffffu) > 0x7f800000u)
    h = (u >> 16) | 0x0040u;
  else
    h = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  uint32_t w = (h & 0xffffu) << 16;
  float r;
  std::memcpy(&r, &w, sizeof r);
  return r;
}

} // namespace

double sumOfSquares(const float *x, size_t n, ThreadPool *pool) {
  return sumOfSquaresOf(x, n, pool);
}

double sumOfSquaresBf16(const uint16_t *x, size_t n, ThreadPool *pool) {
  return sumOfSquaresOf(x, n, pool);
}

void roundToBf16(float *x, size_t n, ThreadPool *pool) {
  size_t chunks = numChunks(n, kSumChunk);
  auto task = [&](size_t c) {
    size_t b = c * kSumChunk, e = std::min(n, b + kSumChunk);
    for (size_t i = b; i < e; ++i)
      x[i] = roundOne(x[i]);
  };
  if (pool && chunks > 1)
    pool->parallelFor(chunks, task);
  else
    for (size_t c = 0; c < chunks; ++c)
      task(c);
}

double clipScale(double norm, double maxNorm) {
  if (!(maxNorm > 0) || !std::isfinite(norm) || !(norm > maxNorm))
    return 1.0;
  return maxNorm / (norm + 1e-6);
}

} // namespace mtc::train
