//===- OpsPointwiseTest.cpp - Op launchers against runtime/cpu ------------===//
//
// Part of mtc. The launchers of runtime/cuda/ops (Elementwise.h, Reduce.h,
// Norm.h, Rope.h) through a Launch over the test's stream, each against the
// runtime/cpu function of the same name on the same inputs: random ragged
// shapes, broadcasts of every kind (scalar, middle, leading, merged dims),
// reductions and softmax over the last and a middle axis, norms over rows
// that are not a multiple of the warp (and more than 64: several chunks of
// parameter-gradient partials), dw / db accumulated onto what was there,
// rope with partial rotary dims, llama3 scaling and frequency tables longer
// than one rope_freqs_f64 launch. The launchers choose every geometry: what
// these tests exercise is what the executor queues.
//
// Tolerances (KernelCompare.h's measures): f32 1e-5 of the output
// (reductions and parameter gradients 1e-4; the tanh family's gradients
// 5e-5, as ElementwiseKernelsTest explains), bf16 2 ulp.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/ops/Elementwise.h"
#include "runtime/cuda/ops/Norm.h"
#include "runtime/cuda/ops/Reduce.h"
#include "runtime/cuda/ops/Rope.h"
#include "test/cuda/KernelCompare.h"

#include <cmath>
#include <limits>

using namespace mtc;
using namespace mtc::cuda::test;
namespace ops = mtc::cuda::ops;
using ops::DType;

namespace {

class OpsPointwise : public CudaDriverTest {
protected:
  void SetUp() override {
    CudaDriverTest::SetUp();
    if (loader)
      L = makeLaunch();
  }

  /// Uploads \p v as f32, or rounded to bf16 when \p type is BF16.
  unsigned long long put(const std::vector<float> &v, DType type) {
    return type == DType::BF16 ? upload(toBf16(v)) : upload(v);
  }
  std::vector<float> getF32(unsigned long long p, size_t n) {
    return download<float>(p, n);
  }
  std::vector<uint16_t> getBf16(unsigned long long p, size_t n) {
    return download<uint16_t>(p, n);
  }

  ops::Launch L;
};

#define OK(expr)                                                               \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    ASSERT_TRUE(s_.ok()) << s_.message();                                      \
  } while (0)

