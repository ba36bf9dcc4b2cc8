//===- Optimizer.cpp - Host AdamW and exact global-norm clipping ----------===//
//
// Part of mtc. Plain loops the compiler vectorises (no -march flags; the
// library is built with -fno-math-errno so sqrtf vectorises).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Optimizer.h"

#include <algorithm>
#include <cmath>

namespace mtc::train {

void adamwKernel(float *__restrict p, float *__restrict m, float *__restrict v,
                 const float *__restrict g, size_t n, const AdamWConfig &cfg,
                 int64_t step, float lr, float gradScale, bool decay) {
  const double t = static_cast<double>(std::max<int64_t>(step, 1));
  const float b1 = cfg.beta1, b2 = cfg.beta2;
  const float omb1 = 1.0f - b1, omb2 = 1.0f - b2;
  const double bc1 = 1.0 - std::pow(static_cast<double>(b1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(b2), t);
  const float stepSize = static_cast<float>(lr / bc1);
  const float invSqrtBc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float eps = cfg.eps;
  const float shrink = decay ? 1.0f - lr * cfg.weightDecay : 1.0f;
  const float gs = gradScale;
  for (size_t i = 0; i < n; ++i) {
    float gi = g[i] * gs;
    float mi = b1 * m[i] + omb1 * gi;
    float vi = b2 * v[i] + omb2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    float denom = std::sqrt(vi) * invSqrtBc2 + eps;
    p[i] = p[i] * shrink - stepSize * (mi / denom);
  }
}

AdamW::AdamW(AdamWConfig c, ThreadPool *pool) : cfg(c), pool(pool) {}

void AdamW::step(const AdamWTensor &t, int64_t s, float lr,
                 float gradScale) const {
  size_t chunks = numChunks(t.n, kChunk);
  auto task = [&](size_t c) {
    size_t b = c * kChunk, e = std::min(t.n, b + kChunk);
    adamwKernel(t.param + b, t.m + b, t.v + b, t.grad + b, e - b, cfg, s, lr,
                gradScale, t.decay);
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
    adamwKernel(t.param + b, t.m + b, t.v + b, t.grad + b, e - b, cfg, s, lr,
                gradScale, t.decay);
  };
  if (pool)
    pool->parallelFor(tasks.size(), task);
  else
    for (size_t k = 0; k < tasks.size(); ++k)
      task(k);
}

static double chunkSumOfSquares(const float *__restrict x, size_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      double d = static_cast<double>(x[i + k]);
      acc[k] += d * d;
    }
  for (int k = 0; i < n; ++i, ++k) {
    double d = static_cast<double>(x[i]);
    acc[k] += d * d;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

double sumOfSquares(const float *x, size_t n, ThreadPool *pool) {
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

double globalNorm(const std::vector<double> &sumsOfSquares) {
  double total = 0;
  for (double d : sumsOfSquares)
    total += d;
  return std::sqrt(total);
}

float clipScale(double norm, double maxNorm) {
  if (!(maxNorm > 0) || !std::isfinite(norm))
    return 1.0f;
  double s = maxNorm / (norm + 1e-6);
  return static_cast<float>(std::min(1.0, s));
}

} // namespace mtc::train
