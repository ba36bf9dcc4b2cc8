//===- KernelsTest.cpp - CPU kernels vs double references and FD ----------===//
//
// Part of mtc.
//
// Every forward kernel is compared with a naive double-precision reference
// written here. Every gradient kernel is compared with central finite
// differences, in double, of that reference forward (loss = sum(w * f(x))
// with random weights w): element by element at small sizes, and along random
// directions at sizes that span several kernel tiles. Linear data-movement
// VJPs are checked through <f(x), y> == <x, f^T(y)>. Fixed seeds throughout.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <thread>

using namespace mtc::cpu;

namespace {

using VD = std::vector<double>;
using VF = std::vector<float>;

VF randv(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  VF v(n);
  for (auto &x : v)
    x = d(g);
  return v;
}
VD toD(const VF &v) { return VD(v.begin(), v.end()); }
double dot(const VD &a, const VD &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}
double maxAbs(const VD &v) {
  double m = 0;
  for (double x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

/// |got - want| <= atol + rtol * |want| elementwise; reports the worst.
void expectClose(const VF &got, const VD &want, double rtol, double atol,
                 const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]) -
                 (atol + rtol * std::fabs(want[i]));
    if (!(err <= worst) || std::isnan(got[i]) != std::isnan(want[i])) {
      worst = std::isnan(err) ? 1e30 : err;
      at = i;
    }
  }
  EXPECT_LE(worst, 0.0) << what << ": index " << at << " got " << got[at]
                        << " want " << want[at];
}

using Fn = std::function<VD(const VD &)>;

/// Element-wise central differences of L(x) = <w, f(x)> at x0.
VD numGrad(const Fn &f, const VD &x0, const VD &w, double h = 1e-5) {
  VD g(x0.size()), x = x0;
  for (size_t i = 0; i < x0.size(); ++i) {
    x[i] = x0[i] + h;
    double lp = dot(w, f(x));
    x[i] = x0[i] - h;
    double lm = dot(w, f(x));
    x[i] = x0[i];
    g[i] = (lp - lm) / (2 * h);
  }
  return g;
}

/// Checks an analytic gradient against FD of <w, f> element by element.
void checkGrad(const Fn &f, const VD &x0, const VD &w, const VF &grad,
               double rtol, double atol, const std::string &what) {
  VD n = numGrad(f, x0, w);
  expectClose(grad, n, rtol, atol * std::max(1.0, maxAbs(n)), what);
}

/// Checks <grad, u> against the FD directional derivative along `dirs`
/// random directions u.
void checkDirectional(const Fn &f, const VD &x0, const VD &w, const VF &grad,
                      int dirs, double rtol, const std::string &what,
                      uint32_t seed = 99) {
  for (int d = 0; d < dirs; ++d) {
    VD u = toD(randv(x0.size(), seed + d));
    const double h = 1e-5;
    VD xp = x0, xm = x0;
    for (size_t i = 0; i < x0.size(); ++i) {
      xp[i] += h * u[i];
      xm[i] -= h * u[i];
    }
    double num = (dot(w, f(xp)) - dot(w, f(xm))) / (2 * h);
    double ana = 0, scale = 0;
    for (size_t i = 0; i < x0.size(); ++i) {
      ana += double(grad[i]) * u[i];
      scale += std::fabs(double(grad[i]) * u[i]);
    }
    EXPECT_NEAR(ana, num, rtol * std::max(scale, 1e-3))
        << what << " direction " << d;
  }
}

int64_t numel(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// Restores the thread count at scope exit.
struct ThreadsGuard {
  int saved = threads();
  ~ThreadsGuard() { setThreads(saved); }
};

} // namespace

//===----------------------------------------------------------------------===//
// parallelFor
//===----------------------------------------------------------------------===//

TEST(KernelsParallel, CoversEveryIndexOnceWithFixedChunks) {
  ThreadsGuard guard;
  for (int t : {1, 2, 3, 7}) {
    setThreads(t);
    EXPECT_EQ(threads(), t);
    for (int64_t n : {1, 2, 5, 64, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      std::vector<std::pair<int64_t, int64_t>> chunks;
      std::mutex mu;
      parallelFor(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          hits[i]++;
        std::lock_guard<std::mutex> lock(mu);
        chunks.push_back({b, e});
      });
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " t=" << t;
      std::sort(chunks.begin(), chunks.end());
      int64_t c = std::min<int64_t>(t, n);
      ASSERT_EQ(int64_t(chunks.size()), c);
      for (int64_t i = 0; i < c; ++i) {
        EXPECT_EQ(chunks[i].first, n * i / c);
        EXPECT_EQ(chunks[i].second, n * (i + 1) / c);
      }
    }
  }
  parallelFor(0, [](int64_t, int64_t) { FAIL() << "called for n = 0"; });
}

TEST(KernelsParallel, NestedAndConcurrentCallsDoNotDeadlock) {
  ThreadsGuard guard;
  setThreads(3);
  std::atomic<int64_t> total{0};
  parallelFor(6, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      parallelFor(10, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  EXPECT_EQ(total.load(), 60);
  // Several application threads issuing parallel work at once.
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> ts;
  for (int k = 0; k < 4; ++k)
    ts.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep)
        parallelFor(100, [&](int64_t b, int64_t e) {
          int64_t s = 0;
          for (int64_t i = b; i < e; ++i)
            s += i;
          sum += s;
        });
    });
  for (auto &t : ts)
    t.join();
  EXPECT_EQ(sum.load(), 4 * 50 * 4950);
}

//===----------------------------------------------------------------------===//
// Dense algebra
//===----------------------------------------------------------------------===//

namespace {
VD matmulRef(const VD &x, const VD &w, int64_t M, int64_t K, int64_t N) {
  VD y(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < N; ++j)
        y[i * N + j] += x[i * K + k] * w[k * N + j];
  return y;
}
} // namespace

TEST(KernelsGemm, AllTransposesAlphaBeta) {
  const int64_t M = 13, N = 17, K = 9;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      VF A = randv(M * K, 1), B = randv(K * N, 2), C = randv(M * N, 3);
      VD want(M * N);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k)
            s += double(ta ? A[k * M + i] : A[i * K + k]) *
                 double(tb ? B[j * K + k] : B[k * N + j]);
          want[i * N + j] = 0.5 * s + 2.0 * C[i * N + j];
        }
      gemm(ta, tb, M, N, K, 0.5f, A.data(), B.data(), 2.0f, C.data());
      expectClose(C, want, 1e-5, 1e-5,
                  "gemm ta=" + std::to_string(ta) +
                      " tb=" + std::to_string(tb));
    }
  // K == 0: C = beta * C.
  VF C = {1, 2, 3, 4};
  gemm(false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.5f, C.data());
  expectClose(C, {0.5, 1, 1.5, 2}, 0, 0, "gemm K=0");
}