size_t count(const std::vector<int64_t> &shape) {
  size_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string str(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST_P(OpsPointwise, UnaryAndGradEveryOp) {
  const float param = 20.0f;
  for (int op = 0; op < int(bundle::kNumUnaryFns); ++op) {
    const cpu::Unary f = cpu::Unary(op);
    const bool positive =
        f == cpu::Unary::Log || f == cpu::Unary::Rsqrt || f == cpu::Unary::Sqrt;
    for (size_t n : {size_t(5), size_t(1003), size_t(70001)}) {
      std::string what =
          "unary op " + std::to_string(op) + " n=" + std::to_string(n);
      std::vector<float> x = positive ? randomFloats(n, 3 + op, 0.05f, 5)
                                      : randomFloats(n, 3 + op, -6, 6),
                         g = randomFloats(n, 40 + op), y(n), dx(n);
      cpu::unary(f, x.data(), y.data(), n, param);
      cpu::unaryGrad(f, x.data(), g.data(), dx.data(), n, param);
      unsigned long long dX = upload(x), dG = upload(g), dY = alloc(n * 4);
      OK(ops::unary(L, f, dX, dY, n, param));
      // Floor 1% of max|y|, as ElementwiseKernelsTest: outputs that cancel
      // to about 0 differ by an ulp of the terms.
      EXPECT_LE(maxRelError(getF32(dY, n), y, 1e-2, what), 1e-5);
      OK(ops::unaryGrad(L, f, dX, dG, dG, n, param)); // in place: dx = dy
      const bool tanhFamily = f == cpu::Unary::Tanh ||
                              f == cpu::Unary::GeluTanh ||
                              f == cpu::Unary::Softcap;
      EXPECT_LE(maxRelError(getF32(dG, n), dx, 1e-2, what + " grad"),
                tanhFamily ? 5e-5 : 1e-5);
    }
  }
}

TEST_P(OpsPointwise, UnaryBf16) {
  const size_t n = 517;
  std::vector<float> x = roundBf16(randomFloats(n, 7, -4, 4)), y(n);
  cpu::unary(cpu::Unary::Silu, x.data(), y.data(), n);
  unsigned long long dX = put(x, DType::BF16), dY = alloc(n * 2);
  OK(ops::unary(L, cpu::Unary::Silu, dX, dY, n, 0, DType::BF16));
  EXPECT_LE(maxBf16Ulps(getBf16(dY, n), y, "unary silu bf16"), 2);
}

TEST_P(OpsPointwise, ConvertRoundsToNearestEvenAndBack) {
  // Where a bf16 plan's tensors meet f32 ones (docs/cuda.md, "Precisions"):
  // f32 -> bf16 as the host's conversion (round to nearest even: 1 + 2^-8
  // is a tie that rounds down to 1), bf16 -> f32 exact, and a copy for the
  // same type.
  const size_t n = 1003;
  std::vector<float> x = randomFloats(n, 11, -50, 50);
  x[0] = 1.00390625f;
  x[1] = -3.0117187f;
  unsigned long long dX = put(x, DType::F32), dB = alloc(n * 2),
                     dY = alloc(n * 4), dC = alloc(n * 4);
  OK(ops::convert(L, dX, DType::F32, dB, DType::BF16, n));
  OK(ops::convert(L, dB, DType::BF16, dY, DType::F32, n));
  OK(ops::convert(L, dY, DType::F32, dC, DType::F32, n));
  std::vector<uint16_t> b = getBf16(dB, n), want = toBf16(x);
  std::vector<float> y = getF32(dY, n), c = getF32(dC, n);
  EXPECT_EQ(b[0], toBf16(1.0f));
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(b[i], want[i]) << "f32 -> bf16 at " << i << " (" << x[i] << ")";
    ASSERT_EQ(y[i], fromBf16(want[i])) << "bf16 -> f32 at " << i;
    ASSERT_EQ(c[i], y[i]) << "f32 copy at " << i;
  }
}

struct BinaryCase {
  std::vector<int64_t> out, a, b;
};

const std::vector<BinaryCase> kBinaryCases = {
    {{1003}, {1003}, {1003}},                   // flat
    {{4, 5, 6}, {4, 5, 6}, {6}},                // trailing (a bias)
    {{3, 7, 5}, {3, 7, 5}, {3, 1, 5}},          // middle dim of b
    {{3, 7, 5}, {3, 1, 5}, {3, 7, 5}},          // middle dim of a
    {{7, 9}, {}, {7, 9}},                       // scalar a (rank 0)
    {{2, 3, 4}, {2, 3, 4}, {1}},                // scalar b (rank 1)
    {{4, 5, 6}, {4, 1, 6}, {5, 1}},             // both broadcast
    {{2, 3, 4, 5}, {3, 1, 5}, {2, 3, 4, 5}},    // leading and middle
    {{2, 3, 4, 5}, {2, 3, 4, 5}, {4, 5}},       // merges to 2 dims
    {{3, 1, 4}, {3, 1, 4}, {1, 4}},             // a size-1 output dim
    {{1, 1}, {1}, {1, 1}},                      // one element
    {{5, 2, 3, 7}, {5, 1, 3, 1}, {1, 2, 1, 7}}, // alternating
    {{0, 4}, {0, 4}, {4}},                      // empty
};

TEST_P(OpsPointwise, BinaryBroadcastsAsRuntimeCpu) {
  for (DType type : {DType::F32, DType::BF16})
    for (const BinaryCase &c : kBinaryCases)
      for (int op = 0; op < 4; ++op) {
        const bool bf16 = type == DType::BF16;
        std::string what = "binary " + std::to_string(op) + " " + str(c.out) +
                           " = " + str(c.a) + " op " + str(c.b) +
                           (bf16 ? " bf16" : "");
        const size_t n = count(c.out);
        std::vector<float> a = randomFloats(count(c.a), 11 + op),
                           b = randomFloats(count(c.b), 12 + op, 0.5f, 3);
        if (bf16) {
          a = roundBf16(a);
          b = roundBf16(b);
        }
        std::vector<float> ref(n);
        cpu::binary(cpu::Binary(op), a.data(), c.a, b.data(), c.b, ref.data(),
                    c.out);
        unsigned long long dA = put(a, type), dB = put(b, type);
        // In place into a where it has the output's shape.
        unsigned long long dOut = count(c.a) == n && c.a.size() == c.out.size()
                                      ? dA
                                      : alloc(n * ops::dtypeBytes(type));
        OK(ops::binary(L, cpu::Binary(op), dA, c.a, dB, c.b, dOut, c.out,
                       type));
        if (bf16)
          EXPECT_LE(maxBf16Ulps(getBf16(dOut, n), ref, what), 0);
        else
          EXPECT_LE(maxRelError(getF32(dOut, n), ref, 0, what), 1e-6);
      }
}

TEST_P(OpsPointwise, BroadcastShapesAreMergedAndChecked) {
  // Same-pattern neighbours merge: [2,3,4,5] + [4,5] is [6, 20].
  Expected<mtc_cuda::BroadcastShape> s =
      ops::broadcastShape({2, 3, 4, 5}, {2, 3, 4, 5}, {4, 5});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(s->rank, 2);
  EXPECT_EQ(s->size[0], 6);
  EXPECT_EQ(s->size[1], 20);
  EXPECT_EQ(s->strideA[0], 20);
  EXPECT_EQ(s->strideB[0], 0);
  EXPECT_EQ(s->strideB[1], 1);
  // Size-1 output dims vanish.
  s = ops::broadcastShape({3, 1, 4}, {3, 1, 4}, {1, 4});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->rank, 2);

  unsigned long long p = alloc(4096);
  Status bad = ops::binary(L, cpu::Binary::Add, p, {3, 4}, p, {5}, p, {3, 4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("binary: b's shape [5] does not broadcast to "
                               "[3, 4]"),
            std::string::npos)
      << bad.message();
  // Ten dims that no merge can shorten: more than the kernels take.
  std::vector<int64_t> out(10, 2), a(10, 2);
  for (size_t i = 1; i < a.size(); i += 2)
    a[i] = 1;
  bad = ops::binary(L, cpu::Binary::Mul, p, a, p, out, p, out);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("10 dimensions after merging"),
            std::string::npos)
      << bad.message();
}

