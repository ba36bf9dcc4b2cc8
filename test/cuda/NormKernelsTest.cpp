//===- NormKernelsTest.cpp - norm.cu against runtime/cpu ------------------===//
//
// Part of mtc. RMSNorm forward (f32 and bf16 storage) and backward (dx, and
// the weight gradient through per-chunk partials summed in order) of the
// library kernels, on either driver, against cpu::rmsnorm / rmsnormGrad at
// ragged sizes: fp32 within 1e-5 relative (dx and dw, which carry
// reductions, 1e-4), bf16
// within 2 ulp of the reference rounded to bf16.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/CudaTestDriver.h"

#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <random>

using namespace mtc::cuda::test;

namespace {

class NormKernels : public CudaDriverTest {};

/// max |got - want| / (|want| + floor), the floor a small fraction of the
/// largest reference value (so near-zero entries are not judged alone).
double maxRelError(const std::vector<float> &got,
                   const std::vector<float> &want) {
  double scale = 0, worst = 0;
  for (float w : want)
    scale = std::max(scale, double(std::abs(w)));
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - want[i]) /
                                (std::abs(double(want[i])) + 1e-3 * scale));
  return worst;
}

TEST_P(NormKernels, RmsNormForwardF32) {
  void *fn = kernel("norm.cu", "rmsnorm_fwd_f32");
  for (int D : {1, 31, 100, 1027}) {
    SCOPED_TRACE("D=" + std::to_string(D));
    int rows = 6;
    float eps = 1e-5f, offset = D % 2 ? 1.0f : 0.0f; // gemma's offset too
    std::vector<float> x = randoms(rows * D, 1), w = randoms(D, 2),
                       want(x.size());
    mtc::cpu::rmsnorm(x.data(), w.data(), want.data(), rows, D, eps, offset);
    unsigned long long dx = upload(x), dw = upload(w), dy = alloc(x.size() * 4);
    launch(fn, {unsigned(rows)}, {128}, 0,
           {&dx, &dw, &dy, &rows, &D, &eps, &offset});
    double err = maxRelError(download<float>(dy, x.size()), want);
    EXPECT_LE(err, 1e-5);
  }
}

TEST_P(NormKernels, RmsNormForwardBf16WithinTwoUlp) {
  void *fn = kernel("norm.cu", "rmsnorm_fwd_bf16");
  int rows = 5, D = 333;
  float eps = 1e-6f, offset = 0.0f;
  std::vector<float> x = randoms(rows * D, 3), w = randoms(D, 4);
  std::vector<uint16_t> xb(x.size()), wb(D);
  for (size_t i = 0; i < x.size(); ++i) {
    xb[i] = toBf16(x[i]);
    x[i] = fromBf16(xb[i]);
  }
  for (int i = 0; i < D; ++i) {
    wb[i] = toBf16(w[i]);
    w[i] = fromBf16(wb[i]);
  }
  std::vector<float> want(x.size());
  mtc::cpu::rmsnorm(x.data(), w.data(), want.data(), rows, D, eps, offset);
  unsigned long long dx = upload(xb), dw = upload(wb), dy = alloc(x.size() * 2);
  launch(fn, {unsigned(rows)}, {64}, 0,
         {&dx, &dw, &dy, &rows, &D, &eps, &offset});
  std::vector<uint16_t> got = download<uint16_t>(dy, x.size());
  int worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, bf16Ulps(got[i], toBf16(want[i])));
  EXPECT_LE(worst, 2);
}

TEST_P(NormKernels, RmsNormBackward) {
  void *dxFn = kernel("norm.cu", "rmsnorm_bwd_dx_f32");
  void *partFn = kernel("norm.cu", "rmsnorm_bwd_dw_partial_f32");
  void *sumFn = kernel("norm.cu", "mtc_sum_partials_f32");
  for (int D : {5, 96, 515}) {
    SCOPED_TRACE("D=" + std::to_string(D));
    int rows = 37, chunks = 4;
    float eps = 1e-5f, offset = D == 96 ? 1.0f : 0.0f;
    std::vector<float> x = randoms(rows * D, 5), w = randoms(D, 6),
                       gy = randoms(rows * D, 7), dwInit = randoms(D, 8);
    std::vector<float> wantDx(x.size()), wantDw = dwInit;
    mtc::cpu::rmsnormGrad(x.data(), w.data(), gy.data(), wantDx.data(),
                          wantDw.data(), rows, D, eps, offset);
    unsigned long long dX = upload(x), dW = upload(w), dGy = upload(gy),
                       dDx = alloc(x.size() * 4), dInv = alloc(rows * 4),
                       dPart = alloc(size_t(chunks) * D * 4),
                       dDw = upload(dwInit);
    launch(dxFn, {unsigned(rows)}, {96}, 0,
           {&dX, &dW, &dGy, &dDx, &dInv, &rows, &D, &eps, &offset});
    unsigned block = 64, cols = (D + block - 1) / block;
    launch(partFn, {cols, unsigned(chunks)}, {block}, 0,
           {&dX, &dGy, &dInv, &dPart, &rows, &D, &chunks});
    launch(sumFn, {cols}, {block}, 0, {&dPart, &dDw, &chunks, &D});
    // dx = r g dy - x k subtracts a term carrying the row's dot product
    // (a reduction, fp32 here and double in the reference): 1e-4, like the
    // other reductions; measured up to 2.0e-5 on cuda_emu.
    EXPECT_LE(maxRelError(download<float>(dDx, x.size()), wantDx), 1e-4);
    EXPECT_LE(maxRelError(download<float>(dDw, D), wantDw), 1e-4);
  }
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(NormKernels);
