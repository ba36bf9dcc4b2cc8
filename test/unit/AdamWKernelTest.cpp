//===- AdamWKernelTest.cpp - Unit tests of runtime/train/AdamWKernel ------===//
//
// Part of mtc. Every instruction-set level of the AdamW kernel against one
// scalar statement of the update (bit for bit), the bf16-gradient kernel
// against the fp32 one on widened gradients (bit for bit), and AdamW::step
// with bf16 gradients at several thread counts.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Optimizer.h"
#include "runtime/train/Random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

// The reference below must not be contracted into fused multiply-adds either
// (the file is built with -ffp-contract=off, test/unit/CMakeLists.txt).
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

using namespace mtc::train;

namespace {

const SimdLevel kLevels[] = {SimdLevel::Baseline, SimdLevel::Avx2,
                             SimdLevel::Avx512};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float fromBf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// Round-to-nearest-even fp32 -> bf16 bits (finite inputs).
uint16_t toBf16(float f) {
  uint32_t u = bits(f);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// The update written out in scalar fp32, operation by operation: the
/// semantics every level must reproduce exactly.
void scalarAdamW(std::vector<float> &p, std::vector<float> &m,
                 std::vector<float> &v, const std::vector<float> &g,
                 const AdamWConfig &cfg, int64_t step, float lr, float scale,
                 bool decay) {
  const double t = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), t);
  const double bc2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), t);
  const float stepSize = static_cast<float>(lr / bc1);
  const float invSqrtBc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  const float shrink = decay ? 1.0f - lr * cfg.weightDecay : 1.0f;
  for (size_t i = 0; i < p.size(); ++i) {
    float gi = g[i] * scale;
    float mi = cfg.beta1 * m[i] + (1.0f - cfg.beta1) * gi;
    float vi = cfg.beta2 * v[i] + (1.0f - cfg.beta2) * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    float denom = std::sqrt(vi) * invSqrtBc2 + cfg.eps;
    p[i] = p[i] * shrink - stepSize * (mi / denom);
  }
}

struct Arrays {
  std::vector<float> p, m, v;
  explicit Arrays(size_t n) : p(n), m(n, 0.0f), v(n, 0.0f) {
    initNormal(p.data(), n, 0.0f, 0.05f, 21, 0);
  }
};

/// Gradients of every magnitude AdamW meets: normal values, tiny ones whose
/// squares underflow, subnormals, zeros and large ones.
std::vector<float> gradients(size_t n, uint64_t step) {
  std::vector<float> g(n);
  initNormal(g.data(), n, 0.0f, 1.0f, 77, step);
  const float scales[] = {1e-3f, 1e-20f, 1e-40f, 0.0f, 3e3f, 1.0f, 1e-6f};
  for (size_t i = 0; i < n; ++i)
    g[i] *= scales[(i / 5) % 7];
  return g;
}

void expectSameBits(const std::vector<float> &a, const std::vector<float> &b,
                    const char *what, SimdLevel level) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(bits(a[i]), bits(b[i]))
        << what << "[" << i << "] at " << simdLevelName(level) << ": " << a[i]
        << " vs " << b[i];
}

TEST(AdamWKernel, DispatchedLevelIsSupported) {
  EXPECT_TRUE(simdLevelSupported(SimdLevel::Baseline));
  EXPECT_TRUE(simdLevelSupported(adamwSimdLevel()));
  // The widest supported level is the one dispatched.
  for (SimdLevel l : kLevels)
    if (simdLevelSupported(l)) {
      EXPECT_GE(static_cast<int>(adamwSimdLevel()), static_cast<int>(l));
    }
}