TEST_P(OpsPointwise, ReduceToSumsBroadcastsBack) {
  struct Case {
    std::vector<int64_t> from, to;
  };
  for (const Case &c : std::vector<Case>{
           {{300, 70}, {70}},         // a bias gradient: chunked partials
           {{37, 70}, {37, 1}},       // whole rows: the row form
           {{3, 5, 7}, {3, 1, 7}},    // middle dim
           {{4, 6, 5}, {6, 1}},       // leading and trailing
           {{2, 3, 4, 5}, {}},        // everything, small: one row
           {{70001}, {1}},            // everything, large: chunked
           {{5, 6}, {5, 6}},          // nothing reduced: a copy
           {{1, 9, 2, 4}, {9, 1, 1}}, // merged reduced dims
           {{3, 1, 4}, {1, 1}},       // size-1 dims
           {{0, 5}, {5}},             // empty sums: zeros
       }) {
    std::string what = "reduceTo " + str(c.from) + " -> " + str(c.to);
    const size_t n = count(c.from), outN = count(c.to);
    std::vector<float> x = randomFloats(n, 60 + unsigned(n)), ref(outN);
    cpu::reduceTo(x.data(), c.from, ref.data(), c.to);
    unsigned long long dX = upload(x),
                       dY = upload(std::vector<float>(outN, NAN));
    OK(ops::reduceTo(L, dX, c.from, dY, c.to));
    // Sums of +-2 cancel: floor 1% of the largest result.
    EXPECT_LE(maxRelError(getF32(dY, outN), ref, 1e-2, what), 1e-4);
  }
}

