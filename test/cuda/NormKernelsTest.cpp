//===- NormKernelsTest.cpp - norm.cu against runtime/cpu ------------------===//
//
// Part of mtc. RMSNorm and LayerNorm, forward (f32, bf16) and backward (dx,
// and dw/db accumulated through per-chunk partials and mtc_sum_partials_f32),
// on either driver, compared with runtime/cpu's rmsnorm, rmsnormGrad,
// layernorm and layernormGrad on the same inputs, at ragged widths (below,
// at and above the block; not multiples of the warp) up to D = 16384.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/ops/Reduce.h"
#include "test/cuda/KernelCompare.h"

using namespace mtc;
using namespace mtc::cuda::test;

namespace {

class NormKernels : public CudaDriverTest {
public:
  // For the case helpers below.
  using CudaDriverTest::alloc;
  using CudaDriverTest::download;
  using CudaDriverTest::kernel;
  using CudaDriverTest::launch;
  using CudaDriverTest::upload;

  /// Sums partials [chunks, D] into acc (accumulating) through the launcher
  /// the runtime finishes step 2 of the backward with.
  void finish(unsigned long long partial, unsigned long long acc, int chunks,
              int D) {
    Status s = cuda::ops::sumPartials(makeLaunch(), partial, acc, chunks, D,
                                      /*accumulate=*/true);
    ASSERT_TRUE(s.ok()) << s.message();
    sync();
  }
};

struct Shape {
  int rows, D, block;
};

TEST_P(NormKernels, RmsNormF32) {
  void *fn = kernel("norm.cu", "mtc_rmsnorm_f32");
  for (Shape s : {Shape{3, 1, 32}, Shape{5, 7, 64}, Shape{4, 100, 32},
                  Shape{3, 1029, 256}, Shape{2, 16384, 1024}}) {
    for (float offset : {0.0f, 1.0f}) {
      std::string what = "rmsnorm_f32 D=" + std::to_string(s.D) +
                         " offset=" + std::to_string(int(offset));
      std::vector<float> x = randomFloats(size_t(s.rows) * s.D, 1),
                         w = randomFloats(s.D, 2);
      unsigned long long dx = upload(x), dw = upload(w),
                         dy = alloc(x.size() * 4);
      float eps = 1e-5f;
      launch(fn, {unsigned(s.rows)}, {unsigned(s.block)}, 0,
             {&dx, &dw, &dy, &s.rows, &s.D, &eps, &offset});
      std::vector<float> ref(x.size());
      cpu::rmsnorm(x.data(), w.data(), ref.data(), s.rows, s.D, eps, offset);
      EXPECT_LE(maxRelError(download<float>(dy, x.size()), ref, 0, what), 1e-5);
    }
  }
}

TEST_P(NormKernels, RmsNormBf16) {
  void *fn = kernel("norm.cu", "mtc_rmsnorm_bf16");
  for (Shape s : {Shape{4, 264, 128}, Shape{3, 1029, 256}}) {
    std::vector<uint16_t> x = toBf16(randomFloats(size_t(s.rows) * s.D, 3)),
                          w = toBf16(randomFloats(s.D, 4, 0, 2));
    unsigned long long dx = upload(x), dw = upload(w), dy = alloc(x.size() * 2);
    float eps = 1e-6f, offset = 1.0f;
    launch(fn, {unsigned(s.rows)}, {unsigned(s.block)}, 0,
           {&dx, &dw, &dy, &s.rows, &s.D, &eps, &offset});
    std::vector<float> ref(x.size());
    cpu::rmsnorm(fromBf16(x).data(), fromBf16(w).data(), ref.data(), s.rows,
                 s.D, eps, offset);
    EXPECT_LE(maxBf16Ulps(download<uint16_t>(dy, x.size()), ref,
                          "rmsnorm_bf16 D=" + std::to_string(s.D)),
              2);
  }
}

/// rmsnormGrad through its three launches, T = float or uint16_t (bf16).
template <typename T>
void rmsnormGradCase(NormKernels &t, const std::string &suffix, int rows, int D,
                     int block, int chunks) {
  const bool bf16 = sizeof(T) == 2;
  std::string what = "rmsnorm_grad_" + suffix + " D=" + std::to_string(D) +
                     " rows=" + std::to_string(rows) +
                     " chunks=" + std::to_string(chunks);
  std::vector<float> x = randomFloats(size_t(rows) * D, 5),
                     w = randomFloats(D, 6), g = randomFloats(x.size(), 7),
                     acc0 = randomFloats(D, 8);
  if (bf16) {
    x = roundBf16(x);
    w = roundBf16(w);
    g = roundBf16(g);
  }
  auto up = [&](const std::vector<float> &v) {
    if constexpr (sizeof(T) == 2)
      return t.upload(toBf16(v));
    else
      return t.upload(v);
  };
  unsigned long long dX = up(x), dW = up(w), dG = up(g),
                     dDx = t.alloc(x.size() * 4), dRstd = t.alloc(rows * 4),
                     dPart = t.alloc(size_t(chunks) * D * 4),
                     dAcc = t.upload(acc0);
  float eps = 1e-5f, offset = 1.0f;
  t.launch(t.kernel("norm.cu", "mtc_rmsnorm_grad_" + suffix), {unsigned(rows)},
           {unsigned(block)}, 0,
           {&dX, &dW, &dG, &dDx, &dRstd, &rows, &D, &eps, &offset});
  t.launch(t.kernel("norm.cu", "mtc_rmsnorm_grad_w_" + suffix),
           {unsigned((D + 63) / 64), unsigned(chunks)}, {64}, 0,
           {&dX, &dG, &dRstd, &dPart, &rows, &D, &chunks});
  t.finish(dPart, dAcc, chunks, D);

  std::vector<float> dx(x.size()), acc = acc0;
  cpu::rmsnormGrad(x.data(), w.data(), g.data(), dx.data(), acc.data(), rows, D,
                   eps, offset);
  EXPECT_LE(
      maxRelError(t.download<float>(dDx, x.size()), dx, 1e-2, what + " dx"),
      1e-5);
  EXPECT_LE(maxRelError(t.download<float>(dAcc, D), acc, 1e-2, what + " dw"),
            1e-4);
}

TEST_P(NormKernels, RmsNormGradF32) {
  rmsnormGradCase<float>(*this, "f32", 37, 7, 32, 5);
  rmsnormGradCase<float>(*this, "f32", 19, 300, 128, 19);
  rmsnormGradCase<float>(*this, "f32", 9, 1029, 256, 1);
  rmsnormGradCase<float>(*this, "f32", 2, 16384, 1024, 2);
}

TEST_P(NormKernels, RmsNormGradBf16Inputs) {
  rmsnormGradCase<uint16_t>(*this, "bf16", 11, 520, 128, 4);
}

TEST_P(NormKernels, LayerNormF32AndBf16) {
  void *f32 = kernel("norm.cu", "mtc_layernorm_f32");
  void *bf16 = kernel("norm.cu", "mtc_layernorm_bf16");
  for (Shape s : {Shape{3, 1, 32}, Shape{5, 7, 64}, Shape{4, 300, 128},
                  Shape{3, 1029, 256}, Shape{2, 16384, 1024}}) {
    for (bool bias : {true, false}) {
      std::string what =
          "D=" + std::to_string(s.D) + (bias ? " with b" : " without b");
      // A mean of 1 makes the centring matter. (A larger one, [1, 4], shows
      // runtime/cpu's own rounding: its mean comes from float lane sums,
      // ~1 ulp of the mean off, and y = (x - mean) ... inherits that.)
      std::vector<float> x = randomFloats(size_t(s.rows) * s.D, 9, -1, 3),
                         w = randomFloats(s.D, 10), b = randomFloats(s.D, 11);
      float eps = 1e-5f;
      unsigned long long none = 0;
      {
        unsigned long long dx = upload(x), dw = upload(w), db = upload(b),
                           dy = alloc(x.size() * 4);
        launch(f32, {unsigned(s.rows)}, {unsigned(s.block)}, 0,
               {&dx, &dw, bias ? &db : &none, &dy, &s.rows, &s.D, &eps});
        std::vector<float> ref(x.size());
        cpu::layernorm(x.data(), w.data(), bias ? b.data() : nullptr,
                       ref.data(), s.rows, s.D, eps);
        // Floor 1% of max|y|: x - mean and + b cancel near zero, where the
        // CPU's double mean and the GPU's float one differ in the last bit.
        EXPECT_LE(maxRelError(download<float>(dy, x.size()), ref, 1e-2,
                              "layernorm_f32 " + what),
                  1e-5);
      }
      if (s.D == 1 || s.D == 16384)
        continue; // bf16: the mid-size rows suffice
      std::vector<uint16_t> xb = toBf16(x), wb = toBf16(w), bb = toBf16(b);
      unsigned long long dx = upload(xb), dw = upload(wb), db = upload(bb),
                         dy = alloc(x.size() * 2);
      launch(bf16, {unsigned(s.rows)}, {unsigned(s.block)}, 0,
             {&dx, &dw, bias ? &db : &none, &dy, &s.rows, &s.D, &eps});
      std::vector<float> ref(x.size());
      cpu::layernorm(fromBf16(xb).data(), fromBf16(wb).data(),
                     bias ? fromBf16(bb).data() : nullptr, ref.data(), s.rows,
                     s.D, eps);
      EXPECT_LE(maxBf16Ulps(download<uint16_t>(dy, x.size()), ref,
                            "layernorm_bf16 " + what),
                2);
    }
  }
}

/// Rows with a mean far from 0 (1000 +- 1), against a double-precision
/// reference: the statistics must not lose the deviations to the mean's
/// rounding. Bound, relative to max|y| (floor 1): the mean itself is a
/// float, 0.5 ulp of 1000 = 3e-5 off, times rstd (1.7) and |w| (<= 2): 1e-4
/// of a max|y| of ~5.5, i.e. 2e-5. Without the mean's correction (an fp32
/// sum of the row alone) the error is several times that.
TEST_P(NormKernels, LayerNormLargeMeanAgainstDouble) {
  void *fn = kernel("norm.cu", "mtc_layernorm_f32");
  int rows = 3, D = 4099;
  std::vector<float> x = randomFloats(size_t(rows) * D, 21, 999, 1001),
                     w = randomFloats(D, 22), b = randomFloats(D, 23);
  float eps = 1e-5f;
  unsigned long long dx = upload(x), dw = upload(w), db = upload(b),
                     dy = alloc(x.size() * 4);
  launch(fn, {unsigned(rows)}, {256}, 0, {&dx, &dw, &db, &dy, &rows, &D, &eps});
  std::vector<float> ref(x.size()), cpuY(x.size());
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < D; ++j)
      mean += x[size_t(r) * D + j];
    mean /= D;
    for (int j = 0; j < D; ++j)
      var += (x[size_t(r) * D + j] - mean) * (x[size_t(r) * D + j] - mean);
    double rstd = 1.0 / std::sqrt(var / D + eps);
    for (int j = 0; j < D; ++j)
      ref[size_t(r) * D + j] =
          float((x[size_t(r) * D + j] - mean) * rstd * w[j] + b[j]);
  }
  cpu::layernorm(x.data(), w.data(), b.data(), cpuY.data(), rows, D, eps);
  maxRelError(cpuY, ref, 1, "(runtime/cpu layernorm, mean 1000)");
  EXPECT_LE(maxRelError(download<float>(dy, x.size()), ref, 1,
                        "layernorm_f32 mean 1000 vs double"),
            3e-5);
}