TEST(KernelsGemm, MatmulBiasAndBatched) {
  const int64_t M = 33, K = 20, N = 47;
  VF x = randv(M * K, 4), w = randv(K * N, 5), bias = randv(N, 6);
  VF y(M * N);
  matmul(x.data(), w.data(), bias.data(), y.data(), M, K, N);
  VD want = matmulRef(toD(x), toD(w), M, K, N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      want[i * N + j] += bias[j];
  expectClose(y, want, 1e-5, 1e-5, "matmul+bias");
  matmul(x.data(), w.data(), nullptr, y.data(), M, K, N);
  expectClose(y, matmulRef(toD(x), toD(w), M, K, N), 1e-5, 1e-5, "matmul");

  const int64_t batch = 3, m = 5, k = 7, n = 4;
  VF bx = randv(batch * m * k, 7), bw = randv(batch * k * n, 8);
  VF by(batch * m * n);
  batchedMatmul(bx.data(), bw.data(), by.data(), batch, m, k, n);
  VD bwant;
  for (int64_t b = 0; b < batch; ++b) {
    VD part = matmulRef(
        VD(bx.begin() + b * m * k, bx.begin() + (b + 1) * m * k),
        VD(bw.begin() + b * k * n, bw.begin() + (b + 1) * k * n), m, k, n);
    bwant.insert(bwant.end(), part.begin(), part.end());
  }
  expectClose(by, bwant, 1e-5, 1e-5, "batchedMatmul");
}

TEST(KernelsGemm, MatmulGradsMatchFiniteDifferences) {
  const int64_t R = 6, K = 5, N = 4;
  VF x = randv(R * K, 10), w = randv(K * N, 11), wt = randv(R * N, 12);
  VD W = toD(wt);
  VF dx(R * K);
  matmulGradInput(wt.data(), w.data(), dx.data(), R, K, N);
  checkGrad([&](const VD &xx) { return matmulRef(xx, toD(w), R, K, N); },
            toD(x), W, dx, 1e-5, 1e-6, "matmulGradInput");
  VF dw0 = randv(K * N, 13), dw = dw0;
  matmulGradWeightAcc(x.data(), wt.data(), dw.data(), R, K, N);
  for (int64_t i = 0; i < K * N; ++i)
    dw[i] -= dw0[i]; // accumulates on top of what was there
  checkGrad([&](const VD &ww) { return matmulRef(toD(x), ww, R, K, N); },
            toD(w), W, dw, 1e-5, 1e-6, "matmulGradWeightAcc");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

namespace {
double unaryRef(Unary f, double x, double p) {
  switch (f) {
  case Unary::Neg:
    return -x;
  case Unary::Exp:
    return std::exp(x);
  case Unary::Log:
    return std::log(x);
  case Unary::Silu:
    return x / (1 + std::exp(-x));
  case Unary::Relu:
    return x > 0 ? x : 0;
  case Unary::Sigmoid:
    return 1 / (1 + std::exp(-x));
  case Unary::Tanh:
    return std::tanh(x);
  case Unary::Rsqrt:
    return 1 / std::sqrt(x);
  case Unary::Sqrt:
    return std::sqrt(x);
  case Unary::Square:
    return x * x;
  case Unary::GeluErf:
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  case Unary::GeluTanh:
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  case Unary::Softcap:
    return p * std::tanh(x / p);
  case Unary::Relu2:
    return x > 0 ? x * x : 0;
  }
  return 0;
}
const Unary kAllUnary[] = {
#define MTC_UNARY_FN(Enum, Name, Param) Unary::Enum,
#include "lib/Bundle/UnaryFns.def"
};
bool positiveDomain(Unary f) {
  return f == Unary::Log || f == Unary::Rsqrt || f == Unary::Sqrt;
}
} // namespace

TEST(KernelsElementwise, UnaryMatchesReference) {
  const int64_t n = 40000; // several parallel chunks
  for (Unary f : kAllUnary) {
    VF x = positiveDomain(f) ? randv(n, 20, 0.05f, 4.0f) : randv(n, 20, -6, 6);
    VF y(n);
    unary(f, x.data(), y.data(), n, 3.0f);
    VD want(n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = unaryRef(f, x[i], 3.0);
    expectClose(y, want, 2e-6, 1e-6,
                "unary " + std::to_string(static_cast<int>(f)));
  }
  // The vectorised exp and tanh over wide and tiny ranges (relative error).
  struct R {
    Unary f;
    float lo, hi;
  };
  for (const R &r :
       {R{Unary::Exp, -87.0f, 88.0f}, R{Unary::Tanh, -1e-3f, 1e-3f},
        R{Unary::Tanh, -20.0f, 20.0f}, R{Unary::Tanh, -0.7f, 0.7f}}) {
    VF x = randv(n, 23, r.lo, r.hi), y(n);
    unary(r.f, x.data(), y.data(), n);
    VD want(n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = unaryRef(r.f, x[i], 0);
    expectClose(y, want, 3e-7, 0, "unary range " + std::to_string(int(r.f)));
  }
  VF special = {-INFINITY, INFINITY, 100.0f, -100.0f, NAN}, ys(5);
  unary(Unary::Exp, special.data(), ys.data(), 5);
  EXPECT_EQ(ys[0], 0.0f);
  EXPECT_EQ(ys[1], INFINITY);
  EXPECT_EQ(ys[2], INFINITY);
  EXPECT_EQ(ys[3], 0.0f);
  EXPECT_TRUE(std::isnan(ys[4]));
  // Saturation: sigmoid/silu do not produce NaN at the extremes.
  VF x = {-200.0f, 200.0f}, y(2);
  unary(Unary::Sigmoid, x.data(), y.data(), 2);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 1.0f);
  unary(Unary::Silu, x.data(), y.data(), 2);
  EXPECT_EQ(y[0], -0.0f);
  EXPECT_EQ(y[1], 200.0f);
}

TEST(KernelsElementwise, UnaryGradMatchesFiniteDifferences) {
  const int64_t n = 64;
  for (Unary f : kAllUnary) {
    VF x = positiveDomain(f) ? randv(n, 21, 0.2f, 3.0f) : randv(n, 21, -3, 3);
    if (f == Unary::Relu)
      for (auto &v : x)
        if (std::fabs(v) < 1e-3f)
          v = 0.5f; // keep away from the kink
    VF w = randv(n, 22), dx(n);
    unaryGrad(f, x.data(), w.data(), dx.data(), n, 2.5f);
    checkGrad(
        [&](const VD &xx) {
          VD y(xx.size());
          for (size_t i = 0; i < xx.size(); ++i)
            y[i] = unaryRef(f, xx[i], 2.5);
          return y;
        },
        toD(x), toD(w), dx, 1e-5, 1e-6,
        "unaryGrad " + std::to_string(static_cast<int>(f)));
  }
}

namespace {
/// Maps an output multi-index to the flat index of a right-aligned operand.
int64_t bcastIndex(int64_t o, const std::vector<int64_t> &out,
                   const std::vector<int64_t> &s) {
  int64_t idx = 0, stride = 1;
  size_t off = out.size() - s.size();
  for (size_t i = out.size(); i-- > 0;) {
    int64_t c = o % out[i];
    o /= out[i];
    if (i >= off) {
      int64_t d = s[i - off];
      idx += (d == 1 ? 0 : c) * stride;
      stride *= d;
    }
  }
  return idx;
}
double binRef(Binary op, double a, double b) {
  switch (op) {
  case Binary::Add:
    return a + b;
  case Binary::Sub:
    return a - b;
  case Binary::Mul:
    return a * b;
  case Binary::Div:
    return a / b;
  }
  return 0;
}
VD binaryRef(Binary op, const VD &a, const std::vector<int64_t> &as,
             const VD &b, const std::vector<int64_t> &bs,
             const std::vector<int64_t> &out) {
  VD y(numel(out));
  for (int64_t o = 0; o < numel(out); ++o)
    y[o] = binRef(op, a[bcastIndex(o, out, as)], b[bcastIndex(o, out, bs)]);
  return y;
}
struct BcastCase {
  std::vector<int64_t> a, b, out;
};
const BcastCase kBcastCases[] = {
    {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
    {{2, 3, 4}, {3, 1}, {2, 3, 4}},
    {{4, 1, 5}, {1, 3, 1}, {4, 3, 5}},
    {{2, 3, 4}, {}, {2, 3, 4}},
    {{5}, {2, 3, 5}, {2, 3, 5}},
    {{3, 1, 2, 1}, {1, 4, 1, 6}, {3, 4, 2, 6}},
    {{1}, {1}, {1}},
};
} // namespace

TEST(KernelsElementwise, BroadcastingBinaryMatchesReference) {
  for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div})
    for (const auto &c : kBcastCases) {
      VF a = randv(numel(c.a), 30), b = randv(numel(c.b), 31, 0.5f, 2.0f);
      VF y(numel(c.out));
      binary(op, a.data(), c.a, b.data(), c.b, y.data(), c.out);
      expectClose(y, binaryRef(op, toD(a), c.a, toD(b), c.b, c.out), 1e-6, 1e-7,
                  "binary op " + std::to_string(static_cast<int>(op)));
    }
  // Large enough for several parallel tasks.
  std::vector<int64_t> as = {64, 1, 512}, bs = {3, 1}, out = {64, 3, 512};
  VF a = randv(numel(as), 32), b = randv(numel(bs), 33), y(numel(out));
  binary(Binary::Mul, a.data(), as, b.data(), bs, y.data(), out);
  expectClose(y, binaryRef(Binary::Mul, toD(a), as, toD(b), bs, out), 1.2e-7, 0,
              "binary large");
}

namespace {
VD reduceToRef(const VD &x, const std::vector<int64_t> &from,
               const std::vector<int64_t> &to) {
  VD y(numel(to), 0.0);
  for (int64_t i = 0; i < numel(from); ++i)
    y[bcastIndex(i, from, to)] += x[i];
  return y;
}
} // namespace

TEST(KernelsElementwise, ReduceToMatchesReference) {
  struct C {
    std::vector<int64_t> from, to;
  };
  for (const C &c : std::vector<C>{{{2, 3, 4}, {4}},
                                   {{2, 3, 4}, {3, 1}},
                                   {{2, 3, 4}, {}},
                                   {{2, 3, 4}, {1, 1, 1}},
                                   {{2, 3, 4}, {2, 3, 4}},
                                   {{4, 3, 5}, {4, 1, 5}},
                                   {{3, 4, 2, 6}, {1, 4, 1, 6}},
                                   {{7, 300}, {300}},
                                   {{100000}, {}},
                                   {{64, 3, 700}, {3, 1}}}) {
    VF x = randv(numel(c.from), 40), y(numel(c.to));
    reduceTo(x.data(), c.from, y.data(), c.to);
    expectClose(y, reduceToRef(toD(x), c.from, c.to), 1e-6, 1e-6,
                "reduceTo to rank " + std::to_string(c.to.size()));
  }
}

TEST(KernelsElementwise, BinaryGradThroughReduceToMatchesFiniteDifferences) {
  // The executor's VJP of a broadcast binary op: elementwise partials with
  // the same kernels, then reduceTo each operand's shape.
  for (Binary op : {Binary::Add, Binary::Sub, Binary::Mul, Binary::Div})
    for (const auto &c : kBcastCases) {
      VF a = randv(numel(c.a), 50), b = randv(numel(c.b), 51, 0.5f, 2.0f);
      VF dy = randv(numel(c.out), 52);
      int64_t n = numel(c.out);
      VF ab(n), bb(n), ga(n), gb(n);
      VF zero(1, 0.0f);
      binary(Binary::Add, a.data(), c.a, zero.data(), {}, ab.data(), c.out);
      binary(Binary::Add, b.data(), c.b, zero.data(), {}, bb.data(), c.out);
      for (int64_t i = 0; i < n; ++i) {
        switch (op) {
        case Binary::Add:
          ga[i] = dy[i];
          gb[i] = dy[i];
          break;
        case Binary::Sub:
          ga[i] = dy[i];
          gb[i] = -dy[i];
          break;
        case Binary::Mul:
          ga[i] = dy[i] * bb[i];
          gb[i] = dy[i] * ab[i];
          break;
        case Binary::Div:
          ga[i] = dy[i] / bb[i];
          gb[i] = -dy[i] * ab[i] / (bb[i] * bb[i]);
          break;
        }
      }
      VF da(numel(c.a)), db(numel(c.b));
      reduceTo(ga.data(), c.out, da.data(), c.a);
      reduceTo(gb.data(), c.out, db.data(), c.b);
      std::string what = "binary grad op " + std::to_string(int(op));
      checkGrad(
          [&](const VD &aa) {
            return binaryRef(op, aa, c.a, toD(b), c.b, c.out);
          },
          toD(a), toD(dy), da, 1e-5, 1e-6, what + " wrt a");
      checkGrad(
          [&](const VD &bb2) {
            return binaryRef(op, toD(a), c.a, bb2, c.b, c.out);
          },
          toD(b), toD(dy), db, 1e-5, 1e-6, what + " wrt b");
    }
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

namespace {
VD reduceRef(Reduce r, const VD &x, int64_t outer, int64_t n, int64_t inner) {
  VD y(outer * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double acc = r == Reduce::Max ? -INFINITY : 0.0;
      for (int64_t k = 0; k < n; ++k) {
        double v = x[(o * n + k) * inner + i];
        acc = r == Reduce::Max ? std::max(acc, v) : acc + v;
      }
      y[o * inner + i] = r == Reduce::Mean ? acc / n : acc;
    }
  return y;
}
VD softmaxRef(const VD &x, int64_t outer, int64_t n, int64_t inner) {
  VD y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < n; ++k)
        m = std::max(m, x[(o * n + k) * inner + i]);
      for (int64_t k = 0; k < n; ++k)
        s += std::exp(x[(o * n + k) * inner + i] - m);
      for (int64_t k = 0; k < n; ++k)
        y[(o * n + k) * inner + i] =
            std::exp(x[(o * n + k) * inner + i] - m) / s;
    }
  return y;
}
struct Dims3 {
  int64_t outer, n, inner;
};
const Dims3 kReduceDims[] = {
    {3, 7, 1}, {2, 5, 3}, {1, 9, 300}, {4, 1000, 1}, {5, 33, 17}};
} // namespace

TEST(KernelsNorm, ReduceMatchesReference) {
  for (Reduce r : {Reduce::Sum, Reduce::Mean, Reduce::Max})
    for (const auto &d : kReduceDims) {
      VF x = randv(d.outer * d.n * d.inner, 60), y(d.outer * d.inner);
      reduce(r, x.data(), y.data(), d.outer, d.n, d.inner);
      expectClose(y, reduceRef(r, toD(x), d.outer, d.n, d.inner), 1e-6, 1e-6,
                  "reduce " + std::to_string(int(r)));
    }
}

TEST(KernelsNorm, ReduceGradMatchesFiniteDifferences) {
  for (Reduce r : {Reduce::Sum, Reduce::Mean, Reduce::Max})
    for (const auto &d : {Dims3{3, 7, 1}, Dims3{2, 5, 3}}) {
      int64_t N = d.outer * d.n * d.inner;
      VF x = randv(N, 61), w = randv(d.outer * d.inner, 62), dx(N);
      reduceGrad(r, x.data(), w.data(), dx.data(), d.outer, d.n, d.inner);
      checkGrad(
          [&](const VD &xx) { return reduceRef(r, xx, d.outer, d.n, d.inner); },
          toD(x), toD(w), dx, 1e-5, 1e-6,
          "reduceGrad " + std::to_string(int(r)));
    }
  // Max ties: the first maximal element gets the gradient.
  VF x = {1, 3, 3, 2}, dy = {5}, dx(4);
  reduceGrad(Reduce::Max, x.data(), dy.data(), dx.data(), 1, 4, 1);
  EXPECT_EQ(dx, (VF{0, 5, 0, 0}));
}

TEST(KernelsNorm, SoftmaxForwardAndGrad) {
  for (const auto &d : kReduceDims) {
    VF x = randv(d.outer * d.n * d.inner, 70, -8, 8), y(x.size());
    softmax(x.data(), y.data(), d.outer, d.n, d.inner);
    expectClose(y, softmaxRef(toD(x), d.outer, d.n, d.inner), 1e-5, 1e-7,
                "softmax");
  }
  // Large logits: max subtraction keeps it finite.
  VF big = {1000.0f, 1001.0f, 999.0f}, yb(3);
  softmax(big.data(), yb.data(), 1, 3, 1);
  expectClose(yb, softmaxRef(toD(big), 1, 3, 1), 1e-6, 1e-7, "softmax big");
  for (const auto &d : {Dims3{3, 7, 1}, Dims3{2, 5, 3}}) {
    VF x = randv(d.outer * d.n * d.inner, 71, -2, 2), y(x.size());
    VF w = randv(x.size(), 72), dx(x.size());
    softmax(x.data(), y.data(), d.outer, d.n, d.inner);
    softmaxGrad(y.data(), w.data(), dx.data(), d.outer, d.n, d.inner);
    checkGrad(
        [&](const VD &xx) { return softmaxRef(xx, d.outer, d.n, d.inner); },
        toD(x), toD(w), dx, 1e-4, 1e-6, "softmaxGrad");
  }
}

namespace {
VD rmsnormRef(const VD &x, const VD &w, int64_t rows, int64_t D, double eps,
              double offset) {
  VD y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < D; ++i)
      ms += x[r * D + i] * x[r * D + i];
    double inv = 1 / std::sqrt(ms / D + eps);
    for (int64_t i = 0; i < D; ++i)
      y[r * D + i] = x[r * D + i] * inv * (offset + w[i]);
  }
  return y;
}
VD layernormRef(const VD &x, const VD &w, const VD *b, int64_t rows, int64_t D,
                double eps) {
  VD y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < D; ++i)
      m += x[r * D + i];
    m /= D;
    for (int64_t i = 0; i < D; ++i)
      v += (x[r * D + i] - m) * (x[r * D + i] - m);
    v /= D;
    for (int64_t i = 0; i < D; ++i)
      y[r * D + i] =
          (x[r * D + i] - m) / std::sqrt(v + eps) * w[i] + (b ? (*b)[i] : 0.0);
  }
  return y;
}
} // namespace

