//===- AttentionKernelsTest.cpp - attention.cu against runtime/cpu --------===//
//
// Part of mtc. Flash attention forward (o, lse) and backward (delta, dk/dv,
// dq) of the library kernels, on either driver, launched through
// runtime/cuda/ops/Attention.h (one place for their geometry), against
// cpu::attention / cpu::attentionGrad, for every head dimension and both
// storage types, at small ragged shapes: S not a multiple of the tiles, GQA
// (Hq / Hkv = 4), sliding windows shorter than S, softcap, non-causal,
// qOffset > 0 with a KV cache longer than S (forward), several key and query
// tiles (online softmax rescaling; query tiles skipped by the window).
//
// Tolerances. f32: max |got - want| <= 1e-4 max |want| per tensor (the
// rule for reductions and attention). bf16: inputs are rounded to bf16 and
// the reference is computed from the rounded values; every output element
// within 2 bf16 ulp of the reference rounded to bf16, or within 1/256 of the
// tensor's largest reference magnitude -- the tensor-core path rounds P and
// dS to bf16 before their products (relative error 2^-9 per term), which
// small elements that come from cancelling sums do not survive within 2 ulp.
// The test prints the measured figures.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/CudaTestDriver.h"

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/ops/Attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

using namespace mtc::cuda::test;

namespace {

class AttentionKernels : public CudaDriverTest {
public: // for the check helpers below
  using CudaDriverTest::alloc;
  using CudaDriverTest::download;
  using CudaDriverTest::sync;
  using CudaDriverTest::upload;
};

struct Config {
  int B, S, Sk, Hq, Hkv, D;
  bool causal;
  int window;
  float softcap;
  int qOffset;
  float scale = 0.0f;

  std::string str() const {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "B=%d S=%d Sk=%d Hq=%d Hkv=%d D=%d causal=%d window=%d "
                  "softcap=%g qOffset=%d scale=%g",
                  B, S, Sk, Hq, Hkv, D, causal, window, softcap, qOffset,
                  scale);
    return buf;
  }
  mtc::cpu::AttentionParams params() const {
    mtc::cpu::AttentionParams p;
    p.causal = causal;
    p.window = window;
    p.softcap = softcap;
    p.scale = scale;
    return p;
  }
};

std::vector<float> randoms(size_t n, uint32_t seed, float lo = -2,
                           float hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// max |got - want| / max |want|.
double maxRelError(const std::vector<float> &got,
                   const std::vector<float> &want) {
  double scale = 0, worst = 0;
  for (float w : want)
    scale = std::max(scale, double(std::abs(w)));
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - want[i]));
  return scale > 0 ? worst / scale : worst;
}

/// The bf16 check of the file banner. Prints the largest ulp distance
/// among the elements of at least 1/256 of the largest magnitude (the
/// others, small results of cancelling sums, can be thousands of ulp off
/// while within the absolute bound) and the largest absolute error.
void expectBf16Close(const char *what, const std::vector<uint16_t> &got,
                     const std::vector<float> &want) {
  double scale = 0;
  for (float w : want)
    scale = std::max(scale, double(std::abs(w)));
  int worstUlps = 0, outside = 0;
  double worstRel = 0;
  size_t firstBad = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    int ulps = bf16Ulps(got[i], toBf16(want[i]));
    double abs = std::abs(double(fromBf16(got[i])) - want[i]);
    if (std::abs(want[i]) >= scale / 256)
      worstUlps = std::max(worstUlps, ulps);
    worstRel = std::max(worstRel, scale > 0 ? abs / scale : abs);
    if (ulps > 2) {
      ++outside;
      if (abs > scale / 256 && firstBad == got.size())
        firstBad = i;
    }
  }
  std::printf("    %s: bf16 max %d ulp where |ref| >= max/256 (%d of %zu "
              "beyond 2 ulp), max abs error %.3g of max |ref|\n",
              what, worstUlps, outside, got.size(), worstRel);
  EXPECT_EQ(firstBad, got.size())
      << what << "[" << firstBad << "]: got "
      << (firstBad < got.size() ? fromBf16(got[firstBad]) : 0.0f) << ", want "
      << (firstBad < want.size() ? want[firstBad] : 0.0f);
}

/// Rounds \p v to bf16 in place; returns the bf16 bits.
std::vector<uint16_t> roundToBf16(std::vector<float> &v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = toBf16(v[i]);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = fromBf16(h[i]);
  return h;
}

const char *storage(bool bf16) { return bf16 ? "bf16" : "f32"; }
mtc::cuda::ops::DType type(bool bf16) {
  return bf16 ? mtc::cuda::ops::DType::BF16 : mtc::cuda::ops::DType::F32;
}

