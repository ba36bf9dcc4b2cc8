//===- OpsMatmulAttentionTest.cpp - GEMM, attention, movement launchers ---===//
//
// Part of mtc. The launchers of runtime/cuda/ops/Matmul.h, Attention.h and
// Movement.h, through a Launch of the fixture (makeLaunch), against the
// runtime/cpu function of the same name on the same inputs: ragged shapes;
// every transpose pair of gemm with alpha and beta; matmul with and without
// bias (f32 and bf16 storage); gradients accumulating onto a non-zero dw;
// K = 0; attention causal with GQA, sliding windows, softcap, a KV cache
// offset, at two head dims, forward and backward; transposes of 3 and 4
// dims (some merged), slice / pad / concat on middle axes, concat of more
// parts than one launch takes.
//
// Tolerances: fp32 products within 1e-5 of the reference's largest
// magnitude (max |got - ref| / max |ref|), attention within 1e-4 (lse
// within 1e-4 relative, floor 1); movement is exact. bf16 matmul (inputs
// rounded to bf16, the CPU on the rounded values): within 1e-2 (the
// output's rounding, 2^-9, and the tensor cores' order).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/ops/Attention.h"
#include "runtime/cuda/ops/Matmul.h"
#include "runtime/cuda/ops/Movement.h"
#include "test/cuda/CudaTestDriver.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace mtc;
using namespace mtc::cuda::test;
namespace ops = mtc::cuda::ops;

namespace {

class OpsMatmulAttention : public CudaDriverTest {
public: // for checkTranspose
  using CudaDriverTest::alloc;
  using CudaDriverTest::download;
  using CudaDriverTest::sync;
  using CudaDriverTest::upload;
};

/// max |got - ref| / max |ref|.
double relErr(const std::vector<float> &got, const std::vector<float> &ref) {
  double err = 0, mag = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(double(got[i]) - double(ref[i])));
    mag = std::max(mag, std::fabs(double(ref[i])));
  }
  return mag > 0 ? err / mag : err;
}

std::vector<uint16_t> bf16s(const std::vector<float> &v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = toBf16(v[i]);
  return h;
}
std::vector<float> floats(const std::vector<uint16_t> &h) {
  std::vector<float> v(h.size());
  for (size_t i = 0; i < h.size(); ++i)
    v[i] = fromBf16(h[i]);
  return v;
}

#define OK(expr)                                                               \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    ASSERT_TRUE(s_.ok()) << s_.message();                                      \
  } while (0)

/// Expects \p s to be an error whose message contains every one of \p parts.
void expectError(const Status &s, std::initializer_list<const char *> parts) {
  ASSERT_FALSE(s.ok());
  for (const char *p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos)
        << "'" << p << "' not in: " << s.message();
}

//===----------------------------------------------------------------------===//
// GEMM family
//===----------------------------------------------------------------------===//

TEST_P(OpsMatmulAttention, GemmEveryTransposeWithAlphaBeta) {
  ops::Launch L = makeLaunch();
  const int64_t M = 37, N = 23, K = 19;
  std::vector<float> A = randoms(M * K, 1), B = randoms(K * N, 2),
                     C0 = randoms(M * N, 3);
  auto dA = upload(A), dB = upload(B), dC = alloc(M * N * 4);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(std::string("transA ") + (ta ? "1" : "0") + " transB " +
                   (tb ? "1" : "0"));
      // The same buffers read as A [K, M] / B [N, K] when transposed.
      std::vector<float> ref = C0;
      cpu::gemm(ta, tb, M, N, K, 0.75f, A.data(), B.data(), -0.5f, ref.data());
      copyIn(dC, C0.data(), C0.size() * 4);
      OK(ops::gemm(L, ta, tb, M, N, K, 0.75f, dA, dB, -0.5f, dC));
      sync();
      double err = relErr(download<float>(dC, M * N), ref);
      EXPECT_LE(err, 1e-5);
    }
}