TEST(AdamWKernel, EveryLevelMatchesScalarBitForBit) {
  const size_t n = 4099; // vector bodies and a ragged tail at every width
  AdamWConfig cfg;
  for (SimdLevel level : kLevels) {
    if (!simdLevelSupported(level))
      continue;
    for (bool decay : {true, false}) {
      Arrays k(n), r(n);
      for (int64_t t = 1; t <= 4; ++t) {
        std::vector<float> g = gradients(n, static_cast<uint64_t>(t));
        float lr = 1e-3f * static_cast<float>(t);
        float scale = t == 2 ? 0.37f : 1.0f;
        adamwKernelAt(level, k.p.data(), k.m.data(), k.v.data(), g.data(), n,
                      cfg, t, lr, scale, decay);
        scalarAdamW(r.p, r.m, r.v, g, cfg, t, lr, scale, decay);
      }
      expectSameBits(k.p, r.p, "p", level);
      expectSameBits(k.m, r.m, "m", level);
      expectSameBits(k.v, r.v, "v", level);
    }
  }
}

TEST(AdamWKernel, Bf16GradientsEqualWidenedFp32BitForBit) {
  const size_t n = 3001;
  AdamWConfig cfg;
  for (SimdLevel level : kLevels) {
    if (!simdLevelSupported(level))
      continue;
    Arrays a(n), b(n);
    for (int64_t t = 1; t <= 3; ++t) {
      std::vector<float> g = gradients(n, static_cast<uint64_t>(t) + 10);
      std::vector<uint16_t> gh(n);
      std::vector<float> gw(n);
      for (size_t i = 0; i < n; ++i) {
        gh[i] = toBf16(g[i]);
        gw[i] = fromBf16(gh[i]);
      }
      adamwKernelBf16At(level, a.p.data(), a.m.data(), a.v.data(), gh.data(), n,
                        cfg, t, 2e-3f, 0.5f, true);
      adamwKernelAt(level, b.p.data(), b.m.data(), b.v.data(), gw.data(), n,
                    cfg, t, 2e-3f, 0.5f, true);
    }
    expectSameBits(a.p, b.p, "p", level);
    expectSameBits(a.m, b.m, "m", level);
    expectSameBits(a.v, b.v, "v", level);
  }
}

TEST(AdamWKernel, StepWithBf16GradientsAnyThreadCount) {
  // Two tensors, one without decay; several chunks each; 1, 2 and 5 threads.
  const size_t n1 = 3 * AdamW::kChunk + 17, n2 = AdamW::kChunk / 3;
  std::vector<float> ref;
  for (unsigned threads : {1u, 2u, 5u}) {
    Arrays a(n1), b(n2), fa(n1), fb(n2);
    std::vector<uint16_t> ga(n1), gb(n2);
    std::vector<float> wa(n1), wb(n2);
    ThreadPool pool(threads);
    AdamW opt(AdamWConfig{}, &pool);
    for (int64_t t = 1; t <= 2; ++t) {
      std::vector<float> g1 = gradients(n1, t), g2 = gradients(n2, t + 5);
      for (size_t i = 0; i < n1; ++i)
        wa[i] = fromBf16(ga[i] = toBf16(g1[i]));
      for (size_t i = 0; i < n2; ++i)
        wb[i] = fromBf16(gb[i] = toBf16(g2[i]));
      AdamWTensor ta{a.p.data(), a.m.data(), a.v.data(), nullptr,
                     n1,         true,       ga.data()};
      AdamWTensor tb{b.p.data(), b.m.data(), b.v.data(), nullptr,
                     n2,         false,      gb.data()};
      opt.step({ta, tb}, t, 1e-3f, 0.75f);
      // The same step with fp32 gradients, through the per-tensor entry.
      opt.step(AdamWTensor{fa.p.data(), fa.m.data(), fa.v.data(), wa.data(), n1,
                           true},
               t, 1e-3f, 0.75f);
      opt.step(AdamWTensor{fb.p.data(), fb.m.data(), fb.v.data(), wb.data(), n2,
                           false},
               t, 1e-3f, 0.75f);
    }
    expectSameBits(a.p, fa.p, "p", adamwSimdLevel());
    expectSameBits(b.p, fb.p, "p", adamwSimdLevel());
    expectSameBits(b.v, fb.v, "v", adamwSimdLevel());
    std::vector<float> all = a.p;
    all.insert(all.end(), b.p.begin(), b.p.end());
    if (ref.empty())
      ref = all;
    else
      EXPECT_EQ(ref, all) << threads << " threads";
  }
}

} // namespace