/// layernormGrad through its launches; \p withB: db wanted.
template <typename T>
void layernormGradCase(NormKernels &t, const std::string &suffix, int rows,
                       int D, int block, int chunks, bool withB) {
  const bool bf16 = sizeof(T) == 2;
  std::string what = "layernorm_grad_" + suffix + " D=" + std::to_string(D) +
                     " rows=" + std::to_string(rows) +
                     " chunks=" + std::to_string(chunks);
  std::vector<float> x = randomFloats(size_t(rows) * D, 12, -1, 3),
                     w = randomFloats(D, 13), g = randomFloats(x.size(), 14),
                     accW = randomFloats(D, 15), accB = randomFloats(D, 16);
  if (bf16) {
    x = roundBf16(x);
    w = roundBf16(w);
    g = roundBf16(g);
  }
  auto up = [&](const std::vector<float> &v) {
    if constexpr (sizeof(T) == 2)
      return t.upload(toBf16(v));
    else
      return t.upload(v);
  };
  unsigned long long dX = up(x), dW = up(w), dG = up(g),
                     dDx = t.alloc(x.size() * 4),
                     dStats = t.alloc(size_t(rows) * 8),
                     dPw = t.alloc(size_t(chunks) * D * 4),
                     dPb = withB ? t.alloc(size_t(chunks) * D * 4) : 0,
                     dAccW = t.upload(accW), dAccB = t.upload(accB);
  float eps = 1e-5f;
  t.launch(t.kernel("norm.cu", "mtc_layernorm_grad_" + suffix),
           {unsigned(rows)}, {unsigned(block)}, 0,
           {&dX, &dW, &dG, &dDx, &dStats, &rows, &D, &eps});
  t.launch(t.kernel("norm.cu", "mtc_layernorm_grad_wb_" + suffix),
           {unsigned((D + 95) / 96), unsigned(chunks)}, {96}, 0,
           {&dX, &dG, &dStats, &dPw, &dPb, &rows, &D, &chunks});
  t.finish(dPw, dAccW, chunks, D);
  if (withB)
    t.finish(dPb, dAccB, chunks, D);

  std::vector<float> dx(x.size()), rw = accW, rb = accB;
  cpu::layernormGrad(x.data(), w.data(), g.data(), dx.data(), rw.data(),
                     withB ? rb.data() : nullptr, rows, D, eps);
  EXPECT_LE(
      maxRelError(t.download<float>(dDx, x.size()), dx, 1e-2, what + " dx"),
      1e-5);
  EXPECT_LE(maxRelError(t.download<float>(dAccW, D), rw, 1e-2, what + " dw"),
            1e-4);
  // Without db, dbAcc stays exactly as it was.
  EXPECT_LE(maxRelError(t.download<float>(dAccB, D), rb, 1e-2, what + " db"),
            withB ? 1e-4 : 0);
}