TEST_P(OpsMatmulAttention, MatmulWithAndWithoutBias) {
  ops::Launch L = makeLaunch();
  const int64_t rows = 45, K = 27, N = 33; // N * 4 not a multiple of 16
  std::vector<float> x = randoms(rows * K, 4), w = randoms(K * N, 5),
                     bias = randoms(N, 6, -5, 5);
  auto dx = upload(x), dw = upload(w), dbias = upload(bias),
       dy = upload(randoms(rows * N, 7)); // stale values must not survive
  for (bool withBias : {false, true}) {
    SCOPED_TRACE(withBias ? "bias" : "no bias");
    std::vector<float> ref(rows * N);
    cpu::matmul(x.data(), w.data(), withBias ? bias.data() : nullptr,
                ref.data(), rows, K, N);
    OK(ops::matmul(L, dx, dw, withBias ? dbias : 0, dy, rows, K, N));
    sync();
    EXPECT_LE(relErr(download<float>(dy, rows * N), ref), 1e-5);
  }
  // N = 36: the bias rows move in 16-byte words.
  const int64_t N2 = 36;
  std::vector<float> w2 = randoms(K * N2, 8), b2 = randoms(N2, 9, -5, 5),
                     ref2(rows * N2);
  cpu::matmul(x.data(), w2.data(), b2.data(), ref2.data(), rows, K, N2);
  auto dw2 = upload(w2), db2 = upload(b2), dy2 = alloc(rows * N2 * 4);
  OK(ops::matmul(L, dx, dw2, db2, dy2, rows, K, N2));
  sync();
  EXPECT_LE(relErr(download<float>(dy2, rows * N2), ref2), 1e-5);
}

TEST_P(OpsMatmulAttention, MatmulBf16WithBias) {
  ops::Launch L = makeLaunch();
  const int64_t rows = 29, K = 40, N = 24;
  std::vector<float> x = floats(bf16s(randoms(rows * K, 10))),
                     w = floats(bf16s(randoms(K * N, 11))),
                     bias = floats(bf16s(randoms(N, 12, -5, 5))), ref(rows * N);
  cpu::matmul(x.data(), w.data(), bias.data(), ref.data(), rows, K, N);
  auto dx = upload(bf16s(x)), dw = upload(bf16s(w)), db = upload(bf16s(bias)),
       dy = alloc(rows * N * 2);
  OK(ops::matmul(L, dx, dw, db, dy, rows, K, N, ops::DType::BF16));
  sync();
  double err = relErr(floats(download<uint16_t>(dy, rows * N)), ref);
  std::printf("    bf16 matmul + bias: max error %.3g of max |ref|\n", err);
  EXPECT_LE(err, 1e-2);
}

TEST_P(OpsMatmulAttention, BatchedMatmul) {
  ops::Launch L = makeLaunch();
  const int64_t batch = 3, M = 17, K = 11, N = 13;
  std::vector<float> x = randoms(batch * M * K, 13),
                     w = randoms(batch * K * N, 14), ref(batch * M * N);
  cpu::batchedMatmul(x.data(), w.data(), ref.data(), batch, M, K, N);
  auto dx = upload(x), dw = upload(w), dy = alloc(ref.size() * 4);
  OK(ops::batchedMatmul(L, dx, dw, dy, batch, M, K, N));
  sync();
  EXPECT_LE(relErr(download<float>(dy, ref.size()), ref), 1e-5);
}