TEST(KernelsNorm, RmsnormForwardAndGrad) {
  for (float offset : {0.0f, 1.0f}) {
    const int64_t rows = 300, D = 77;
    VF x = randv(rows * D, 80, -2, 2), w = randv(D, 81), y(x.size());
    rmsnorm(x.data(), w.data(), y.data(), rows, D, 1e-5f, offset);
    expectClose(y, rmsnormRef(toD(x), toD(w), rows, D, 1e-5, offset), 1e-5,
                1e-6, "rmsnorm offset " + std::to_string(offset));

    const int64_t r = 4, d = 6;
    VF xs = randv(r * d, 82), ws = randv(d, 83), dy = randv(r * d, 84);
    VF dx(r * d), dw0 = randv(d, 85), dw = dw0;
    rmsnormGrad(xs.data(), ws.data(), dy.data(), dx.data(), dw.data(), r, d,
                1e-5f, offset);
    for (int64_t i = 0; i < d; ++i)
      dw[i] -= dw0[i];
    std::string what = "rmsnormGrad offset " + std::to_string(offset);
    checkGrad(
        [&](const VD &xx) {
          return rmsnormRef(xx, toD(ws), r, d, 1e-5, offset);
        },
        toD(xs), toD(dy), dx, 1e-4, 1e-5, what + " dx");
    checkGrad(
        [&](const VD &ww) {
          return rmsnormRef(toD(xs), ww, r, d, 1e-5, offset);
        },
        toD(ws), toD(dy), dw, 1e-4, 1e-5, what + " dw");
  }
}

