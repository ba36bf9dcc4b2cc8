//===- KernelsTest.cpp - The demonstration kernels on the emulator --------===//
//
// Part of mtc. add_rmsnorm.cu, softmax.cu and sgemm.cu -- the CUDA C text
// NVRTC compiles -- run on the CPU emulator at small ragged shapes (sizes
// that are not multiples of the block, the warp or the vector width), in
// every thread schedule, and compared with a double-precision reference and
// with runtime/cpu's kernels. Tolerances and the errors measured are in
// docs/cuda-emulator.md.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "cuda_emu.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/emu/Emulator.h"
#include "test/cuda-emu/kernels/DemoKernels.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

using mtc::Status;
namespace emu = mtc::emu;

namespace {

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    ASSERT_TRUE(s_.ok()) << s_.message();                                      \
  } while (0)

std::vector<float> randomVector(size_t n, float lo, float hi,
                                std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

uint16_t bf16Bits(double v) {
  return __bfloat16_as_ushort(__double2bfloat16(v));
}

/// Distance in units in the last place between two finite bf16 values of
/// the same sign (or zero).
int bf16UlpDistance(uint16_t a, uint16_t b) {
  auto key = [](uint16_t h) {
    return (h & 0x8000) ? -static_cast<int>(h & 0x7fff) : static_cast<int>(h);
  };
  return std::abs(key(a) - key(b));
}

const emu::Schedule kSchedules[] = {
    emu::Schedule::Forward, emu::Schedule::Reverse, emu::Schedule::Random};

//===----------------------------------------------------------------------===//
// Residual add + RMSNorm
//===----------------------------------------------------------------------===//

struct NormShape {
  int rows, D, ld, threads;
};

// Scalar rows (ld not a multiple of the vector width), vector rows with a
// tail (padded ld), whole vectors, D below and above the block size.
const NormShape kNormShapes[] = {
    {3, 1, 1, 32},        {5, 7, 7, 32},        {4, 13, 16, 64},
    {2, 37, 37, 96},      {3, 45, 48, 128},     {2, 64, 64, 32},
    {3, 1003, 1008, 256}, {2, 1000, 1000, 128}, {1, 2053, 2056, 1024}};

constexpr float kEps = 1e-5f;
constexpr float kPadding = 12345.0f; // columns D..ld must stay untouched

TEST(CudaKernelsTest, AddRmsnormF32) {
  std::mt19937 rng(1);
  double worst = 0;
  for (const NormShape &s : kNormShapes) {
    size_t n = static_cast<size_t>(s.rows) * s.ld;
    std::vector<float> x = randomVector(n, -2, 2, rng),
                       r = randomVector(n, -2, 2, rng),
                       w = randomVector(s.D, 0.5f, 1.5f, rng);
    for (int row = 0; row < s.rows; ++row)
      for (int j = s.D; j < s.ld; ++j)
        x[row * s.ld + j] = r[row * s.ld + j] = kPadding;
    for (emu::Schedule schedule : kSchedules) {
      std::vector<float> res = r, y(n, kPadding);
      emu::LaunchConfig cfg;
      cfg.grid = s.rows;
      cfg.block = s.threads;
      cfg.dynamicShared = s.D * sizeof(float);
      cfg.schedule = schedule;
      cfg.workers = schedule == emu::Schedule::Random ? 2 : 1;
      ASSERT_OK(emu::launch(cfg, add_rmsnorm_f32, x.data(), res.data(),
                            w.data(), y.data(), s.rows, s.D, s.ld, kEps));
      for (int row = 0; row < s.rows; ++row) {
        const size_t o = static_cast<size_t>(row) * s.ld;
        double squares = 0;
        for (int j = 0; j < s.D; ++j) {
          float h = x[o + j] + r[o + j];
          ASSERT_EQ(res[o + j], h) << "residual row " << row << " col " << j;
          squares += double(h) * h;
        }
        double scale = 1 / std::sqrt(squares / s.D + kEps);
        for (int j = 0; j < s.D; ++j) {
          double want = double(res[o + j]) * scale * w[j];
          double err =
              std::fabs(y[o + j] - want) / std::max(1.0, std::fabs(want));
          worst = std::max(worst, err);
          ASSERT_LE(err, 2e-6) << "D " << s.D << " row " << row << " col " << j;
        }
        for (int j = s.D; j < s.ld; ++j) {
          ASSERT_EQ(res[o + j], kPadding);
          ASSERT_EQ(y[o + j], kPadding);
        }
      }
    }
  }
  std::printf("add_rmsnorm_f32: worst error %.2e (relative, floor 1)\n", worst);
}

TEST(CudaKernelsTest, AddRmsnormF32MatchesRuntimeCpu) {
  std::mt19937 rng(2);
  const int rows = 3, D = 301;
  std::vector<float> x = randomVector(rows * D, -2, 2, rng),
                     r = randomVector(rows * D, -2, 2, rng),
                     w = randomVector(D, 0.5f, 1.5f, rng);
  std::vector<float> res = r, y(rows * D);
  ASSERT_OK(emu::launch(add_rmsnorm_f32, rows, 128, D * sizeof(float), x.data(),
                        res.data(), w.data(), y.data(), rows, D, D, kEps));
  std::vector<float> h(rows * D), yCpu(rows * D);
  std::vector<int64_t> shape = {rows, D};
  mtc::cpu::binary(mtc::cpu::Binary::Add, x.data(), shape, r.data(), shape,
                   h.data(), shape);
  mtc::cpu::rmsnorm(h.data(), w.data(), yCpu.data(), rows, D, kEps, 0.0f);
  EXPECT_EQ(res, h); // the same float additions
  for (int i = 0; i < rows * D; ++i)
    ASSERT_NEAR(y[i], yCpu[i], 4e-6 * std::max(1.0f, std::fabs(yCpu[i]))) << i;
}

TEST(CudaKernelsTest, AddRmsnormBf16) {
  std::mt19937 rng(3);
  int worstUlp = 0;
  size_t offByOne = 0, total = 0;
  for (const NormShape &s : kNormShapes) {
    if (s.ld % 8 && s.ld != s.D)
      continue; // a padded bf16 row must be 16-byte aligned: ld % 8 == 0
    size_t n = static_cast<size_t>(s.rows) * s.ld;
    auto toBf16 = [](const std::vector<float> &v) {
      std::vector<__nv_bfloat16> out;
      for (float f : v)
        out.push_back(__float2bfloat16(f));
      return out;
    };
    std::vector<__nv_bfloat16> x = toBf16(randomVector(n, -2, 2, rng)),
                               r = toBf16(randomVector(n, -2, 2, rng)),
                               w = toBf16(randomVector(s.D, 0.5f, 1.5f, rng));
    const __nv_bfloat16 pad = __float2bfloat16(kPadding);
    for (int row = 0; row < s.rows; ++row)
      for (int j = s.D; j < s.ld; ++j)
        x[row * s.ld + j] = r[row * s.ld + j] = pad;
    for (emu::Schedule schedule : kSchedules) {
      std::vector<__nv_bfloat16> res = r, y(n, pad);
      emu::LaunchConfig cfg;
      cfg.grid = s.rows;
      cfg.block = s.threads;
      cfg.dynamicShared = s.D * sizeof(float);
      cfg.schedule = schedule;
      ASSERT_OK(emu::launch(cfg, add_rmsnorm_bf16, x.data(), res.data(),
                            w.data(), y.data(), s.rows, s.D, s.ld, kEps));
      for (int row = 0; row < s.rows; ++row) {
        const size_t o = static_cast<size_t>(row) * s.ld;
        double squares = 0;
        std::vector<double> h(s.D);
        for (int j = 0; j < s.D; ++j) {
          // bf16 + bf16 is exact in double: the sum rounded once.
          double exact = double(__bfloat162float(x[o + j])) +
                         double(__bfloat162float(r[o + j]));
          uint16_t want = bf16Bits(exact);
          ASSERT_EQ(res[o + j].__x, want) << "row " << row << " col " << j;
          h[j] = __bfloat162float(res[o + j]);
          squares += h[j] * h[j];
        }
        double scale = 1 / std::sqrt(squares / s.D + kEps);
        for (int j = 0; j < s.D; ++j) {
          double want = h[j] * scale * double(__bfloat162float(w[j]));
          int ulp = bf16UlpDistance(y[o + j].__x, bf16Bits(want));
          worstUlp = std::max(worstUlp, ulp);
          offByOne += ulp == 1;
          ++total;
          ASSERT_LE(ulp, 1)
              << "D " << s.D << " row " << row << " col " << j << ": "
              << __bfloat162float(y[o + j]) << " vs " << want;
        }
        for (int j = s.D; j < s.ld; ++j) {
          ASSERT_EQ(res[o + j].__x, pad.__x);
          ASSERT_EQ(y[o + j].__x, pad.__x);
        }
      }
    }
  }
  std::printf("add_rmsnorm_bf16: worst %d ulp, %zu of %zu outputs 1 ulp off "
              "the correctly rounded value\n",
              worstUlp, offByOne, total);
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

TEST(CudaKernelsTest, SoftmaxF32) {
  struct Shape {
    int rows, n, threads;
  } shapes[] = {{1, 1, 32},     {3, 5, 32},     {4, 33, 64},    {2, 100, 96},
                {2, 1000, 256}, {3, 1025, 128}, {1, 3000, 1024}};
  std::mt19937 rng(4);
  double worst = 0;
  for (const Shape &s : shapes) {
    std::vector<float> x = randomVector(size_t(s.rows) * s.n, -8, 8, rng);
    for (emu::Schedule schedule : kSchedules) {
      std::vector<float> y(x.size(), -1);
      emu::LaunchConfig cfg;
      cfg.grid = s.rows;
      cfg.block = s.threads;
      cfg.schedule = schedule;
      ASSERT_OK(emu::launch(cfg, softmax_f32, x.data(), y.data(), s.rows, s.n));
      for (int row = 0; row < s.rows; ++row) {
        const float *xr = &x[size_t(row) * s.n];
        double m = *std::max_element(xr, xr + s.n), sum = 0;
        for (int j = 0; j < s.n; ++j)
          sum += std::exp(double(xr[j]) - m);
        for (int j = 0; j < s.n; ++j) {
          double want = std::exp(double(xr[j]) - m) / sum;
          double err = std::fabs(y[size_t(row) * s.n + j] - want);
          worst = std::max(worst, err / want);
          ASSERT_LE(err, 2e-6 * want) << "n " << s.n << " col " << j;
        }
      }
    }
    std::vector<float> y(x.size()), yCpu(x.size());
    ASSERT_OK(emu::launch(softmax_f32, s.rows, s.threads, 0, x.data(), y.data(),
                          s.rows, s.n));
    mtc::cpu::softmax(x.data(), yCpu.data(), s.rows, s.n, 1);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], yCpu[i], 4e-6 * yCpu[i]) << i;
  }
  std::printf("softmax_f32: worst relative error %.2e\n", worst);
}