//===----------------------------------------------------------------------===//
// Reductions and softmax
//===----------------------------------------------------------------------===//

struct Axis {
  int64_t outer, n, inner;
  std::string str() const {
    return "[" + std::to_string(outer) + "," + std::to_string(n) + "," +
           std::to_string(inner) + "]";
  }
  size_t inSize() const { return size_t(outer * n * inner); }
  size_t outSize() const { return size_t(outer * inner); }
};

// Last axis (inner 1: the row form) and middle axes (the strided form).
const std::vector<Axis> kAxes = {{7, 1, 1},    {5, 33, 1}, {3, 1000, 1},
                                 {2, 4099, 1}, {3, 17, 5}, {2, 40, 33},
                                 {4, 1, 7},    {1, 300, 3}};

TEST_P(OpsPointwise, ReduceAndGradOverLastAndMiddleAxes) {
  for (const Axis &a : kAxes)
    for (int op = 0; op < 3; ++op) {
      const cpu::Reduce r = cpu::Reduce(op);
      std::string what = "reduce " + std::to_string(op) + " " + a.str();
      // Small integers for the gradient: ties for Max in most columns.
      std::vector<float> x = randomFloats(a.inSize(), 20 + op),
                         ref(a.outSize());
      cpu::reduce(r, x.data(), ref.data(), a.outer, a.n, a.inner);
      unsigned long long dX = upload(x), dY = alloc(a.outSize() * 4);
      OK(ops::reduce(L, r, dX, dY, a.outer, a.n, a.inner));
      EXPECT_LE(maxRelError(getF32(dY, a.outSize()), ref, 1e-2, what),
                r == cpu::Reduce::Max ? 0 : 1e-4);

      for (float &v : x)
        v = std::floor(v);
      std::vector<float> g = randomFloats(a.outSize(), 30 + op), dx(a.inSize());
      cpu::reduceGrad(r, x.data(), g.data(), dx.data(), a.outer, a.n, a.inner);
      unsigned long long dXi = upload(x), dG = upload(g),
                         dDx = alloc(a.inSize() * 4);
      OK(ops::reduceGrad(L, r, dXi, dG, dDx, a.outer, a.n, a.inner));
      EXPECT_LE(maxRelError(getF32(dDx, a.inSize()), dx, 0, what + " grad"), 0);
    }
}

TEST_P(OpsPointwise, SoftmaxAndGradOverLastAndMiddleAxes) {
  for (DType type : {DType::F32, DType::BF16})
    for (const Axis &a : kAxes) {
      const bool bf16 = type == DType::BF16;
      std::string what = "softmax " + a.str() + (bf16 ? " bf16" : "");
      std::vector<float> x = randomFloats(a.inSize(), 50, -30, 30);
      for (int64_t k = 0; k < a.n; k += 3) // column (0, 0): a third masked
        x[size_t(k * a.inner)] = -std::numeric_limits<float>::infinity();
      if (bf16)
        x = roundBf16(x);
      std::vector<float> y(x.size());
      cpu::softmax(x.data(), y.data(), a.outer, a.n, a.inner);
      unsigned long long dX = put(x, type),
                         dY = alloc(x.size() * ops::dtypeBytes(type));
      OK(ops::softmax(L, dX, dY, a.outer, a.n, a.inner, type));
      if (bf16)
        EXPECT_LE(maxBf16Ulps(getBf16(dY, x.size()), y, what), 2);
      else
        EXPECT_LE(maxRelError(getF32(dY, x.size()), y, 0, what), 1e-5);

      // The gradient from the reference probabilities (rounded as stored).
      std::vector<float> p = bf16 ? roundBf16(y) : y,
                         g = randomFloats(x.size(), 51), dx(x.size());
      if (bf16)
        g = roundBf16(g);
      cpu::softmaxGrad(p.data(), g.data(), dx.data(), a.outer, a.n, a.inner);
      unsigned long long dP = put(p, type), dG = put(g, type),
                         dDx = alloc(x.size() * ops::dtypeBytes(type));
      OK(ops::softmaxGrad(L, dP, dG, dDx, a.outer, a.n, a.inner, type));
      if (bf16)
        EXPECT_LE(maxBf16Ulps(getBf16(dDx, x.size()), dx, what + " grad"), 2);
      else // dy - sum(dy y) cancels: floor 1% of max|dx|
        EXPECT_LE(maxRelError(getF32(dDx, x.size()), dx, 1e-2, what + " grad"),
                  1e-5);
    }
}