TEST_P(OpsMatmulAttention, MatmulGradients) {
  ops::Launch L = makeLaunch();
  const int64_t rows = 41, K = 21, N = 15;
  std::vector<float> x = randoms(rows * K, 15), w = randoms(K * N, 16),
                     dy = randoms(rows * N, 17), dw0 = randoms(K * N, 18);
  auto dX = upload(x), dW = upload(w), dDy = upload(dy);

  std::vector<float> refDx(rows * K);
  cpu::matmulGradInput(dy.data(), w.data(), refDx.data(), rows, K, N);
  auto dDx = upload(randoms(rows * K, 19));
  OK(ops::matmulGradInput(L, dDy, dW, dDx, rows, K, N));

  std::vector<float> refDw(K * N);
  cpu::matmulGradWeight(x.data(), dy.data(), refDw.data(), rows, K, N);
  auto dDw = upload(dw0); // overwritten, not accumulated
  OK(ops::matmulGradWeight(L, dX, dDy, dDw, rows, K, N));

  // Accumulating onto a non-zero dw, twice (a weight used twice).
  std::vector<float> refAcc = dw0;
  cpu::matmulGradWeightAcc(x.data(), dy.data(), refAcc.data(), rows, K, N);
  cpu::matmulGradWeightAcc(x.data(), dy.data(), refAcc.data(), rows, K, N);
  auto dAcc = upload(dw0);
  OK(ops::matmulGradWeightAcc(L, dX, dDy, dAcc, rows, K, N));
  OK(ops::matmulGradWeightAcc(L, dX, dDy, dAcc, rows, K, N));
  sync();
  EXPECT_LE(relErr(download<float>(dDx, refDx.size()), refDx), 1e-5) << "dx";
  EXPECT_LE(relErr(download<float>(dDw, refDw.size()), refDw), 1e-5) << "dw";
  EXPECT_LE(relErr(download<float>(dAcc, refAcc.size()), refAcc), 1e-5)
      << "dw acc";
}

// K = 0: beta * C, as the CPU (the engines take no empty K); a bias alone.
TEST_P(OpsMatmulAttention, EmptyInnerDimension) {
  ops::Launch L = makeLaunch();
  const int64_t M = 5, N = 7;
  std::vector<float> C0 = randoms(M * N, 20), bias = randoms(N, 21);
  for (float beta : {0.0f, 1.0f, -1.5f}) {
    std::vector<float> ref = C0;
    cpu::gemm(false, false, M, N, 0, 1.0f, nullptr, nullptr, beta, ref.data());
    auto dC = upload(C0);
    OK(ops::gemm(L, false, false, M, N, 0, 1.0f, 0, 0, beta, dC));
    sync();
    EXPECT_EQ(download<float>(dC, M * N), ref) << "beta " << beta;
  }
  std::vector<float> ref(M * N);
  cpu::matmul(nullptr, nullptr, bias.data(), ref.data(), M, 0, N);
  auto dy = upload(C0), db = upload(bias);
  OK(ops::matmul(L, 0, 0, db, dy, M, 0, N));
  sync();
  EXPECT_EQ(download<float>(dy, M * N), ref);

  expectError(ops::gemm(L, false, false, -1, N, 3, 1.0f, db, db, 0.0f, dy),
              {"gemm", "negative"});
  expectError(ops::matmul(L, 0, db, 0, dy, M, 3, N), {"matmul", "null"});
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

struct AttnCase {
  int64_t B, S, Sk, Hq, Hkv, D;
  cpu::AttentionParams p;
  int64_t qOffset;
};

cpu::AttentionParams params(bool causal, int64_t window, double softcap,
                            double scale = 0) {
  cpu::AttentionParams p;
  p.causal = causal;
  p.window = window;
  p.softcap = softcap;
  p.scale = scale;
  return p;
}

/// Causal + GQA 4 + window + softcap; non-causal with a scale; a KV cache
/// (forward only) -- at D = 64 and 80.
std::vector<AttnCase> attnCases(bool forward) {
  std::vector<AttnCase> v;
  for (int64_t D : {64, 80}) {
    v.push_back({2, 29, 29, 4, 1, D, params(true, 11, 5.0), 0});
    v.push_back({1, 70, 70, 2, 2, D, params(false, 0, 0.0, 0.3), 0});
    if (forward)
      v.push_back({1, 21, 40, 4, 2, D, params(true, 16, 5.0), 19});
  }
  return v;
}

std::string str(const AttnCase &c) {
  return "B=" + std::to_string(c.B) + " S=" + std::to_string(c.S) +
         " Sk=" + std::to_string(c.Sk) + " Hq=" + std::to_string(c.Hq) +
         " Hkv=" + std::to_string(c.Hkv) + " D=" + std::to_string(c.D) +
         " causal=" + std::to_string(c.p.causal) +
         " window=" + std::to_string(c.p.window) +
         " softcap=" + std::to_string(c.p.softcap) +
         " qOffset=" + std::to_string(c.qOffset);
}

/// lse: max |got - ref| / max(1, |ref|); -inf rows must match exactly.
double lseErr(const std::vector<float> &got, const std::vector<float> &ref) {
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i])) {
      if (got[i] != ref[i])
        return INFINITY;
      continue;
    }
    worst = std::max(worst, std::fabs(double(got[i]) - ref[i]) /
                                std::max(1.0, std::fabs(double(ref[i]))));
  }
  return worst;
}