/// Runs the forward (ops::attention: attention_fwd_<storage>_d<D>) and
/// compares o and lse with cpu::attention.
void checkForward(AttentionKernels &t, const mtc::cuda::ops::Launch &L,
                  const Config &c, bool bf16) {
  SCOPED_TRACE(c.str());
  std::printf("  fwd %s %s\n", storage(bf16), c.str().c_str());
  size_t nq = size_t(c.B) * c.S * c.Hq * c.D;
  size_t nkv = size_t(c.B) * c.Sk * c.Hkv * c.D;
  std::vector<float> q = randoms(nq, 11 + c.D), k = randoms(nkv, 12 + c.S),
                     v = randoms(nkv, 13 + c.Hq);
  std::vector<uint16_t> qb, kb, vb;
  if (bf16) {
    qb = roundToBf16(q);
    kb = roundToBf16(k);
    vb = roundToBf16(v);
  }
  std::vector<float> wantO(nq), wantL(size_t(c.B) * c.Hq * c.S);
  mtc::cpu::attention(q.data(), k.data(), v.data(), wantO.data(), wantL.data(),
                      c.B, c.S, c.Sk, c.Hq, c.Hkv, c.D, c.params(), c.qOffset);
  int elem = bf16 ? 2 : 4;
  unsigned long long dq = bf16 ? t.upload(qb) : t.upload(q);
  unsigned long long dk = bf16 ? t.upload(kb) : t.upload(k);
  unsigned long long dv = bf16 ? t.upload(vb) : t.upload(v);
  unsigned long long dOut = t.alloc(nq * elem);
  unsigned long long dL = t.alloc(wantL.size() * 4);
  mtc::Status st =
      mtc::cuda::ops::attention(L, dq, dk, dv, dOut, dL, c.B, c.S, c.Sk, c.Hq,
                                c.Hkv, c.D, c.params(), c.qOffset, type(bf16));
  ASSERT_TRUE(st.ok()) << st.message();
  t.sync();
  if (bf16) {
    expectBf16Close("o", t.download<uint16_t>(dOut, nq), wantO);
  } else {
    double err = maxRelError(t.download<float>(dOut, nq), wantO);
    std::printf("    o: f32 max error %.3g of max |ref|\n", err);
    EXPECT_LE(err, 1e-4);
  }
  std::vector<float> gotL = t.download<float>(dL, wantL.size());
  double worst = 0;
  for (size_t i = 0; i < gotL.size(); ++i) {
    if (std::isinf(wantL[i])) {
      EXPECT_EQ(gotL[i], wantL[i]) << "lse[" << i << "]";
      continue;
    }
    worst = std::max(worst, std::abs(double(gotL[i]) - wantL[i]) /
                                std::max(1.0, std::abs(double(wantL[i]))));
  }
  std::printf("    lse: max error %.3g (relative, floor 1)\n", worst);
  EXPECT_LE(worst, 1e-4);
}

/// Runs delta, dkdv and dq of the backward and compares dq, dk, dv with
/// cpu::attentionGrad (o and lse from cpu::attention, fed to both).
void checkBackward(AttentionKernels &t, const mtc::cuda::ops::Launch &L,
                   const Config &c, bool bf16) {
  SCOPED_TRACE(c.str());
  std::printf("  bwd %s %s\n", storage(bf16), c.str().c_str());
  size_t nq = size_t(c.B) * c.S * c.Hq * c.D;
  size_t nkv = size_t(c.B) * c.S * c.Hkv * c.D;
  std::vector<float> q = randoms(nq, 21 + c.D), k = randoms(nkv, 22 + c.S),
                     v = randoms(nkv, 23 + c.Hq), gy = randoms(nq, 24);
  std::vector<uint16_t> qb, kb, vb, gyb, ob;
  if (bf16) {
    qb = roundToBf16(q);
    kb = roundToBf16(k);
    vb = roundToBf16(v);
    gyb = roundToBf16(gy);
  }
  std::vector<float> o(nq), lse(size_t(c.B) * c.Hq * c.S);
  mtc::cpu::attention(q.data(), k.data(), v.data(), o.data(), lse.data(), c.B,
                      c.S, c.S, c.Hq, c.Hkv, c.D, c.params());
  if (bf16)
    ob = roundToBf16(o); // what a bf16 forward would have stored
  std::vector<float> wantDq(nq), wantDk(nkv), wantDv(nkv);
  mtc::cpu::attentionGrad(q.data(), k.data(), v.data(), o.data(), lse.data(),
                          gy.data(), wantDq.data(), wantDk.data(),
                          wantDv.data(), c.B, c.S, c.Hq, c.Hkv, c.D,
                          c.params());

  int elem = bf16 ? 2 : 4;
  unsigned long long dQ = bf16 ? t.upload(qb) : t.upload(q);
  unsigned long long dK = bf16 ? t.upload(kb) : t.upload(k);
  unsigned long long dV = bf16 ? t.upload(vb) : t.upload(v);
  unsigned long long dO = bf16 ? t.upload(ob) : t.upload(o);
  unsigned long long dGy = bf16 ? t.upload(gyb) : t.upload(gy);
  unsigned long long dL = t.upload(lse);
  unsigned long long dDq = t.alloc(nq * elem), dDk = t.alloc(nkv * elem),
                     dDv = t.alloc(nkv * elem);
  mtc::Status st = mtc::cuda::ops::attentionGrad(
      L, dQ, dK, dV, dO, dL, dGy, dDq, dDk, dDv, c.B, c.S, c.Hq, c.Hkv, c.D,
      c.params(), type(bf16));
  ASSERT_TRUE(st.ok()) << st.message();
  t.sync();
  struct Out {
    const char *name;
    unsigned long long dev;
    const std::vector<float> *want;
  } outs[] = {{"dq", dDq, &wantDq}, {"dk", dDk, &wantDk}, {"dv", dDv, &wantDv}};
  for (const Out &out : outs) {
    size_t n = out.want->size();
    if (bf16) {
      expectBf16Close(out.name, t.download<uint16_t>(out.dev, n), *out.want);
    } else {
      double err = maxRelError(t.download<float>(out.dev, n), *out.want);
      std::printf("    %s: f32 max error %.3g of max |ref|\n", out.name, err);
      EXPECT_LE(err, 1e-4) << out.name;
    }
  }
}

