//===- CudaTestDriver.h - Kernel tests over either CUDA driver --*- C++ -*-===//
//
// Part of mtc. The fixture of the driver-level CUDA tests (test/cuda): each
// test runs once over the emulated driver (`cuda_emu`: the kernels' emulator
// build, on the CPU) and once over the real one (`cuda`: NVRTC-compiled
// cubins on a GPU; skipped, with the loader's reason, where there is none).
// The same test body, the same tolerances: what passes here on the CPU is
// what scripts/gpu-check.sh runs again on a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TEST_CUDA_CUDATESTDRIVER_H
#define MTC_TEST_CUDA_CUDATESTDRIVER_H

#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/KernelLoader.h"
#include "runtime/cuda/ops/Launch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace mtc::cuda::test {

struct DriverParam {
  const char *name; ///< "cuda_emu", "cuda"
  bool emulated;
};

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

class CudaDriverTest : public ::testing::TestWithParam<DriverParam> {
protected:
  void SetUp() override;
  void TearDown() override;

  const CudaDriverApi &drv() const { return *api; }
  bool emulated() const { return GetParam().emulated; }

  /// Device memory of \p bytes, freed after the test.
  unsigned long long alloc(size_t bytes);
  template <typename T> unsigned long long upload(const std::vector<T> &v) {
    unsigned long long p = alloc(v.size() * sizeof(T));
    copyIn(p, v.data(), v.size() * sizeof(T));
    return p;
  }
  template <typename T>
  std::vector<T> download(unsigned long long p, size_t n) {
    std::vector<T> v(n);
    copyOut(v.data(), p, n * sizeof(T));
    return v;
  }
  void copyIn(unsigned long long dst, const void *src, size_t bytes);
  void copyOut(void *dst, unsigned long long src, size_t bytes);

  /// Entry \p entry of kernel file \p file: a library kernel
  /// (runtime/cuda/kernels) or, with \p sourcePath (relative to the source
  /// tree), a test kernel read from disk for NVRTC.
  void *kernel(const std::string &file, const std::string &entry,
               const std::string &sourcePath = "");
  /// Launches \p fn on the test's stream and waits for it; the kernel's
  /// failure (an emulator report, a GPU fault) fails the test.
  void launch(void *fn, Dim3 grid, Dim3 block, unsigned sharedBytes,
              std::vector<void *> args);
  void sync();

  /// A Launch (runtime/cuda/ops) on the test's stream: library kernels
  /// through the test's loader, the driver's GEMM engine (the emulated one,
  /// or cuBLASLt) with a workspace, scratch from alloc() (freed after the
  /// test).
  ops::Launch makeLaunch();

  std::shared_ptr<const CudaDriverApi> api;
  std::unique_ptr<KernelLoader> loader;
  void *context = nullptr;
  void *stream = nullptr;
  int device = 0;

private:
  std::vector<unsigned long long> allocations;
  std::unique_ptr<ops::KernelFunctions> functions; ///< of makeLaunch()
  std::unique_ptr<GemmEngine> gemmEngine;          ///< of makeLaunch()
};

/// The source tree: $MTC_SOURCE_DIR, else the build's.
std::string sourceDir();

/// Reads \p path whole ("" when it cannot).
std::string readFile(const std::string &path);

struct DriverParamName {
  std::string
  operator()(const ::testing::TestParamInfo<DriverParam> &info) const {
    return info.param.name;
  }
};

#define MTC_INSTANTIATE_CUDA_DRIVERS(suite)                                    \
  INSTANTIATE_TEST_SUITE_P(                                                    \
      Drivers, suite,                                                          \
      ::testing::Values(::mtc::cuda::test::DriverParam{"cuda_emu", true},      \
                        ::mtc::cuda::test::DriverParam{"cuda", false}),        \
      ::mtc::cuda::test::DriverParamName())

/// \p n values uniform in [lo, hi) from a generator seeded with \p seed.
std::vector<float> randoms(size_t n, uint32_t seed, float lo = -2,
                           float hi = 2);

/// bf16 helpers for building inputs and reading outputs.
uint16_t toBf16(float x);
float fromBf16(uint16_t h);
/// ULP distance of two bf16 values (sign-magnitude order).
int bf16Ulps(uint16_t a, uint16_t b);

} // namespace mtc::cuda::test

#endif // MTC_TEST_CUDA_CUDATESTDRIVER_H