//===----------------------------------------------------------------------===//
// SGEMM
//===----------------------------------------------------------------------===//

TEST(CudaKernelsTest, SgemmF32) {
  struct Shape {
    int M, N, K;
    float alpha, beta;
  } shapes[] = {{1, 1, 1, 1, 0},     {37, 45, 29, 1, 0},
                {64, 64, 16, 1, 0},  {70, 3, 100, 1.5f, 0.5f},
                {5, 130, 17, -1, 1}, {65, 65, 33, 0.25f, -2},
                {128, 64, 1, 1, 0}};
  std::mt19937 rng(5);
  double worst = 0;
  for (const Shape &s : shapes) {
    std::vector<float> A = randomVector(size_t(s.M) * s.K, -1, 1, rng),
                       B = randomVector(size_t(s.K) * s.N, -1, 1, rng),
                       C0 = randomVector(size_t(s.M) * s.N, -1, 1, rng);
    if (s.beta == 0)
      std::fill(C0.begin(), C0.end(), NAN); // must not be read
    // The reference and the bound: each product and sum rounds once, so the
    // error is at most K + 2 roundings of 2^-24 of the magnitudes involved.
    std::vector<double> want(C0.size()), bound(C0.size());
    for (int m = 0; m < s.M; ++m)
      for (int n = 0; n < s.N; ++n) {
        double dot = 0, mag = 0;
        for (int k = 0; k < s.K; ++k) {
          double p = double(A[size_t(m) * s.K + k]) * B[size_t(k) * s.N + n];
          dot += p;
          mag += std::fabs(p);
        }
        size_t i = size_t(m) * s.N + n;
        double c0 = s.beta == 0 ? 0 : C0[i];
        want[i] = s.alpha * dot + s.beta * c0;
        bound[i] = (s.K + 2) * 0x1p-24 *
                   (std::fabs(s.alpha) * mag + std::fabs(s.beta * c0));
      }
    auto check = [&](const std::vector<float> &C, const char *what) {
      for (size_t i = 0; i < C.size(); ++i) {
        double err = std::fabs(C[i] - want[i]);
        worst = std::max(worst, err / std::max(bound[i], 1e-30));
        ASSERT_LE(err, bound[i] + 1e-30)
            << what << " M " << s.M << " N " << s.N << " K " << s.K << " at "
            << i / s.N << "," << i % s.N;
      }
    };
    dim3 grid((s.N + 63) / 64, (s.M + 63) / 64);
    for (emu::Schedule schedule : kSchedules) {
      std::vector<float> C = C0;
      emu::LaunchConfig cfg;
      cfg.grid = grid;
      cfg.block = 256;
      cfg.schedule = schedule;
      cfg.workers = 2;
      ASSERT_OK(emu::launch(cfg, sgemm_f32, s.M, s.N, s.K, s.alpha, A.data(),
                            B.data(), s.beta, C.data()));
      check(C, "emulator");
    }
    std::vector<float> Ccpu = C0;
    mtc::cpu::gemm(false, false, s.M, s.N, s.K, s.alpha, A.data(), B.data(),
                   s.beta, Ccpu.data());
    check(Ccpu, "runtime/cpu");
  }
  std::printf("sgemm_f32: worst error %.3f of the bound (K + 2) 2^-24 "
              "(|alpha| sum |a b| + |beta c|), emulator and runtime/cpu\n",
              worst);
}

} // namespace