TEST_P(OpsPointwise, AxisOutsideTheKernelsRangeIsAnError) {
  Status s = ops::softmax(L, 0, 0, 1, int64_t(1) << 31, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("softmax: [1, 2147483648, 1]"), std::string::npos)
      << s.message();
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

struct NormShape {
  int64_t rows, D;
};
// Rows not multiples of 32; 70 and 100 rows: more than 64 chunks' worth.
const NormShape kNormShapes[] = {
    {37, 7}, {19, 300}, {9, 1029}, {70, 130}, {100, 33}};

TEST_P(OpsPointwise, RmsNormForwardAndBackward) {
  for (const NormShape &s : kNormShapes)
    for (float offset : {0.0f, 1.0f}) {
      std::string what = "rmsnorm rows=" + std::to_string(s.rows) +
                         " D=" + std::to_string(s.D) +
                         " offset=" + std::to_string(int(offset));
      const size_t n = size_t(s.rows * s.D);
      const float eps = 1e-5f;
      std::vector<float> x = randomFloats(n, 1), w = randomFloats(s.D, 2),
                         g = randomFloats(n, 3), acc0 = randomFloats(s.D, 4);
      std::vector<float> y(n), dx(n), acc = acc0;
      cpu::rmsnorm(x.data(), w.data(), y.data(), s.rows, s.D, eps, offset);
      cpu::rmsnormGrad(x.data(), w.data(), g.data(), dx.data(), acc.data(),
                       s.rows, s.D, eps, offset);
      unsigned long long dX = upload(x), dW = upload(w), dG = upload(g),
                         dY = alloc(n * 4), dDx = alloc(n * 4),
                         dAcc = upload(acc0);
      OK(ops::rmsnorm(L, dX, dW, dY, s.rows, s.D, eps, offset));
      OK(ops::rmsnormGrad(L, dX, dW, dG, dDx, dAcc, s.rows, s.D, eps, offset));
      EXPECT_LE(maxRelError(getF32(dY, n), y, 0, what), 1e-5);
      EXPECT_LE(maxRelError(getF32(dDx, n), dx, 1e-2, what + " dx"), 1e-5);
      // dw ACCUMULATED onto acc0, as runtime/cpu.
      EXPECT_LE(maxRelError(getF32(dAcc, s.D), acc, 1e-2, what + " dw"), 1e-4);
      // No dw wanted: dx alone.
      unsigned long long dDx2 = alloc(n * 4);
      OK(ops::rmsnormGrad(L, dX, dW, dG, dDx2, 0, s.rows, s.D, eps, offset));
      EXPECT_LE(maxRelError(getF32(dDx2, n), dx, 1e-2, what + " dx, no dw"),
                1e-5);
    }
}

TEST_P(OpsPointwise, RmsNormBf16) {
  const int64_t rows = 11, D = 520;
  const size_t n = size_t(rows * D);
  std::vector<float> x = roundBf16(randomFloats(n, 5)),
                     w = roundBf16(randomFloats(D, 6)),
                     g = roundBf16(randomFloats(n, 7)), y(n), dx(n),
                     acc(D, 0.25f);
  cpu::rmsnorm(x.data(), w.data(), y.data(), rows, D, 1e-6f, 1.0f);
  cpu::rmsnormGrad(x.data(), w.data(), g.data(), dx.data(), acc.data(), rows, D,
                   1e-6f, 1.0f);
  unsigned long long dX = put(x, DType::BF16), dW = put(w, DType::BF16),
                     dG = put(g, DType::BF16), dY = alloc(n * 2),
                     dDx = alloc(n * 4),
                     dAcc = upload(std::vector<float>(D, 0.25f));
  OK(ops::rmsnorm(L, dX, dW, dY, rows, D, 1e-6f, 1.0f, DType::BF16));
  OK(ops::rmsnormGrad(L, dX, dW, dG, dDx, dAcc, rows, D, 1e-6f, 1.0f,
                      DType::BF16));
  EXPECT_LE(maxBf16Ulps(getBf16(dY, n), y, "rmsnorm bf16"), 2);
  // dx is f32 whatever the input type.
  EXPECT_LE(maxRelError(getF32(dDx, n), dx, 1e-2, "rmsnorm bf16 dx"), 1e-5);
  EXPECT_LE(maxRelError(getF32(dAcc, D), acc, 1e-2, "rmsnorm bf16 dw"), 1e-4);
}

TEST_P(OpsPointwise, LayerNormForwardAndBackward) {
  for (const NormShape &s : kNormShapes)
    for (int wanted = 0; wanted < 4; ++wanted) { // bit 0: dw, bit 1: db/b
      const bool withW = wanted & 1, withB = wanted & 2;
      std::string what = "layernorm rows=" + std::to_string(s.rows) +
                         " D=" + std::to_string(s.D) + (withW ? " dw" : "") +
                         (withB ? " b/db" : "");
      const size_t n = size_t(s.rows * s.D);
      const float eps = 1e-5f;
      std::vector<float> x = randomFloats(n, 8, -1, 3),
                         w = randomFloats(s.D, 9), b = randomFloats(s.D, 10),
                         g = randomFloats(n, 11), accW0 = randomFloats(s.D, 12),
                         accB0 = randomFloats(s.D, 13);
      std::vector<float> y(n), dx(n), accW = accW0, accB = accB0;
      cpu::layernorm(x.data(), w.data(), withB ? b.data() : nullptr, y.data(),
                     s.rows, s.D, eps);
      cpu::layernormGrad(x.data(), w.data(), g.data(), dx.data(),
                         withW ? accW.data() : nullptr,
                         withB ? accB.data() : nullptr, s.rows, s.D, eps);
      unsigned long long dX = upload(x), dW = upload(w), dB = upload(b),
                         dG = upload(g), dY = alloc(n * 4), dDx = alloc(n * 4),
                         dAccW = upload(accW0), dAccB = upload(accB0);
      OK(ops::layernorm(L, dX, dW, withB ? dB : 0, dY, s.rows, s.D, eps));
      OK(ops::layernormGrad(L, dX, dW, dG, dDx, withW ? dAccW : 0,
                            withB ? dAccB : 0, s.rows, s.D, eps));
      // Floor 2% of max|y|: where (x - mean) rstd w and b cancel, both
      // sides are an ulp of the terms apart (~1e-7 of max|y|, measured up to
      // 1.03e-5 of a 1% floor at rows=70 D=130).
      EXPECT_LE(maxRelError(getF32(dY, n), y, 2e-2, what), 1e-5);
      EXPECT_LE(maxRelError(getF32(dDx, n), dx, 1e-2, what + " dx"), 1e-5);
      // Accumulated where wanted, untouched (exactly) where not.
      EXPECT_LE(maxRelError(getF32(dAccW, s.D), accW, 1e-2, what + " dw"),
                withW ? 1e-4 : 0);
      EXPECT_LE(maxRelError(getF32(dAccB, s.D), accB, 1e-2, what + " db"),
                withB ? 1e-4 : 0);
    }
}

TEST_P(OpsPointwise, ParameterGradientsAreBitIdenticalAcrossRuns) {
  const int64_t rows = 83, D = 201;
  const size_t n = size_t(rows * D);
  unsigned long long dX = upload(randomFloats(n, 14)),
                     dW = upload(randomFloats(D, 15)),
                     dG = upload(randomFloats(n, 16)), dDx = alloc(n * 4);
  std::vector<float> runs[2][2];
  for (auto &run : runs) {
    unsigned long long accW = upload(std::vector<float>(D, 0.5f)),
                       accB = upload(std::vector<float>(D, -0.5f));
    OK(ops::layernormGrad(L, dX, dW, dG, dDx, accW, accB, rows, D, 1e-5f));
    OK(ops::rmsnormGrad(L, dX, dW, dG, dDx, accB, rows, D, 1e-5f, 1.0f));
    run[0] = getF32(accW, D);
    run[1] = getF32(accB, D);
  }
  for (int k = 0; k < 2; ++k)
    for (int64_t j = 0; j < D; ++j)
      ASSERT_EQ(runs[0][k][j], runs[1][k][j]) << k << " " << j;
}

//===----------------------------------------------------------------------===//
// Rope
//===----------------------------------------------------------------------===//

struct RopeCase {
  int64_t B, S, H, D;
  double fraction;
  bool llama3, inverse, inPlace;
  int64_t posOffset;
};

TEST_P(OpsPointwise, RopeMatchesCpuIncludingPartialRotary) {
  const RopeCase cases[] = {
      {2, 5, 3, 6, 1.0, false, false, false, 0},
      {1, 7, 2, 70, 0.5, true, false, false, 4000}, // rot 34: pass-through
      {2, 3, 5, 38, 1.0, true, true, true, 13},
      {1, 4, 3, 65, 0.25, false, true, false, 100}, // rot 16, odd D
      {3, 2, 1, 9, 1.0, false, false, true, 0},     // rot 8, in place
      {1, 2, 1, 1100, 1.0, true, false, false, 7},  // 550 freqs: 3 launches
      {1, 3, 2, 4, 0.0, false, false, false, 0},    // rot 0: a copy
  };
  for (DType type : {DType::F32, DType::BF16})
    for (const RopeCase &c : cases) {
      const bool bf16 = type == DType::BF16;
      std::string what =
          "rope B=" + std::to_string(c.B) + " S=" + std::to_string(c.S) +
          " H=" + std::to_string(c.H) + " D=" + std::to_string(c.D) +
          " fraction=" + std::to_string(c.fraction) +
          (c.inverse ? " inverse" : "") + (c.inPlace ? " in place" : "") +
          (bf16 ? " bf16" : "");
      SCOPED_TRACE(what);
      cpu::RopeParams p;
      p.theta = 500000.0;
      p.fraction = c.fraction;
      p.llama3 = c.llama3;
      p.factor = 8;
      p.originalMaxPosition = 64;
      const size_t n = size_t(c.B * c.S * c.H * c.D);
      std::vector<float> x = randomFloats(n, 17 + unsigned(c.D)), y(n);
      if (bf16)
        x = roundBf16(x);
      cpu::rope(x.data(), y.data(), c.B, c.S, c.H, c.D, p, c.inverse,
                c.posOffset);
      unsigned long long dX = put(x, type),
                         dY = c.inPlace ? dX
                                        : put(std::vector<float>(n, NAN), type);
      OK(ops::rope(L, dX, dY, c.B, c.S, c.H, c.D, p, c.inverse, c.posOffset,
                   type));
      if (bf16) {
        EXPECT_LE(maxBf16Ulps(getBf16(dY, n), y, what), 2);
        continue;
      }
      // Error relative to the pair's scale |x_i| + |x_(i+h)| (the GPU may
      // contract a c - b s into an FMA); the pass-through dims exactly.
      std::vector<float> got = getF32(dY, n);
      const int64_t rot = cpu::ropeRotaryDims(p, c.D), half = rot / 2;
      double worst = 0;
      for (size_t e = 0; e < n; ++e) {
        const int64_t i = int64_t(e % c.D);
        if (i >= rot) {
          ASSERT_EQ(got[e], x[e]) << e;
          continue;
        }
        const size_t base = e - i, lo = size_t(i % half);
        const double scale =
            std::abs(x[base + lo]) + std::abs(x[base + lo + half]);
        worst = std::max(worst, std::abs(double(got[e]) - y[e]) / scale);
      }
      std::printf("  [measured] %-48s max error %.3g of the pair's scale\n",
                  what.c_str(), worst);
      EXPECT_LE(worst, 1e-5);
    }
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(OpsPointwise);