TEST_P(OpsMatmulAttention, AttentionForward) {
  ops::Launch L = makeLaunch();
  for (const AttnCase &c : attnCases(true)) {
    SCOPED_TRACE(str(c));
    const size_t nq = c.B * c.S * c.Hq * c.D, nkv = c.B * c.Sk * c.Hkv * c.D;
    std::vector<float> q = randoms(nq, 30), k = randoms(nkv, 31),
                       v = randoms(nkv, 32), o(nq), lse(c.B * c.Hq * c.S);
    cpu::attention(q.data(), k.data(), v.data(), o.data(), lse.data(), c.B, c.S,
                   c.Sk, c.Hq, c.Hkv, c.D, c.p, c.qOffset);
    auto dq = upload(q), dk = upload(k), dv = upload(v), dO = alloc(nq * 4),
         dL = alloc(lse.size() * 4);
    OK(ops::attention(L, dq, dk, dv, dO, dL, c.B, c.S, c.Sk, c.Hq, c.Hkv, c.D,
                      c.p, c.qOffset));
    sync();
    double err = relErr(download<float>(dO, nq), o);
    double errL = lseErr(download<float>(dL, lse.size()), lse);
    std::printf("    fwd %s: o %.3g, lse %.3g\n", str(c).c_str(), err, errL);
    EXPECT_LE(err, 1e-4);
    EXPECT_LE(errL, 1e-4);
  }
}

TEST_P(OpsMatmulAttention, AttentionBackward) {
  ops::Launch L = makeLaunch();
  for (const AttnCase &c : attnCases(false)) {
    SCOPED_TRACE(str(c));
    const size_t nq = c.B * c.S * c.Hq * c.D, nkv = c.B * c.S * c.Hkv * c.D;
    std::vector<float> q = randoms(nq, 40), k = randoms(nkv, 41),
                       v = randoms(nkv, 42), gy = randoms(nq, 43), o(nq),
                       lse(c.B * c.Hq * c.S);
    cpu::attention(q.data(), k.data(), v.data(), o.data(), lse.data(), c.B, c.S,
                   c.S, c.Hq, c.Hkv, c.D, c.p);
    std::vector<float> rq(nq), rk(nkv), rv(nkv);
    cpu::attentionGrad(q.data(), k.data(), v.data(), o.data(), lse.data(),
                       gy.data(), rq.data(), rk.data(), rv.data(), c.B, c.S,
                       c.Hq, c.Hkv, c.D, c.p);
    auto dq = upload(q), dk = upload(k), dv = upload(v), dO = upload(o),
         dL = upload(lse), dGy = upload(gy);
    // Stale values in the outputs: they are overwritten.
    auto gq = upload(randoms(nq, 44)), gk = upload(randoms(nkv, 45)),
         gv = upload(randoms(nkv, 46));
    OK(ops::attentionGrad(L, dq, dk, dv, dO, dL, dGy, gq, gk, gv, c.B, c.S,
                          c.Hq, c.Hkv, c.D, c.p));
    sync();
    double eq = relErr(download<float>(gq, nq), rq),
           ek = relErr(download<float>(gk, nkv), rk),
           ev = relErr(download<float>(gv, nkv), rv);
    std::printf("    bwd %s: dq %.3g, dk %.3g, dv %.3g\n", str(c).c_str(), eq,
                ek, ev);
    EXPECT_LE(eq, 1e-4);
    EXPECT_LE(ek, 1e-4);
    EXPECT_LE(ev, 1e-4);
  }
}