TEST(KernelsNorm, LayernormForwardAndGrad) {
  for (bool withBias : {false, true}) {
    const int64_t rows = 300, D = 77;
    VF x = randv(rows * D, 90, -2, 2), w = randv(D, 91), b = randv(D, 92);
    VF y(x.size());
    VD bd = toD(b);
    layernorm(x.data(), w.data(), withBias ? b.data() : nullptr, y.data(), rows,
              D, 1e-5f);
    expectClose(
        y,
        layernormRef(toD(x), toD(w), withBias ? &bd : nullptr, rows, D, 1e-5),
        1e-5, 1e-5, "layernorm");

    const int64_t r = 4, d = 6;
    VF xs = randv(r * d, 93), ws = randv(d, 94), bs = randv(d, 95);
    VF dy = randv(r * d, 96), dx(r * d);
    VF dw0 = randv(d, 97), dw = dw0, db0 = randv(d, 98), db = db0;
    layernormGrad(xs.data(), ws.data(), dy.data(), dx.data(), dw.data(),
                  withBias ? db.data() : nullptr, r, d, 1e-5f);
    for (int64_t i = 0; i < d; ++i) {
      dw[i] -= dw0[i];
      db[i] -= db0[i];
    }
    VD bsd = toD(bs);
    const VD *bp = withBias ? &bsd : nullptr;
    std::string what =
        std::string("layernormGrad bias=") + (withBias ? "1" : "0");
    checkGrad(
        [&](const VD &xx) { return layernormRef(xx, toD(ws), bp, r, d, 1e-5); },
        toD(xs), toD(dy), dx, 1e-4, 1e-5, what + " dx");
    checkGrad(
        [&](const VD &ww) { return layernormRef(toD(xs), ww, bp, r, d, 1e-5); },
        toD(ws), toD(dy), dw, 1e-4, 1e-5, what + " dw");
    if (withBias)
      checkGrad(
          [&](const VD &bb) {
            return layernormRef(toD(xs), toD(ws), &bb, r, d, 1e-5);
          },
          bsd, toD(dy), db, 1e-4, 1e-5, what + " db");
    else
      for (int64_t i = 0; i < d; ++i)
        EXPECT_EQ(db[i], 0.0f); // db untouched when null
  }
}

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

