//===- DemoKernelsTest.cpp - The demonstration kernels on either driver ---===//
//
// Part of mtc. add_rmsnorm.cu, softmax.cu and sgemm.cu (test/cuda-emu/
// kernels) through the driver API: loaded by KernelLoader (the emulator's
// build on cuda_emu, NVRTC's cubin on cuda), launched with cuLaunchKernel,
// compared with a double-precision reference at ragged shapes. On a GPU this
// is the check that the emulator and the hardware agree on the same text.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/CudaTestDriver.h"

#include <cmath>
#include <random>

using namespace mtc::cuda::test;

namespace {

class DemoKernels : public CudaDriverTest {};

std::vector<float> randoms(size_t n, uint32_t seed, float lo = -2,
                           float hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

TEST_P(DemoKernels, AddRmsNormF32) {
  void *fn = kernel("add_rmsnorm.cu", "add_rmsnorm_f32",
                    "test/cuda-emu/kernels/add_rmsnorm.cu");
  for (int D : {1, 7, 100, 1029}) {
    SCOPED_TRACE("D=" + std::to_string(D));
    int rows = 5, ld = D + (D % 4 == 0 ? 0 : 3);
    std::vector<float> x = randoms(rows * ld, 1), r = randoms(rows * ld, 2),
                       w = randoms(D, 3);
    unsigned long long dx = upload(x), dr = upload(r), dw = upload(w),
                       dy = upload(std::vector<float>(rows * ld, 0));
    float eps = 1e-5f;
    launch(fn, {unsigned(rows)}, {128}, D * 4,
           {&dx, &dr, &dw, &dy, &rows, &D, &ld, &eps});
    std::vector<float> y = download<float>(dy, rows * ld),
                       res = download<float>(dr, rows * ld);
    for (int i = 0; i < rows; ++i) {
      double ss = 0;
      for (int j = 0; j < D; ++j) {
        float h = x[i * ld + j] + r[i * ld + j];
        ASSERT_EQ(res[i * ld + j], h);
        ss += double(h) * h;
      }
      double inv = 1.0 / std::sqrt(ss / D + eps);
      for (int j = 0; j < D; ++j) {
        double ref = double(x[i * ld + j] + r[i * ld + j]) * inv * w[j];
        ASSERT_NEAR(y[i * ld + j], ref, 1e-5 * (std::abs(ref) + 1e-3))
            << i << "," << j;
      }
    }
  }
}

TEST_P(DemoKernels, AddRmsNormBf16WithinOneUlp) {
  void *fn = kernel("add_rmsnorm.cu", "add_rmsnorm_bf16",
                    "test/cuda-emu/kernels/add_rmsnorm.cu");
  int rows = 3, D = 264, ld = 272;
  std::vector<uint16_t> x(rows * ld), r(rows * ld), w(D);
  std::vector<float> fx = randoms(x.size(), 4), fr = randoms(r.size(), 5),
                     fw = randoms(D, 6);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = toBf16(fx[i]);
    r[i] = toBf16(fr[i]);
  }
  for (int j = 0; j < D; ++j)
    w[j] = toBf16(fw[j]);
  unsigned long long dx = upload(x), dr = upload(r), dw = upload(w),
                     dy = upload(std::vector<uint16_t>(rows * ld, 0));
  float eps = 1e-6f;
  launch(fn, {unsigned(rows)}, {256}, D * 4,
         {&dx, &dr, &dw, &dy, &rows, &D, &ld, &eps});
  std::vector<uint16_t> y = download<uint16_t>(dy, rows * ld);
  for (int i = 0; i < rows; ++i) {
    std::vector<double> h(D);
    double ss = 0;
    for (int j = 0; j < D; ++j) {
      h[j] = fromBf16(
          toBf16(fromBf16(x[i * ld + j]) + fromBf16(r[i * ld + j])));
      ss += h[j] * h[j];
    }
    double inv = 1.0 / std::sqrt(ss / D + eps);
    for (int j = 0; j < D; ++j) {
      uint16_t ref = toBf16(float(h[j] * inv * fromBf16(w[j])));
      ASSERT_LE(bf16Ulps(y[i * ld + j], ref), 1) << i << "," << j;
    }
  }
}

TEST_P(DemoKernels, SoftmaxF32) {
  void *fn = kernel("softmax.cu", "softmax_f32",
                    "test/cuda-emu/kernels/softmax.cu");
  for (int n : {1, 33, 1000}) {
    int rows = 4;
    std::vector<float> x = randoms(rows * n, 7, -8, 8);
    unsigned long long dx = upload(x),
                       dy = upload(std::vector<float>(rows * n, 0));
    launch(fn, {unsigned(rows)}, {64}, 0, {&dx, &dy, &rows, &n});
    std::vector<float> y = download<float>(dy, rows * n);
    for (int i = 0; i < rows; ++i) {
      double m = -INFINITY, s = 0;
      for (int j = 0; j < n; ++j)
        m = std::max(m, double(x[i * n + j]));
      for (int j = 0; j < n; ++j)
        s += std::exp(x[i * n + j] - m);
      for (int j = 0; j < n; ++j) {
        double ref = std::exp(x[i * n + j] - m) / s;
        ASSERT_NEAR(y[i * n + j], ref, 2e-6 * ref + 1e-12);
      }
    }
  }
}

TEST_P(DemoKernels, SgemmF32) {
  void *fn =
      kernel("sgemm.cu", "sgemm_f32", "test/cuda-emu/kernels/sgemm.cu");
  int M = 70, N = 65, K = 33;
  std::vector<float> a = randoms(M * K, 8), b = randoms(K * N, 9),
                     c0 = randoms(M * N, 10);
  unsigned long long da = upload(a), db = upload(b), dc = upload(c0);
  float alpha = 0.5f, beta = -1.0f;
  launch(fn, {unsigned((N + 63) / 64), unsigned((M + 63) / 64)}, {256}, 0,
         {&M, &N, &K, &alpha, &da, &db, &beta, &dc});
  std::vector<float> c = download<float>(dc, M * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int q = 0; q < K; ++q) {
        ref += double(a[i * K + q]) * b[q * N + j];
        mag += std::abs(double(a[i * K + q]) * b[q * N + j]);
      }
      ref = alpha * ref + beta * c0[i * N + j];
      ASSERT_NEAR(c[i * N + j], ref, 1e-6 * (mag + std::abs(c0[i * N + j])))
          << i << "," << j;
    }
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(DemoKernels);
