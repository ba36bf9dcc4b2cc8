//===- AdamWKernel.cpp - The elementwise AdamW update kernels -------------===//
//
// Part of mtc. One loop body (adamwLoop), instantiated for fp32 and bf16
// gradients and compiled once per instruction-set level through function
// target attributes; the compiler vectorises each copy at its width. The file
// is built with -ffp-contract=off (and says so below for compilers that honour
// the pragma): AVX-512 implies FMA, and a contracted multiply-add would round
// differently from the baseline build.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/AdamWKernel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#define MTC_ADAMW_X86_LEVELS 1
#endif

namespace mtc::train {

namespace {

/// The per-step constants, computed once per call.
struct Coeffs {
  float b1, b2, omb1, omb2, stepSize, invSqrtBc2, eps, shrink, gs;
};

Coeffs coeffs(const AdamWConfig &cfg, int64_t step, float lr, float gradScale,
              bool decay) {
  const double t = static_cast<double>(std::max<int64_t>(step, 1));
  Coeffs c;
  c.b1 = cfg.beta1;
  c.b2 = cfg.beta2;
  c.omb1 = 1.0f - c.b1;
  c.omb2 = 1.0f - c.b2;
  const double bc1 = 1.0 - std::pow(static_cast<double>(c.b1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(c.b2), t);
  c.stepSize = static_cast<float>(lr / bc1);
  c.invSqrtBc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  c.eps = cfg.eps;
  c.shrink = decay ? 1.0f - lr * cfg.weightDecay : 1.0f;
  c.gs = gradScale;
  return c;
}

inline float widen(float g) { return g; }
inline float widen(uint16_t g) {
  uint32_t bits = static_cast<uint32_t>(g) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// The update (see Optimizer.h for the formula). Inlined into each level's
/// copy, so every copy is vectorised at that level's width.
template <typename G>
[[gnu::always_inline]] inline void
adamwLoop(float *__restrict p, float *__restrict m, float *__restrict v,
          const G *__restrict g, size_t n, const Coeffs &c) {
  const float b1 = c.b1, b2 = c.b2, omb1 = c.omb1, omb2 = c.omb2;
  const float stepSize = c.stepSize, invSqrtBc2 = c.invSqrtBc2, eps = c.eps;
  const float shrink = c.shrink, gs = c.gs;
  for (size_t i = 0; i < n; ++i) {
    float gi = widen(g[i]) * gs;
    float mi = b1 * m[i] + omb1 * gi;
    float vi = b2 * v[i] + omb2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    float denom = std::sqrt(vi) * invSqrtBc2 + eps;
    p[i] = p[i] * shrink - stepSize * (mi / denom);
  }
}

template <typename G>
void loopBaseline(float *p, float *m, float *v, const G *g, size_t n,
                  const Coeffs &c) {
  adamwLoop(p, m, v, g, n, c);
}

#ifdef MTC_ADAMW_X86_LEVELS
template <typename G>
[[gnu::target("avx2")]] void loopAvx2(float *p, float *m, float *v, const G *g,
                                      size_t n, const Coeffs &c) {
  adamwLoop(p, m, v, g, n, c);
}

// 512-bit vectors; AVX-512BW for the 16-bit gradient loads.
template <typename G>
[[gnu::target("avx512f,avx512bw,avx512vl")]] void
loopAvx512(float *p, float *m, float *v, const G *g, size_t n,
           const Coeffs &c) {
  adamwLoop(p, m, v, g, n, c);
}
#endif

template <typename G>
using LoopFn = void (*)(float *, float *, float *, const G *, size_t,
                        const Coeffs &);

template <typename G> LoopFn<G> loopFor(SimdLevel level) {
  if (!simdLevelSupported(level)) {
    std::fprintf(stderr, "mtc: AdamW kernel level %s is not available here\n",
                 simdLevelName(level));
    std::abort();
  }
  switch (level) {
#ifdef MTC_ADAMW_X86_LEVELS
  case SimdLevel::Avx512:
    return loopAvx512<G>;
  case SimdLevel::Avx2:
    return loopAvx2<G>;
#endif
  default:
    return loopBaseline<G>;
  }
}

SimdLevel detectLevel() {
#ifdef MTC_ADAMW_X86_LEVELS
  if (simdLevelSupported(SimdLevel::Avx512))
    return SimdLevel::Avx512;
  if (simdLevelSupported(SimdLevel::Avx2))
    return SimdLevel::Avx2;
#endif
  return SimdLevel::Baseline;
}

template <typename G> LoopFn<G> dispatched() {
  static const LoopFn<G> fn = loopFor<G>(adamwSimdLevel());
  return fn;
}

} // namespace

const char *simdLevelName(SimdLevel level) {
  switch (level) {
  case SimdLevel::Baseline:
    return "baseline";
  case SimdLevel::Avx2:
    return "avx2";
  case SimdLevel::Avx512:
    return "avx512";
  }
  return "?";
}

bool simdLevelSupported(SimdLevel level) {
  if (level == SimdLevel::Baseline)
    return true;
#ifdef MTC_ADAMW_X86_LEVELS
  if (level == SimdLevel::Avx2)
    return __builtin_cpu_supports("avx2");
  if (level == SimdLevel::Avx512)
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
#endif
  return false;
}

SimdLevel adamwSimdLevel() {
  static const SimdLevel level = detectLevel();
  return level;
}

void adamwKernel(float *p, float *m, float *v, const float *g, size_t n,
                 const AdamWConfig &cfg, int64_t step, float lr,
                 float gradScale, bool decay) {
  dispatched<float>()(p, m, v, g, n, coeffs(cfg, step, lr, gradScale, decay));
}

void adamwKernelBf16(float *p, float *m, float *v, const uint16_t *g, size_t n,
                     const AdamWConfig &cfg, int64_t step, float lr,
                     float gradScale, bool decay) {
  dispatched<uint16_t>()(p, m, v, g, n,
                         coeffs(cfg, step, lr, gradScale, decay));
}

void adamwKernelAt(SimdLevel level, float *p, float *m, float *v,
                   const float *g, size_t n, const AdamWConfig &cfg,
                   int64_t step, float lr, float gradScale, bool decay) {
  loopFor<float>(level)(p, m, v, g, n, coeffs(cfg, step, lr, gradScale, decay));
}

void adamwKernelBf16At(SimdLevel level, float *p, float *m, float *v,
                       const uint16_t *g, size_t n, const AdamWConfig &cfg,
                       int64_t step, float lr, float gradScale, bool decay) {
  loopFor<uint16_t>(level)(p, m, v, g, n,
                           coeffs(cfg, step, lr, gradScale, decay));
}

} // namespace mtc::train
