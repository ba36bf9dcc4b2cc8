//===- ElementwiseKernelsTest.cpp - elementwise.cu against runtime/cpu ----===//
//
// Part of mtc. Every cpu::Unary forward and gradient, and the four
// broadcasting binaries, in f32 and bf16, on either driver, compared with
// runtime/cpu's unary, unaryGrad and binary on the same inputs: ragged
// lengths, aligned and misaligned pointers (the float4 path and the scalar
// one), grids smaller than the data (the grid-stride loop), the functions'
// saturation edges (fexp's 0 and +inf, tanh's +-1), broadcasts of every
// kind (trailing, middle, leading, scalar, size-1 output dims).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/kernels/shapes.cuh"
#include "runtime/cuda/ops/Elementwise.h"
#include "test/cuda/KernelCompare.h"

using namespace mtc;
using namespace mtc::cuda::test;

namespace {

class ElementwiseKernels : public CudaDriverTest {
public:
  // For runUnary below.
  using CudaDriverTest::alloc;
  using CudaDriverTest::download;
  using CudaDriverTest::launch;
  using CudaDriverTest::upload;
};

/// Every function of lib/Bundle/UnaryFns.def.
constexpr int kUnaryOps = static_cast<int>(bundle::kNumUnaryFns);
const char *unaryName(int op) { return bundle::unaryFnName(cpu::Unary(op)); }

bool positiveDomain(int op) {
  cpu::Unary f = cpu::Unary(op);
  return f == cpu::Unary::Log || f == cpu::Unary::Rsqrt ||
         f == cpu::Unary::Sqrt;
}

/// Inputs for op: n random values in its domain.
std::vector<float> unaryInput(int op, size_t n, uint32_t seed) {
  return positiveDomain(op) ? randomFloats(n, seed, 0.05f, 5)
                            : randomFloats(n, seed, -6, 6);
}

/// The f32 gradients' bound. 1 - t^2 (Tanh, GeluTanh, Softcap) cancels
/// where tanh saturates, and is rounded differently where it is contracted
/// into an FMA (the GPU, runtime/cpu's AVX2/AVX-512 clones) and where not (the
/// emulator's build): a few ulp of 1 times |dy x|, up to ~2e-5 of the
/// output's scale. Everything else: 1e-5.
double gradTolerance(int op) {
  cpu::Unary f = cpu::Unary(op);
  return f == cpu::Unary::Tanh || f == cpu::Unary::GeluTanh ||
                 f == cpu::Unary::Softcap
             ? 5e-5
             : 1e-5;
}

/// The functions' edges: fexp's flush to 0 below -87.3 and overflow above
/// 88.38, tanh's saturation, signed zeros.
std::vector<float> edgeInput(int op) {
  if (positiveDomain(op))
    return {1e-30f, 1.0f, 1e30f, 3.0e38f};
  return {-100.0f, -88.0f, -87.5f, -20.0f, -0.0f,
          0.0f,    9.0f,   20.0f,  88.5f,  100.0f};
}

/// Runs an f32 or bf16 unary (grad when \p grad) of op on x (and dy)
/// starting \p offset elements into the device buffers (offset 1: not
/// 16-byte aligned, the scalar path) and returns the output as floats.
std::vector<float> runUnary(ElementwiseKernels &t, void *fn, bool grad,
                            bool bf16, int op, float param,
                            const std::vector<float> &x,
                            const std::vector<float> &dy, int offset,
                            unsigned grid, unsigned block,
                            std::vector<uint16_t> *bits = nullptr);

TEST_P(ElementwiseKernels, UnaryF32EveryOp) {
  void *fwd = kernel("elementwise.cu", "mtc_unary_f32");
  void *bwd = kernel("elementwise.cu", "mtc_unary_grad_f32");
  const float param = 30.0f;
  for (int op = 0; op < kUnaryOps; ++op) {
    for (int offset : {0, 1}) {
      std::string what =
          std::string(unaryName(op)) + (offset ? " misaligned" : " aligned");
      size_t n = 1003;
      std::vector<float> x = unaryInput(op, n, 70 + op),
                         g = randomFloats(n, 90 + op);
      std::vector<float> y(n), dx(n);
      cpu::unary(cpu::Unary(op), x.data(), y.data(), n, param);
      cpu::unaryGrad(cpu::Unary(op), x.data(), g.data(), dx.data(), n, param);
      // Floor 1% of the largest |output|: a few outputs cancel to about 0
      // (GeluTanh's 1 + tanh at large negative x), both sides a few ulp of
      // 1 off there.
      EXPECT_LE(maxRelError(runUnary(*this, fwd, false, false, op, param, x, {},
                                     offset, 3, 64),
                            y, 1e-2, "unary_f32 " + what),
                1e-5);
      EXPECT_LE(maxRelError(runUnary(*this, bwd, true, false, op, param, x, g,
                                     offset, 3, 64),
                            dx, 1e-2, "unary_grad_f32 " + what),
                gradTolerance(op));
    }
    std::vector<float> x = edgeInput(op), g(x.size(), 1.5f);
    std::vector<float> y(x.size()), dx(x.size());
    cpu::unary(cpu::Unary(op), x.data(), y.data(), x.size(), param);
    cpu::unaryGrad(cpu::Unary(op), x.data(), g.data(), dx.data(), x.size(),
                   param);
    std::string what = std::string(unaryName(op)) + " edges";
    EXPECT_LE(maxRelError(runUnary(*this, fwd, false, false, op, param, x, {},
                                   0, 1, 32),
                          y, 0, "unary_f32 " + what),
              1e-5);
    EXPECT_LE(maxRelError(
                  runUnary(*this, bwd, true, false, op, param, x, g, 0, 1, 32),
                  dx, 0, "unary_grad_f32 " + what),
              1e-5);
  }
}

TEST_P(ElementwiseKernels, UnaryBf16EveryOp) {
  void *fwd = kernel("elementwise.cu", "mtc_unary_bf16");
  void *bwd = kernel("elementwise.cu", "mtc_unary_grad_bf16");
  const float param = 15.0f;
  for (int op = 0; op < kUnaryOps; ++op) {
    for (int offset : {0, 3}) {
      std::string what =
          std::string(unaryName(op)) + (offset ? " misaligned" : " aligned");
      size_t n = 517;
      std::vector<float> x = roundBf16(unaryInput(op, n, 110 + op)),
                         g = roundBf16(randomFloats(n, 130 + op));
      std::vector<float> y(n), dx(n);
      cpu::unary(cpu::Unary(op), x.data(), y.data(), n, param);
      cpu::unaryGrad(cpu::Unary(op), x.data(), g.data(), dx.data(), n, param);
      std::vector<uint16_t> got;
      runUnary(*this, fwd, false, true, op, param, x, {}, offset, 2, 64, &got);
      // Floor 1% of max|y| as in the f32 test (GeluErf's 1 + erf cancels:
      // CUDA's erff and libm's differ there by an ulp of 1).
      EXPECT_LE(maxBf16Ulps(got, y, "unary_bf16 " + what, 1e-2), 2);
      runUnary(*this, bwd, true, true, op, param, x, g, offset, 2, 64, &got);
      EXPECT_LE(maxBf16Ulps(got, dx, "unary_grad_bf16 " + what, 1e-2), 2);
    }
  }
}

std::vector<float> runUnary(ElementwiseKernels &t, void *fn, bool grad,
                            bool bf16, int op, float param,
                            const std::vector<float> &x,
                            const std::vector<float> &dy, int offset,
                            unsigned grid, unsigned block,
                            std::vector<uint16_t> *bits) {
  // Each buffer padded in front by `offset` elements.
  auto padded = [&](const std::vector<float> &v) {
    std::vector<float> p(offset, 7.0f);
    p.insert(p.end(), v.begin(), v.end());
    return p;
  };
  const size_t es = bf16 ? 2 : 4, n = x.size();
  auto up = [&](const std::vector<float> &v) {
    return bf16 ? t.upload(toBf16(padded(v))) : t.upload(padded(v));
  };
  unsigned long long bx = up(x) + offset * es,
                     bg = grad ? up(dy) + offset * es : 0,
                     bo = t.alloc((n + offset) * es) + offset * es;
  long long count = static_cast<long long>(n);
  if (grad)
    t.launch(fn, {grid}, {block}, 0, {&bx, &bg, &bo, &count, &op, &param});
  else
    t.launch(fn, {grid}, {block}, 0, {&bx, &bo, &count, &op, &param});
  if (bf16) {
    *bits = t.download<uint16_t>(bo, n);
    return fromBf16(*bits);
  }
  return t.download<float>(bo, n);
}

TEST_P(ElementwiseKernels, BinaryBroadcastF32AndBf16) {
  const char *names[] = {"add", "sub", "mul", "div"};
  struct Case {
    std::vector<int64_t> out, a, b;
    int offset;
  };
  const std::vector<Case> cases = {
      {{1003}, {1003}, {1003}, 0},       // flat: the float4 path
      {{1003}, {1003}, {1003}, 1},       // flat, misaligned: scalar
      {{4, 5, 6}, {4, 5, 6}, {6}, 0},    // trailing (a bias)
      {{4, 5, 6}, {4, 1, 6}, {5, 1}, 0}, // both broadcast
      {{2, 3, 4, 5}, {3, 1, 5}, {2, 3, 4, 5}, 0},
      {{7, 9}, {}, {7, 9}, 0},           // scalar a
      {{3, 1, 4}, {3, 1, 4}, {1, 4}, 0}, // a size-1 output dim
      // Innermost a multiple of the pack (8 bf16): a pack at a time.
      {{6, 16}, {6, 16}, {16}, 0}, // a bias
      {{6, 16}, {6, 16}, {16}, 1}, // misaligned: element-wise
      // b broadcast innermost: one b value per pack.
      {{2, 3, 8}, {2, 1, 8}, {3, 1}, 0},
  };
  for (bool bf16 : {false, true}) {
    void *fn =
        kernel("elementwise.cu", bf16 ? "mtc_binary_bf16" : "mtc_binary_f32");
    for (const Case &c : cases)
      for (int op = 0; op < 4; ++op) {
        auto count = [](const std::vector<int64_t> &s) {
          size_t n = 1;
          for (int64_t d : s)
            n *= d;
          return n;
        };
        size_t n = count(c.out);
        std::string what =
            std::string("binary_") + names[op] + (bf16 ? "_bf16 " : "_f32 ") +
            std::to_string(c.out.size()) + "-d a" + std::to_string(c.a.size()) +
            "-d b" + std::to_string(c.b.size()) + "-d" +
            (c.offset ? " misaligned" : "");
        std::vector<float> a = randomFloats(count(c.a), 150 + op),
                           b = randomFloats(count(c.b), 160 + op, 0.5f, 3);
        if (bf16) {
          a = roundBf16(a);
          b = roundBf16(b);
        }
        std::vector<float> ref(n);
        cpu::binary(cpu::Binary(op), a.data(), c.a, b.data(), c.b, ref.data(),
                    c.out);
        const size_t es = bf16 ? 2 : 4;
        auto up = [&](std::vector<float> v) {
          v.insert(v.begin(), c.offset, 5.0f);
          return (bf16 ? upload(toBf16(v)) : upload(v)) + c.offset * es;
        };
        unsigned long long da = up(a), db = up(b),
                           dout = alloc((n + c.offset) * es) + c.offset * es;
        // The shape as the launcher builds it (dims merged).
        Expected<mtc_cuda::BroadcastShape> shape =
            cuda::ops::broadcastShape(c.out, c.a, c.b);
        ASSERT_TRUE(shape.ok()) << shape.message();
        mtc_cuda::BroadcastShape s = *shape;
        long long total = static_cast<long long>(n);
        launch(fn, {unsigned(std::min<size_t>((n + 63) / 64, 5))}, {64}, 0,
               {&da, &db, &dout, &s, &total, &op});
        if (bf16)
          EXPECT_LE(maxBf16Ulps(download<uint16_t>(dout, n), ref, what), 0);
        else
          EXPECT_LE(maxRelError(download<float>(dout, n), ref, 0, what), 1e-6);
      }
  }
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(ElementwiseKernels);