namespace {
VD ropeRef(const VD &x, int64_t B, int64_t S, int64_t H, int64_t D,
           const RopeParams &p, bool inverse, int64_t posOffset) {
  // transformers: dim = int(head_dim * partial_rotary_factor), inv_freq =
  // theta ** -(arange(0, dim, 2) / dim), rotating 2 * len(inv_freq) dims.
  int64_t dim = static_cast<int64_t>(static_cast<double>(D) * p.fraction);
  int64_t half = (dim + 1) / 2;
  VD freq(half);
  for (int64_t i = 0; i < half; ++i) {
    double f = std::pow(p.theta, -double(2 * i) / double(dim));
    if (p.llama3) { // Hugging Face's _compute_llama3_parameters
      double lowW = p.originalMaxPosition / p.lowFreqFactor;
      double highW = p.originalMaxPosition / p.highFreqFactor;
      double wl = 2 * M_PI / f;
      if (wl < highW) {
      } else if (wl > lowW) {
        f /= p.factor;
      } else {
        double s = (p.originalMaxPosition / wl - p.lowFreqFactor) /
                   (p.highFreqFactor - p.lowFreqFactor);
        f = (1 - s) * f / p.factor + s * f;
      }
    }
    freq[i] = f;
  }
  VD y = x;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h) {
        int64_t base = ((b * S + s) * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          double a = (s + posOffset) * freq[i] * (inverse ? -1 : 1);
          double u = x[base + i], v = x[base + i + half];
          y[base + i] = u * std::cos(a) - v * std::sin(a);
          y[base + i + half] = v * std::cos(a) + u * std::sin(a);
        }
      }
  return y;
}
} // namespace

TEST(KernelsRope, ForwardMatchesReferenceIncludingLlama3AndPartial) {
  const int64_t B = 2, S = 37, H = 3, D = 16;
  RopeParams plain;
  RopeParams partial;
  partial.fraction = 0.5;
  partial.theta = 500000;
  // phi3-style 0.6 of 16: int(9.6) = 9 frequency dims, 10 rotated.
  RopeParams odd;
  odd.fraction = 0.6;
  RopeParams llama;
  llama.llama3 = true;
  llama.theta = 500000;
  llama.factor = 8;
  llama.lowFreqFactor = 1;
  llama.highFreqFactor = 4;
  llama.originalMaxPosition = 64; // small so all three bands occur for D=16
  EXPECT_EQ(ropeRotaryDims(odd, D), 10);
  for (const RopeParams *p : {&plain, &partial, &odd, &llama})
    for (bool inv : {false, true}) {
      VF x = randv(B * S * H * D, 100), y(x.size());
      rope(x.data(), y.data(), B, S, H, D, *p, inv, 5);
      expectClose(y, ropeRef(toD(x), B, S, H, D, *p, inv, 5), 1e-5, 1e-5,
                  "rope");
      // In place.
      VF z = x;
      rope(z.data(), z.data(), B, S, H, D, *p, inv, 5);
      EXPECT_EQ(z, y);
    }
  // The llama3 rule really changed some frequencies.
  VF x = randv(S * D, 101), a(x.size()), b(x.size());
  rope(x.data(), a.data(), 1, S, 1, D, llama, false);
  RopeParams noScale = llama;
  noScale.llama3 = false;
  rope(x.data(), b.data(), 1, S, 1, D, noScale, false);
  EXPECT_NE(a, b);
}

TEST(KernelsRope, InverseIsTheVjp) {
  const int64_t B = 1, S = 20, H = 2, D = 12;
  RopeParams p;
  p.fraction = 2.0 / 3.0; // int(7.99...) = 7 frequency dims, 8 rotated of 12
  p.llama3 = true;
  p.factor = 4;
  p.originalMaxPosition = 32;
  VF x = randv(B * S * H * D, 110), yv = randv(B * S * H * D, 111);
  VF rx(x.size()), ity(x.size());
  rope(x.data(), rx.data(), B, S, H, D, p, false, 3);
  rope(yv.data(), ity.data(), B, S, H, D, p, true, 3);
  EXPECT_NEAR(dot(toD(rx), toD(yv)), dot(toD(x), toD(ity)), 1e-4);
  // And FD of the reference forward gives the inverse rotation of dy.
  checkGrad([&](const VD &xx) { return ropeRef(xx, B, S, H, D, p, false, 3); },
            toD(x), toD(yv), ity, 1e-5, 1e-5, "rope VJP");
  // Round trip.
  VF back(x.size());
  rope(rx.data(), back.data(), B, S, H, D, p, true, 3);
  expectClose(back, toD(x), 1e-5, 1e-5, "rope round trip");
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {
struct AttnShape {
  int64_t B, S, Sk, Hq, Hkv, D, qOffset;
};

struct AttnRefOut {
  VD o, lse;
};

AttnRefOut attentionRef(const VD &q, const VD &k, const VD &v,
                        const AttnShape &s, const AttentionParams &p) {
  AttnRefOut r;
  r.o.assign(s.B * s.S * s.Hq * s.D, 0.0);
  r.lse.assign(s.B * s.Hq * s.S, -INFINITY);
  double scale = p.scale > 0 ? p.scale : 1 / std::sqrt(double(s.D));
  int64_t G = s.Hq / s.Hkv;
  VD sc(s.Sk);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h)
      for (int64_t i = 0; i < s.S; ++i) {
        int64_t pos = s.qOffset + i, hk = h / G;
        double m = -INFINITY;
        for (int64_t j = 0; j < s.Sk; ++j) {
          bool vis =
              (!p.causal || j <= pos) && (p.window <= 0 || pos - j < p.window);
          if (!vis) {
            sc[j] = -INFINITY;
            continue;
          }
          double d = 0;
          for (int64_t e = 0; e < s.D; ++e)
            d += q[((b * s.S + i) * s.Hq + h) * s.D + e] *
                 k[((b * s.Sk + j) * s.Hkv + hk) * s.D + e];
          d *= scale;
          if (p.softcap > 0)
            d = p.softcap * std::tanh(d / p.softcap);
          sc[j] = d;
          m = std::max(m, d);
        }
        if (m == -INFINITY)
          continue;
        double l = 0;
        for (int64_t j = 0; j < s.Sk; ++j)
          l += sc[j] == -INFINITY ? 0 : std::exp(sc[j] - m);
        r.lse[(b * s.Hq + h) * s.S + i] = m + std::log(l);
        for (int64_t j = 0; j < s.Sk; ++j) {
          if (sc[j] == -INFINITY)
            continue;
          double pj = std::exp(sc[j] - m) / l;
          for (int64_t e = 0; e < s.D; ++e)
            r.o[((b * s.S + i) * s.Hq + h) * s.D + e] +=
                pj * v[((b * s.Sk + j) * s.Hkv + hk) * s.D + e];
        }
      }
  return r;
}

struct AttnCase {
  const char *name;
  AttnShape shape;
  AttentionParams p;
};

AttentionParams ap(bool causal, int64_t window = 0, double softcap = 0,
                   double scale = 0) {
  AttentionParams p;
  p.causal = causal;
  p.window = window;
  p.softcap = softcap;
  p.scale = scale;
  return p;
}

void runAttentionForward(const AttnCase &c) {
  const AttnShape &s = c.shape;
  VF q = randv(s.B * s.S * s.Hq * s.D, 120, -1.5f, 1.5f);
  VF k = randv(s.B * s.Sk * s.Hkv * s.D, 121, -1.5f, 1.5f);
  VF v = randv(s.B * s.Sk * s.Hkv * s.D, 122);
  VF o(q.size()), lse(s.B * s.Hq * s.S);
  attention(q.data(), k.data(), v.data(), o.data(), lse.data(), s.B, s.S, s.Sk,
            s.Hq, s.Hkv, s.D, c.p, s.qOffset);
  AttnRefOut r = attentionRef(toD(q), toD(k), toD(v), s, c.p);
  expectClose(o, r.o, 1e-4, 2e-6, std::string(c.name) + " o");
  expectClose(lse, r.lse, 1e-5, 1e-5, std::string(c.name) + " lse");
  // Without lse the output is the same.
  VF o2(q.size());
  attention(q.data(), k.data(), v.data(), o2.data(), nullptr, s.B, s.S, s.Sk,
            s.Hq, s.Hkv, s.D, c.p, s.qOffset);
  EXPECT_EQ(o, o2) << c.name;
}
} // namespace