TEST_P(OpsMatmulAttention, AttentionRejectsWhatItCannotRun) {
  ops::Launch L = makeLaunch();
  auto buf = alloc(4096);
  cpu::AttentionParams p;
  expectError(ops::attention(L, buf, buf, buf, buf, 0, 1, 4, 4, 2, 1, 48, p),
              {"attention", "head dim 48", "64, 80, 96, 128, 256"});
  expectError(ops::attentionGrad(L, buf, buf, buf, buf, buf, buf, buf, buf, buf,
                                 1, 4, 2, 1, 32, p),
              {"attentionGrad", "head dim 32", "64, 80, 96, 128, 256"});
  expectError(ops::attention(L, buf, buf, buf, buf, 0, 1, 4, 4, 3, 2, 64, p),
              {"attention", "Hkv=2", "Hq=3"});
}

//===----------------------------------------------------------------------===//
// Movement
//===----------------------------------------------------------------------===//

/// Transposes elements 1, 2, 3, ... (distinct, exact in float) stored as
/// E (float, or uint16_t bit patterns for the 2-byte path) and compares
/// with cpu::transpose of the same values.
template <typename E>
void checkTranspose(OpsMatmulAttention &t, const ops::Launch &L,
                    const std::vector<int64_t> &shape,
                    const std::vector<int64_t> &perm, ops::DType dtype) {
  size_t n = std::accumulate(shape.begin(), shape.end(), size_t(1),
                             std::multiplies<size_t>());
  std::vector<E> x(n);
  std::vector<float> xf(n), ref(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = E(i + 1);
    xf[i] = float(x[i]);
  }
  cpu::transpose(xf.data(), shape, perm, ref.data());
  auto dx = t.upload(x), dy = t.alloc(n * sizeof(E));
  OK(ops::transpose(L, dx, shape, perm, dy, dtype));
  t.sync();
  std::vector<E> y = t.download<E>(dy, n);
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(float(y[i]), ref[i]) << i;
}

TEST_P(OpsMatmulAttention, TransposeThreeAndFourDims) {
  ops::Launch L = makeLaunch();
  struct Case {
    std::vector<int64_t> shape, perm;
  } cases[] = {
      {{5, 7, 3}, {2, 0, 1}},       {{5, 7, 3}, {1, 0, 2}},
      {{3, 4, 5, 6}, {0, 2, 1, 3}}, // [B, S, H, D] -> [B, H, S, D]
      {{3, 4, 5, 6}, {3, 1, 2, 0}}, // 1, 2 merge
      {{2, 1, 5, 8}, {2, 3, 1, 0}}, // a unit dim dropped, 5 and 8 merge
      {{4, 6, 2, 8}, {1, 0, 2, 3}}, // 2 and 8 merge: 16-byte words
  };
  for (const Case &c : cases) {
    SCOPED_TRACE("rank " + std::to_string(c.shape.size()) + " perm[0] " +
                 std::to_string(c.perm[0]));
    checkTranspose<float>(*this, L, c.shape, c.perm, ops::DType::F32);
    checkTranspose<uint16_t>(*this, L, c.shape, c.perm, ops::DType::BF16);
  }
}

// The shape descriptor the launcher builds: unit dims dropped, runs merged.
TEST_P(OpsMatmulAttention, TransposeShapeMergesDims) {
  Expected<mtc_cuda::TransposeShape> s =
      ops::transposeShape({2, 1, 5, 8}, {2, 3, 1, 0});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->rank, 2);
  EXPECT_EQ(s->shape[0], 2);
  EXPECT_EQ(s->shape[1], 40);
  EXPECT_EQ(s->perm[0], 1);
  EXPECT_EQ(s->perm[1], 0);
  s = ops::transposeShape({1, 1}, {1, 0});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->shape[0], 1);
  // Nine dims that no merge reduces.
  std::vector<int64_t> nine(9, 2), rev = {8, 7, 6, 5, 4, 3, 2, 1, 0};
  expectError(ops::transposeShape(nine, rev).status(),
              {"transpose", "9 dims", "at most 8"});
  expectError(ops::transposeShape({2, 3}, {0, 0}).status(),
              {"transpose", "not a permutation"});
}