TEST_P(NormKernels, LayerNormGradF32) {
  layernormGradCase<float>(*this, "f32", 37, 7, 32, 5, true);
  layernormGradCase<float>(*this, "f32", 19, 300, 128, 19, false);
  layernormGradCase<float>(*this, "f32", 9, 1029, 256, 3, true);
  layernormGradCase<float>(*this, "f32", 2, 16384, 1024, 1, true);
}

TEST_P(NormKernels, LayerNormGradBf16Inputs) {
  layernormGradCase<uint16_t>(*this, "bf16", 11, 520, 128, 4, true);
}

/// The parameter gradient does not depend on the column block size of the
/// partial launch, only on (rows, chunks): two geometries, bit-identical dw.
/// (The row launch's block size does change rstd in the last bits: its block
/// reduction has one partial per warp.)
TEST_P(NormKernels, RmsNormGradWeightIsBitIdenticalAcrossBlockSizes) {
  int rows = 23, D = 333, chunks = 6;
  std::vector<float> x = randomFloats(size_t(rows) * D, 17),
                     w = randomFloats(D, 18), g = randomFloats(x.size(), 19);
  unsigned long long dX = upload(x), dW = upload(w), dG = upload(g),
                     dDx = alloc(x.size() * 4), dRstd = alloc(rows * 4),
                     dPart = alloc(size_t(chunks) * D * 4);
  float eps = 1e-5f, offset = 0.0f;
  std::vector<float> results[2];
  for (int i = 0; i < 2; ++i) {
    unsigned rowBlock = 128, colBlock = i ? 32 : 128;
    unsigned long long dAcc = upload(std::vector<float>(D, 0.5f));
    launch(kernel("norm.cu", "mtc_rmsnorm_grad_f32"), {unsigned(rows)},
           {rowBlock}, 0,
           {&dX, &dW, &dG, &dDx, &dRstd, &rows, &D, &eps, &offset});
    launch(kernel("norm.cu", "mtc_rmsnorm_grad_w_f32"),
           {(unsigned(D) + colBlock - 1) / colBlock, unsigned(chunks)},
           {colBlock}, 0, {&dX, &dG, &dRstd, &dPart, &rows, &D, &chunks});
    finish(dPart, dAcc, chunks, D);
    results[i] = download<float>(dAcc, D);
  }
  for (int j = 0; j < D; ++j)
    ASSERT_EQ(results[0][j], results[1][j]) << j;
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(NormKernels);