TEST(KernelsAttention, ForwardMatchesNaiveReference) {
  // Sizes straddle the 64 x 64 tiles (tails in both directions); D not a
  // multiple of 16 exercises the padding.
  const AttnCase cases[] = {
      {"causal", {2, 150, 150, 2, 2, 16, 0}, ap(true)},
      {"non-causal", {1, 70, 70, 2, 2, 24, 0}, ap(false)},
      {"gqa", {1, 130, 130, 4, 2, 16, 0}, ap(true)},
      {"window", {1, 200, 200, 2, 1, 8, 0}, ap(true, 37)},
      {"window non-causal", {1, 90, 90, 1, 1, 8, 0}, ap(false, 20)},
      {"softcap", {1, 100, 100, 2, 2, 16, 0}, ap(true, 0, 5.0)},
      {"custom scale", {1, 66, 66, 2, 2, 20, 0}, ap(true, 0, 0, 0.9)},
      {"kv cache qOffset", {2, 40, 170, 4, 2, 16, 130}, ap(true)},
      {"kv cache decode", {1, 1, 129, 4, 1, 64, 128}, ap(true, 50)},
      {"D=128", {1, 65, 65, 2, 2, 128, 0}, ap(true)},
  };
  for (const auto &c : cases)
    runAttentionForward(c);
}

TEST(KernelsAttention, FullyMaskedRowsGiveZeroAndNegInfLse) {
  // Non-causal with a window: positions 5..7 see no key of Sk = 4.
  AttnShape s{1, 8, 4, 1, 1, 4, 0};
  AttentionParams p = ap(false, 2);
  VF q = randv(32, 130), k = randv(16, 131), v = randv(16, 132);
  VF o(32), lse(8);
  attention(q.data(), k.data(), v.data(), o.data(), lse.data(), s.B, s.S, s.Sk,
            s.Hq, s.Hkv, s.D, p, 0);
  AttnRefOut r = attentionRef(toD(q), toD(k), toD(v), s, p);
  expectClose(o, r.o, 1e-5, 1e-6, "masked o");
  for (int i = 5; i < 8; ++i) {
    EXPECT_EQ(lse[i], -std::numeric_limits<float>::infinity());
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(o[i * 4 + d], 0.0f);
  }
}

namespace {
/// Runs attentionGrad and checks dq, dk, dv against FD of the double
/// reference: element-wise if `full`, else along random directions.
void runAttentionGrad(const AttnCase &c, bool full) {
  const AttnShape &s = c.shape;
  ASSERT_EQ(s.S, s.Sk);
  VF q = randv(s.B * s.S * s.Hq * s.D, 140, -1.5f, 1.5f);
  VF k = randv(s.B * s.S * s.Hkv * s.D, 141, -1.5f, 1.5f);
  VF v = randv(s.B * s.S * s.Hkv * s.D, 142);
  VF dO = randv(q.size(), 143);
  VF o(q.size()), lse(s.B * s.Hq * s.S);
  attention(q.data(), k.data(), v.data(), o.data(), lse.data(), s.B, s.S, s.S,
            s.Hq, s.Hkv, s.D, c.p);
  VF dq(q.size(), 7.0f), dk(k.size(), 7.0f), dv(v.size(), 7.0f); // overwritten
  attentionGrad(q.data(), k.data(), v.data(), o.data(), lse.data(), dO.data(),
                dq.data(), dk.data(), dv.data(), s.B, s.S, s.Hq, s.Hkv, s.D,
                c.p);
  VD Q = toD(q), K = toD(k), V = toD(v), W = toD(dO);
  Fn fq = [&](const VD &x) { return attentionRef(x, K, V, s, c.p).o; };
  Fn fk = [&](const VD &x) { return attentionRef(Q, x, V, s, c.p).o; };
  Fn fv = [&](const VD &x) { return attentionRef(Q, K, x, s, c.p).o; };
  std::string n = c.name;
  if (full) {
    checkGrad(fq, Q, W, dq, 1e-4, 1e-5, n + " dq");
    checkGrad(fk, K, W, dk, 1e-4, 1e-5, n + " dk");
    checkGrad(fv, V, W, dv, 1e-4, 1e-5, n + " dv");
  } else {
    checkDirectional(fq, Q, W, dq, 2, 1e-5, n + " dq");
    checkDirectional(fk, K, W, dk, 2, 1e-5, n + " dk");
    checkDirectional(fv, V, W, dv, 2, 1e-5, n + " dv");
  }
}
} // namespace

TEST(KernelsAttention, GradMatchesFiniteDifferencesSmall) {
  const AttnCase cases[] = {
      {"causal", {2, 5, 5, 2, 2, 4, 0}, ap(true)},
      {"non-causal", {1, 6, 6, 2, 2, 4, 0}, ap(false)},
      {"gqa Hq=4 Hkv=2", {1, 5, 5, 4, 2, 4, 0}, ap(true)},
      {"window", {1, 7, 7, 2, 1, 4, 0}, ap(true, 3)},
      {"softcap", {1, 6, 6, 2, 2, 4, 0}, ap(true, 0, 1.5)},
      {"custom scale", {1, 5, 5, 2, 2, 4, 0}, ap(false, 0, 0, 1.3)},
      {"window+softcap non-causal", {1, 6, 6, 2, 2, 3, 0}, ap(false, 2, 2.0)},
  };
  for (const auto &c : cases)
    runAttentionGrad(c, true);
}