TEST_P(OpsMatmulAttention, SlicePadConcatOnMiddleAxes) {
  ops::Launch L = makeLaunch();
  const int64_t outer = 3, n = 11;
  for (int64_t inner : {1, 5, 8}) {
    SCOPED_TRACE("inner " + std::to_string(inner));
    std::vector<float> x = randoms(outer * n * inner, 50);
    auto dx = upload(x);
    // slice [3, 9), then pad it back.
    const int64_t start = 3, end = 9, m = end - start;
    std::vector<float> ref(outer * m * inner), back(x.size());
    cpu::slice(x.data(), ref.data(), outer, n, inner, start, end);
    cpu::pad(ref.data(), back.data(), outer, n, inner, start, end);
    auto dy = alloc(ref.size() * 4), dz = upload(randoms(x.size(), 51));
    OK(ops::slice(L, dx, dy, outer, n, inner, start, end));
    OK(ops::pad(L, dy, dz, outer, n, inner, start, end));
    sync();
    EXPECT_EQ(download<float>(dy, ref.size()), ref);
    EXPECT_EQ(download<float>(dz, back.size()), back);

    // concat of 3 parts, one empty; and of 11 (two groups, then one more).
    for (size_t count : {3, 11}) {
      std::vector<int64_t> sizes;
      std::vector<std::vector<float>> parts;
      std::vector<const float *> ptrs;
      std::vector<ops::DevPtr> dparts;
      for (size_t i = 0; i < count; ++i) {
        sizes.push_back(i == 1 ? 0 : int64_t(1 + i % 4));
        parts.push_back(randoms(outer * sizes.back() * inner, 60 + i));
        ptrs.push_back(parts.back().data());
        dparts.push_back(sizes.back() ? upload(parts.back()) : 0);
      }
      int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
      std::vector<float> want(outer * total * inner);
      cpu::concat(ptrs, sizes, want.data(), outer, inner);
      auto dc = alloc(want.size() * 4);
      OK(ops::concat(L, dparts, sizes, dc, outer, inner));
      sync();
      EXPECT_EQ(download<float>(dc, want.size()), want) << count << " parts";
    }
  }
  auto buf = alloc(64);
  expectError(ops::slice(L, buf, buf, 1, 4, 1, 3, 5), {"slice", "[3, 5)"});
  expectError(ops::pad(L, buf, buf, 1, 4, 1, 2, 1), {"pad", "[2, 1)"});
  expectError(ops::concat(L, {buf}, {1, 2}, buf, 1, 1),
              {"concat", "1 parts but 2 sizes"});
}

TEST_P(OpsMatmulAttention, SlicePadBf16) {
  ops::Launch L = makeLaunch();
  const int64_t outer = 2, n = 9, inner = 4, start = 2, end = 7;
  std::vector<uint16_t> x = bf16s(randoms(outer * n * inner, 70));
  std::vector<float> xf = floats(x), ref(outer * (end - start) * inner),
                     back(x.size());
  cpu::slice(xf.data(), ref.data(), outer, n, inner, start, end);
  cpu::pad(ref.data(), back.data(), outer, n, inner, start, end);
  auto dx = upload(x), dy = alloc(ref.size() * 2), dz = alloc(x.size() * 2);
  OK(ops::slice(L, dx, dy, outer, n, inner, start, end, ops::DType::BF16));
  OK(ops::pad(L, dy, dz, outer, n, inner, start, end, ops::DType::BF16));
  sync();
  EXPECT_EQ(floats(download<uint16_t>(dy, ref.size())), ref);
  EXPECT_EQ(floats(download<uint16_t>(dz, back.size())), back);
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(OpsMatmulAttention);
