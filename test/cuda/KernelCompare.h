//===- KernelCompare.h - Comparing CUDA kernels with runtime/cpu -*- C++
//-*-===//
//
// Part of mtc. What the library-kernel tests (Norm-, Reduce-,
// ElementwiseKernelsTest.cpp) share: random inputs, bf16 vectors, and the
// error measures the tolerances are stated in (docs/cuda-kernels.md):
//
//   f32 outputs   relative error |got - ref| / max(|ref|, floor * max|ref|),
//                 the floor (a fraction of the tensor's largest magnitude)
//                 keeping outputs that cancel to about zero (dx = a - b) from
//                 dominating (with floor 0, an exact 0 must come out as 0
//                 or below FLT_MIN); the worst value is printed so the docs can
//                 quote it.
//   bf16 outputs  ULP distance to the f32 reference rounded to bf16 (the
//                 reference computed by runtime/cpu on the bf16 inputs
//                 widened to float).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TEST_CUDA_KERNELCOMPARE_H
#define MTC_TEST_CUDA_KERNELCOMPARE_H

#include "test/cuda/CudaTestDriver.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace mtc::cuda::test {

inline std::vector<float> randomFloats(size_t n, uint32_t seed, float lo = -2,
                                       float hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

inline std::vector<uint16_t> toBf16(const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = toBf16(v[i]);
  return out;
}
inline std::vector<float> fromBf16(const std::vector<uint16_t> &v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = fromBf16(v[i]);
  return out;
}
/// v rounded to bf16 and back: the values a bf16 tensor actually holds.
inline std::vector<float> roundBf16(const std::vector<float> &v) {
  return fromBf16(toBf16(v));
}

/// The worst relative error of \p got against \p ref (see the banner);
/// NaN must match NaN and infinities must match exactly. \p what names the
/// comparison in failures and in the printed measurement.
inline double maxRelError(const std::vector<float> &got,
                          const std::vector<float> &ref, double floor,
                          const std::string &what) {
  EXPECT_EQ(got.size(), ref.size()) << what;
  double scale = 0;
  for (float r : ref)
    if (std::isfinite(r))
      scale = std::max(scale, double(std::fabs(r)));
  double worst = 0;
  size_t bad = 0;
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    if (std::isnan(ref[i]) || std::isinf(ref[i])) {
      bool same = std::isnan(ref[i]) ? std::isnan(got[i]) : got[i] == ref[i];
      if (!same && bad++ < 5)
        ADD_FAILURE() << what << ": element " << i << " is " << got[i]
                      << ", runtime/cpu gives " << ref[i];
      continue;
    }
    double err = std::fabs(double(got[i]) - ref[i]) /
                 std::max({double(std::fabs(ref[i])), floor * scale,
                           double(std::numeric_limits<float>::min())});
    if (!(err <= worst)) { // NaN counts as the worst
      worst = std::isnan(err) ? INFINITY : err;
      if (getenv("MTC_DEBUG_CMP"))
        printf("    at %zu got %.9g ref %.9g\n", i, got[i], ref[i]);
    }
  }
  std::printf("  [measured] %-48s max rel. error %.3g\n", what.c_str(), worst);
  return worst;
}

/// The worst ULP distance of bf16 \p got from \p ref rounded to bf16 (NaN
/// must match NaN). With \p floor > 0, outputs below floor * max|ref| are
/// measured in ulps of that magnitude instead of their own: where a formula
/// cancels to about 0 (GeluErf's 1 + erf at large negative x) the CPU's and
/// the GPU's float results differ by an ulp of the terms, not of the result.
inline int maxBf16Ulps(const std::vector<uint16_t> &got,
                       const std::vector<float> &ref, const std::string &what,
                       double floor = 0) {
  EXPECT_EQ(got.size(), ref.size()) << what;
  double scale = 0;
  for (float r : ref)
    if (std::isfinite(r))
      scale = std::max(scale, double(std::fabs(r)));
  const double small = floor * scale;
  int exponent = 0;
  std::frexp(small, &exponent);
  const double smallUlp = std::ldexp(1.0, exponent - 8); // bf16: 8 bits
  int worst = 0;
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    if (std::isnan(ref[i])) {
      EXPECT_TRUE(std::isnan(fromBf16(got[i]))) << what << " at " << i;
      continue;
    }
    int ulps = bf16Ulps(got[i], toBf16(ref[i]));
    if (small > 0 && std::fabs(ref[i]) < small)
      ulps = static_cast<int>(
          std::ceil(std::fabs(double(fromBf16(got[i])) - ref[i]) / smallUlp));
    worst = std::max(worst, ulps);
  }
  std::printf("  [measured] %-48s max %d bf16 ulp\n", what.c_str(), worst);
  return worst;
}

} // namespace mtc::cuda::test

#endif // MTC_TEST_CUDA_KERNELCOMPARE_H