TEST(KernelsAttention, GradMatchesFiniteDifferencesAcrossTiles) {
  const AttnCase cases[] = {
      {"causal multi-tile", {1, 150, 150, 2, 2, 16, 0}, ap(true)},
      {"gqa multi-tile", {1, 130, 130, 4, 2, 8, 0}, ap(true)},
      {"window multi-tile", {1, 140, 140, 2, 1, 8, 0}, ap(true, 70)},
      {"softcap multi-tile", {1, 100, 100, 1, 1, 8, 0}, ap(false, 0, 3.0)},
  };
  for (const auto &c : cases)
    runAttentionGrad(c, false);
}

TEST(KernelsAttention, DeterministicAndThreadCountIndependent) {
  ThreadsGuard guard;
  AttnShape s{2, 130, 130, 4, 2, 16, 0};
  VF q = randv(s.B * s.S * s.Hq * s.D, 150),
     k = randv(s.B * s.S * s.Hkv * s.D, 151);
  VF v = randv(k.size(), 152), dO = randv(q.size(), 153);
  auto run = [&](int t) {
    setThreads(t);
    VF o(q.size()), lse(s.B * s.Hq * s.S), dq(q.size()), dk(k.size()),
        dv(v.size());
    attention(q.data(), k.data(), v.data(), o.data(), lse.data(), s.B, s.S, s.S,
              s.Hq, s.Hkv, s.D, ap(true, 0, 4.0));
    attentionGrad(q.data(), k.data(), v.data(), o.data(), lse.data(), dO.data(),
                  dq.data(), dk.data(), dv.data(), s.B, s.S, s.Hq, s.Hkv, s.D,
                  ap(true, 0, 4.0));
    VF all = o;
    for (const VF *x : {&lse, &dq, &dk, &dv})
      all.insert(all.end(), x->begin(), x->end());
    return all;
  };
  VF a = run(2), b = run(2), c = run(1), d = run(5);
  EXPECT_TRUE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  EXPECT_TRUE(std::memcmp(a.data(), c.data(), a.size() * 4) == 0);
  EXPECT_TRUE(std::memcmp(a.data(), d.data(), a.size() * 4) == 0);
}

TEST(KernelsAttention, ConcurrentCallersGetTheSameResults) {
  // Application threads calling kernels at once: the pool serves one, the
  // others run their chunks inline; results are identical either way.
  ThreadsGuard guard;
  setThreads(2);
  AttnShape s{1, 200, 200, 4, 2, 32, 0};
  VF q = randv(s.B * s.S * s.Hq * s.D, 155),
     k = randv(s.B * s.S * s.Hkv * s.D, 156);
  VF v = randv(k.size(), 157);
  auto run = [&] {
    VF o(q.size()), lse(s.B * s.Hq * s.S);
    attention(q.data(), k.data(), v.data(), o.data(), lse.data(), s.B, s.S, s.S,
              s.Hq, s.Hkv, s.D, ap(true));
    return o;
  };
  VF want = run();
  std::vector<VF> got(4);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep)
        got[t] = run();
    });
  for (auto &t : ts)
    t.join();
  for (const VF &g : got)
    EXPECT_TRUE(std::memcmp(g.data(), want.data(), want.size() * 4) == 0);
}

//===----------------------------------------------------------------------===//
// Embedding and cross entropy
//===----------------------------------------------------------------------===//

TEST(KernelsLoss, EmbeddingLookupAndBadIndex) {
  const int64_t V = 11, D = 5, n = 7;
  VF table = randv(V * D, 160);
  std::vector<int32_t> ids = {3, 0, 10, 3, 7, 1, 2};
  VF y(n * D);
  int64_t bad = -1;
  ASSERT_TRUE(embedding(ids.data(), table.data(), y.data(), n, V, D, &bad));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d)
      EXPECT_EQ(y[i * D + d], table[ids[i] * D + d]);
  for (int32_t badId : {11, -1}) {
    std::vector<int32_t> ids2 = {1, 2, 3, badId, 4, 99};
    VF y2(6 * D, 42.0f);
    bad = -1;
    EXPECT_FALSE(
        embedding(ids2.data(), table.data(), y2.data(), 6, V, D, &bad));
    EXPECT_EQ(bad, 3);
    for (float f : y2)
      EXPECT_EQ(f, 42.0f); // nothing written
  }
}

TEST(KernelsLoss, EmbeddingGradAccMatchesFiniteDifferences) {
  const int64_t V = 9, D = 130, n = 12;
  VF table = randv(V * D, 161);
  std::vector<int32_t> ids = {1, 4, 1, 8, 0, 4, 4, 2, 7, 1, 3, 5};
  VF dy = randv(n * D, 162), dt0 = randv(V * D, 163), dt = dt0;
  embeddingGradAcc(ids.data(), dy.data(), dt.data(), n, V, D);
  for (int64_t i = 0; i < V * D; ++i)
    dt[i] -= dt0[i];
  checkGrad(
      [&](const VD &tb) {
        VD y(n * D);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t d = 0; d < D; ++d)
            y[i * D + d] = tb[ids[i] * D + d];
        return y;
      },
      toD(table), toD(dy), dt, 1e-5, 1e-6, "embeddingGradAcc");
}

namespace {
VD ceRows(const VD &x, const std::vector<int32_t> &t, int64_t n, int64_t V,
          int64_t ignore, int64_t *count) {
  VD out(1, 0.0);
  int64_t c = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (t[r] == ignore)
      continue;
    ++c;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < V; ++j)
      m = std::max(m, x[r * V + j]);
    for (int64_t j = 0; j < V; ++j)
      s += std::exp(x[r * V + j] - m);
    out[0] += std::log(s) + m - x[r * V + t[r]];
  }
  if (count)
    *count = c;
  out[0] = c ? out[0] / c : 0.0;
  return out;
}
} // namespace

TEST(KernelsLoss, CrossEntropyForwardWithIgnoreIndex) {
  const int64_t n = 300, V = 1000;
  VF logits = randv(n * V, 170, -10, 10);
  std::vector<int32_t> t(n);
  std::mt19937 g(171);
  for (auto &x : t)
    x = int32_t(g() % V);
  for (int64_t r = 0; r < n; r += 7)
    t[r] = -100;
  int64_t count = -1, wantCount = 0;
  double loss = crossEntropy(logits.data(), t.data(), n, V, -100, &count);
  VD want = ceRows(toD(logits), t, n, V, -100, &wantCount);
  EXPECT_EQ(count, wantCount);
  EXPECT_NEAR(loss, want[0], 1e-6 * std::fabs(want[0]));
  // Huge logits stay finite (max-subtracted).
  VF big = {1e4f, -1e4f, 3e4f};
  std::vector<int32_t> tb = {0};
  double lb = crossEntropy(big.data(), tb.data(), 1, 3, -100, &count);
  EXPECT_NEAR(lb, 2e4, 1e-6 * 2e4);
}