/// The shapes every head dimension is tested at: causal with GQA 4 and a
/// window, softcap and a KV cache (forward only), non-causal with a window.
std::vector<Config> shapes(int D, bool forward) {
  std::vector<Config> v;
  v.push_back({1, 37, 37, 8, 2, D, true, 0, 0.0f, 0});
  v.push_back({2, 29, 29, 4, 1, D, true, 11, 5.0f, 0});
  if (forward)
    v.push_back({1, 21, 40, 4, 2, D, true, 16, 5.0f, 19});
  v.push_back({1, 33, 33, 2, 2, D, false, 9, 0.0f, 0, 0.3f});
  return v;
}

TEST_P(AttentionKernels, ForwardF32EveryHeadDim) {
  const mtc::cuda::ops::Launch L = makeLaunch();
  for (int D : {64, 80, 96, 128, 256})
    for (const Config &c : shapes(D, true))
      checkForward(*this, L, c, false);
}

TEST_P(AttentionKernels, ForwardBf16EveryHeadDim) {
  const mtc::cuda::ops::Launch L = makeLaunch();
  for (int D : {64, 80, 96, 128, 256})
    for (const Config &c : shapes(D, true))
      checkForward(*this, L, c, true);
}

// Several key tiles per query tile (online rescaling), several query tiles,
// a window that skips whole key tiles, rows of a KV cache that see none.
TEST_P(AttentionKernels, ForwardSeveralTiles) {
  const mtc::cuda::ops::Launch L = makeLaunch();
  for (bool bf16 : {false, true}) {
    checkForward(*this, L, {1, 150, 150, 2, 1, 64, true, 0, 0.0f, 0}, bf16);
    checkForward(*this, L, {1, 100, 130, 2, 1, 80, true, 70, 0.0f, 30}, bf16);
    checkForward(*this, L, {1, 70, 70, 1, 1, 64, false, 0, 0.0f, 0}, bf16);
  }
}

TEST_P(AttentionKernels, BackwardF32EveryHeadDim) {
  const mtc::cuda::ops::Launch L = makeLaunch();
  for (int D : {64, 80, 96, 128, 256})
    for (const Config &c : shapes(D, false))
      checkBackward(*this, L, c, false);
}

TEST_P(AttentionKernels, BackwardBf16EveryHeadDim) {
  const mtc::cuda::ops::Launch L = makeLaunch();
  for (int D : {64, 80, 96, 128, 256})
    for (const Config &c : shapes(D, false))
      checkBackward(*this, L, c, true);
}

// Several key blocks and query tiles: dk/dv loop over query tiles (some
// skipped by the window), dq over key tiles.
TEST_P(AttentionKernels, BackwardSeveralTiles) {
  const mtc::cuda::ops::Launch L = makeLaunch();
  for (bool bf16 : {false, true}) {
    checkBackward(*this, L, {1, 150, 150, 4, 1, 64, true, 0, 0.0f, 0}, bf16);
    checkBackward(*this, L, {1, 140, 140, 2, 1, 80, true, 50, 3.0f, 0}, bf16);
    checkBackward(*this, L, {1, 75, 75, 2, 2, 256, false, 0, 0.0f, 0}, bf16);
  }
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(AttentionKernels);