TEST(KernelsLoss, CrossEntropyAllIgnored) {
  VF logits = randv(4 * 6, 172);
  std::vector<int32_t> t(4, -1);
  int64_t count = 5;
  double loss = crossEntropy(logits.data(), t.data(), 4, 6, -1, &count);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(loss, 0.0);
  VF d(4 * 6, 3.0f);
  crossEntropyGrad(logits.data(), t.data(), 1.0f, d.data(), 4, 6, -1);
  for (float x : d)
    EXPECT_EQ(x, 0.0f);
}

TEST(KernelsLoss, CrossEntropyGradMatchesFiniteDifferences) {
  const int64_t n = 6, V = 7;
  VF logits = randv(n * V, 173, -3, 3);
  std::vector<int32_t> t = {2, -100, 6, 0, -100, 3};
  VF d(n * V, 9.0f);
  crossEntropyGrad(logits.data(), t.data(), 2.5f, d.data(), n, V, -100);
  checkGrad([&](const VD &x) { return ceRows(x, t, n, V, -100, nullptr); },
            toD(logits), VD{2.5}, d, 1e-5, 1e-6, "crossEntropyGrad");
  for (int64_t j = 0; j < V; ++j) {
    EXPECT_EQ(d[1 * V + j], 0.0f);
    EXPECT_EQ(d[4 * V + j], 0.0f);
  }
}

TEST(KernelsLoss, CrossEntropyThreadCountIndependent) {
  ThreadsGuard guard;
  const int64_t n = 257, V = 333;
  VF logits = randv(n * V, 174, -5, 5);
  std::vector<int32_t> t(n);
  for (int64_t r = 0; r < n; ++r)
    t[r] = int32_t((r * 31) % V);
  int64_t c;
  setThreads(1);
  double a = crossEntropy(logits.data(), t.data(), n, V, -100, &c);
  setThreads(3);
  double b = crossEntropy(logits.data(), t.data(), n, V, -100, &c);
  EXPECT_EQ(a, b);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

namespace {
VD transposeRef(const VD &x, const std::vector<int64_t> &shape,
                const std::vector<int64_t> &perm) {
  size_t r = shape.size();
  std::vector<int64_t> ys(r), xs(r, 1);
  for (size_t i = 0; i < r; ++i)
    ys[i] = shape[perm[i]];
  for (size_t i = r - 1; i-- > 0;)
    xs[i] = xs[i + 1] * shape[i + 1];
  VD y(x.size());
  for (int64_t o = 0; o < numel(ys); ++o) {
    int64_t rem = o, off = 0;
    for (size_t i = r; i-- > 0;) {
      off += (rem % ys[i]) * xs[perm[i]];
      rem /= ys[i];
    }
    y[o] = x[off];
  }
  return y;
}
} // namespace

TEST(KernelsMovement, TransposeMatchesReferenceAndVjp) {
  struct C {
    std::vector<int64_t> shape, perm;
  };
  for (const C &c : std::vector<C>{{{3, 4}, {1, 0}},
                                   {{2, 3, 4}, {0, 2, 1}},
                                   {{2, 3, 4}, {2, 0, 1}},
                                   {{2, 3, 4}, {1, 0, 2}},
                                   {{2, 3, 4, 5}, {0, 2, 1, 3}},
                                   {{2, 1, 4, 5}, {3, 2, 1, 0}},
                                   {{2, 3, 4}, {0, 1, 2}},
                                   {{70, 3, 45}, {2, 1, 0}},
                                   {{5, 100, 37}, {0, 2, 1}},
                                   {{1, 1}, {1, 0}}}) {
    VF x = randv(numel(c.shape), 180), y(x.size());
    transpose(x.data(), c.shape, c.perm, y.data());
    expectClose(y, transposeRef(toD(x), c.shape, c.perm), 0, 0, "transpose");
    // VJP: transpose back by the inverse permutation.
    std::vector<int64_t> inv(c.perm.size()), yshape(c.perm.size());
    for (size_t i = 0; i < c.perm.size(); ++i) {
      inv[c.perm[i]] = int64_t(i);
      yshape[i] = c.shape[c.perm[i]];
    }
    VF g = randv(y.size(), 181), gx(x.size());
    transpose(g.data(), yshape, inv, gx.data());
    EXPECT_NEAR(dot(toD(y), toD(g)), dot(toD(x), toD(gx)), 1e-9);
  }
}

TEST(KernelsMovement, SliceConcatPad) {
  const int64_t outer = 3, n = 10, inner = 4, start = 2, end = 7;
  VF x = randv(outer * n * inner, 190), s((end - start) * outer * inner);
  slice(x.data(), s.data(), outer, n, inner, start, end);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = start; k < end; ++k)
      for (int64_t i = 0; i < inner; ++i)
        EXPECT_EQ(s[(o * (end - start) + k - start) * inner + i],
                  x[(o * n + k) * inner + i]);
  // pad is the VJP of slice: <slice(x), y> == <x, pad(y)>.
  VF yv = randv(s.size(), 191), p(x.size(), 5.0f);
  pad(yv.data(), p.data(), outer, n, inner, start, end);
  EXPECT_NEAR(dot(toD(s), toD(yv)), dot(toD(x), toD(p)), 1e-9);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k)
      if (k < start || k >= end) {
        for (int64_t i = 0; i < inner; ++i)
          EXPECT_EQ(p[(o * n + k) * inner + i], 0.0f);
      }
  // concat of the three slices [0,2), [2,7), [7,10) gives x back; its VJP
  // is slicing.
  VF a(outer * 2 * inner), c(outer * 3 * inner), y(x.size());
  slice(x.data(), a.data(), outer, n, inner, 0, 2);
  slice(x.data(), c.data(), outer, n, inner, 7, 10);
  concat({a.data(), s.data(), c.data()}, {2, 5, 3}, y.data(), outer, inner);
  EXPECT_EQ(y, x);
  VF empty;
  concat({a.data(), empty.data(), s.data(), c.data()}, {2, 0, 5, 3}, y.data(),
         outer, inner);
  EXPECT_EQ(y, x);
}

TEST(KernelsDeterminism, NormGradsAndReduceToThreadIndependent) {
  ThreadsGuard guard;
  const int64_t rows = 500, D = 96;
  VF x = randv(rows * D, 200), w = randv(D, 201), dy = randv(rows * D, 202);
  auto run = [&](int t) {
    setThreads(t);
    VF dx(rows * D), dw(D, 0.0f), db(D, 0.0f), dx2(rows * D), dw2(D, 0.0f),
        r(D);
    rmsnormGrad(x.data(), w.data(), dy.data(), dx.data(), dw.data(), rows, D,
                1e-6f, 1.0f);
    layernormGrad(x.data(), w.data(), dy.data(), dx2.data(), dw2.data(),
                  db.data(), rows, D, 1e-5f);
    reduceTo(dy.data(), {rows, D}, r.data(), {D});
    VF all = dx;
    for (const VF *v : {&dw, &db, &dx2, &dw2, &r})
      all.insert(all.end(), v->begin(), v->end());
    return all;
  };
  VF a = run(1), b = run(2), c = run(6);
  EXPECT_TRUE(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
  EXPECT_TRUE(std::memcmp(a.data(), c.data(), a.size() * 4) == 0);
}
