//===- EmulatedDriverTest.cpp - The CUDA driver API on the CPU ------------===//
//
// Part of mtc. The emulated driver (runtime/cuda/emu/EmulatedDriver.h) fills
// every entry of the driver table and behaves as the driver does: memory
// against a capacity, streams in order, events ordering streams, arguments
// copied at launch, a registered kernel found by name and launched from
// CUDA's argument array, a failing kernel failing its stream with the
// emulator's message.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/emu/EmulatedDriver.h"
#include "cuda_emu.h"
#include "runtime/cuda/emu/KernelRegistry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

using namespace mtc;
using mtc::cuda::CudaDriverApi;

namespace {

// A kernel of this file, registered as the module "driver-test" (what the
// build does for .cu files).
__global__ void trapsInBlockOne(int *out) {
  if (blockIdx.x == 1 && threadIdx.x == 2)
    __trap();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}
__global__ void addScalar(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    x[i] += a;
}
const emu::KernelRegistration kTrap("driver-test", "trapsInBlockOne",
                                    &trapsInBlockOne);
const emu::KernelRegistration kAdd("driver-test", "addScalar", &addScalar);

const CudaDriverApi &driver() {
  static std::shared_ptr<const CudaDriverApi> api = [] {
    Expected<std::shared_ptr<const CudaDriverApi>> d =
        emu::emulatedCudaDriver();
    EXPECT_TRUE(d.ok()) << d.message();
    return *d;
  }();
  return *api;
}

void *loadModule(const char *name) {
  emu::EmulatedModuleImage image;
  image.module = name;
  void *m = nullptr;
  EXPECT_EQ(driver().cuModuleLoadData(&m, &image), 0) << name;
  return m;
}

} // namespace

TEST(EmulatedDriver, FillsEveryEntryOfTheTable) {
  const CudaDriverApi &d = driver();
#define MTC_CUDA_SYMBOL(name, params) EXPECT_NE(d.name, nullptr) << #name;
#include "runtime/cuda/CudaDriverSymbols.def"
  EXPECT_EQ(d.cuInit(0), 0);
  int count = 0, major = 0;
  EXPECT_EQ(d.cuDeviceGetCount(&count), 0);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(
      d.cuDeviceGetAttribute(&major, cuda::kCuDevAttrComputeCapabilityMajor, 0),
      0);
  EXPECT_EQ(major, 9);
  EXPECT_EQ(cuda::cudaErrorText(d, 2),
            "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
}

TEST(EmulatedDriver, MemoryAgainstTheCapacity) {
  const CudaDriverApi &d = driver();
  size_t total = 0, free0 = 0, free1 = 0;
  ASSERT_EQ(d.cuMemGetInfo_v2(&free0, &total), 0);
  unsigned long long p = 0, q = 0;
  ASSERT_EQ(d.cuMemAlloc_v2(&p, 1000), 0);
  EXPECT_EQ(p % 256, 0u);
  ASSERT_EQ(d.cuMemGetInfo_v2(&free1, &total), 0);
  EXPECT_EQ(free0 - free1, 1000u);
  EXPECT_EQ(d.cuMemAlloc_v2(&q, total), 2); // more than is free
  EXPECT_EQ(d.cuMemFree_v2(p), 0);
  EXPECT_EQ(d.cuMemFree_v2(p), 1); // twice
  // Copies outside an allocation are refused, not performed.
  std::vector<char> host(16);
  EXPECT_EQ(d.cuMemcpyHtoDAsync_v2(p, host.data(), 16, nullptr), 1);
}

TEST(EmulatedDriver, StreamsEventsAndCopies) {
  const CudaDriverApi &d = driver();
  void *a = nullptr, *b = nullptr, *e = nullptr;
  ASSERT_EQ(d.cuStreamCreate(&a, cuda::kCuStreamNonBlocking), 0);
  ASSERT_EQ(d.cuStreamCreate(&b, cuda::kCuStreamNonBlocking), 0);
  ASSERT_EQ(d.cuEventCreate(&e, 0), 0);
  unsigned long long dev = 0;
  ASSERT_EQ(d.cuMemAlloc_v2(&dev, 64 * sizeof(float)), 0);
  std::vector<float> in(64), out(64, -1.f);
  for (int i = 0; i < 64; ++i)
    in[i] = static_cast<float>(i);
  // Stream a: a slow host function, then the copy in, then the record;
  // stream b waits for the record before copying out.
  static std::atomic<int> slowDone{0};
  slowDone = 0;
  ASSERT_EQ(d.cuLaunchHostFunc(
                a,
                [](void *) {
                  std::this_thread::sleep_for(std::chrono::milliseconds(50));
                  slowDone = 1;
                },
                nullptr),
            0);
  ASSERT_EQ(d.cuMemcpyHtoDAsync_v2(dev, in.data(), 64 * sizeof(float), a), 0);
  ASSERT_EQ(d.cuEventRecord(e, a), 0);
  ASSERT_EQ(d.cuStreamWaitEvent(b, e, 0), 0);
  ASSERT_EQ(d.cuMemcpyDtoHAsync_v2(out.data(), dev, 64 * sizeof(float), b), 0);
  ASSERT_EQ(d.cuStreamSynchronize(b), 0);
  EXPECT_EQ(slowDone.load(), 1);
  EXPECT_EQ(out, in);
  EXPECT_EQ(d.cuEventQuery(e), 0);
  float ms = -1;
  void *e2 = nullptr;
  ASSERT_EQ(d.cuEventCreate(&e2, 0), 0);
  ASSERT_EQ(d.cuEventRecord(e2, b), 0);
  ASSERT_EQ(d.cuEventSynchronize(e2), 0);
  EXPECT_EQ(d.cuEventElapsedTime(&ms, e, e2), 0);
  EXPECT_GE(ms, 0.f);
  EXPECT_EQ(d.cuMemFree_v2(dev), 0);
  EXPECT_EQ(d.cuStreamDestroy_v2(a), 0);
  EXPECT_EQ(d.cuStreamDestroy_v2(b), 0);
}

TEST(EmulatedDriver, LaunchesARegisteredKernelByName) {
  const CudaDriverApi &d = driver();
  // softmax.cu: registered by the build (mtc_cuda_emu_kernels).
  void *m = loadModule("softmax.cu");
  ASSERT_NE(m, nullptr);
  void *f = nullptr;
  ASSERT_EQ(d.cuModuleGetFunction(&f, m, "softmax_f32"), 0);
  EXPECT_EQ(d.cuModuleGetFunction(&f, m, "no_such_kernel"), 500);
  ASSERT_EQ(d.cuModuleGetFunction(&f, m, "softmax_f32"), 0);
  const int rows = 3, n = 37;
  unsigned long long x = 0, y = 0;
  ASSERT_EQ(d.cuMemAlloc_v2(&x, rows * n * sizeof(float)), 0);
  ASSERT_EQ(d.cuMemAlloc_v2(&y, rows * n * sizeof(float)), 0);
  std::vector<float> in(rows * n), out(rows * n);
  for (int i = 0; i < rows * n; ++i)
    in[i] = std::sin(0.37f * static_cast<float>(i));
  void *s = nullptr;
  ASSERT_EQ(d.cuStreamCreate(&s, 0), 0);
  ASSERT_EQ(d.cuMemcpyHtoDAsync_v2(x, in.data(), in.size() * 4, s), 0);
  float *xp = reinterpret_cast<float *>(x), *yp = reinterpret_cast<float *>(y);
  int r = rows, nn = n;
  void *params[] = {&xp, &yp, &r, &nn};
  ASSERT_EQ(d.cuLaunchKernel(f, rows, 1, 1, 64, 1, 1, 0, s, params, nullptr),
            0);
  r = 0; // the launch copied the arguments when it was queued
  ASSERT_EQ(d.cuMemcpyDtoHAsync_v2(out.data(), y, out.size() * 4, s), 0);
  ASSERT_EQ(d.cuStreamSynchronize(s), 0);
  for (int row = 0; row < rows; ++row) {
    double mx = -1e30, sum = 0;
    for (int j = 0; j < n; ++j)
      mx = std::max(mx, double(in[row * n + j]));
    for (int j = 0; j < n; ++j)
      sum += std::exp(double(in[row * n + j]) - mx);
    for (int j = 0; j < n; ++j)
      EXPECT_NEAR(out[row * n + j],
                  std::exp(double(in[row * n + j]) - mx) / sum, 1e-6);
  }
  EXPECT_EQ(d.cuModuleUnload(m), 0);
  EXPECT_EQ(d.cuMemFree_v2(x), 0);
  EXPECT_EQ(d.cuMemFree_v2(y), 0);
  EXPECT_EQ(d.cuStreamDestroy_v2(s), 0);
}

TEST(EmulatedDriver, AFailedKernelFailsItsStreamWithTheEmulatorsMessage) {
  const CudaDriverApi &d = driver();
  void *m = loadModule("driver-test");
  void *trap = nullptr, *add = nullptr;
  ASSERT_EQ(d.cuModuleGetFunction(&trap, m, "trapsInBlockOne"), 0);
  ASSERT_EQ(d.cuModuleGetFunction(&add, m, "addScalar"), 0);
  unsigned long long buf = 0;
  ASSERT_EQ(d.cuMemAlloc_v2(&buf, 64 * sizeof(int)), 0);
  void *s = nullptr, *e = nullptr;
  ASSERT_EQ(d.cuStreamCreate(&s, 0), 0);
  ASSERT_EQ(d.cuEventCreate(&e, 0), 0);
  int *p = reinterpret_cast<int *>(buf);
  void *params[] = {&p};
  ASSERT_EQ(d.cuLaunchKernel(trap, 2, 1, 1, 32, 1, 1, 0, s, params, nullptr),
            0);
  // Later work is skipped; the record still completes (no waiter hangs).
  float *fp = reinterpret_cast<float *>(buf);
  float a = 1;
  int n = 1;
  void *addParams[] = {&fp, &a, &n};
  ASSERT_EQ(d.cuLaunchKernel(add, 1, 1, 1, 32, 1, 1, 0, s, addParams, nullptr),
            0);
  ASSERT_EQ(d.cuEventRecord(e, s), 0);
  EXPECT_EQ(d.cuEventSynchronize(e), 0);
  int rc = d.cuStreamSynchronize(s);
  EXPECT_EQ(rc, 719);
  std::string text = cuda::cudaErrorText(d, rc);
  EXPECT_NE(text.find("CUDA_ERROR_LAUNCH_FAILED (719)"), std::string::npos);
  EXPECT_NE(text.find("trapsInBlockOne"), std::string::npos) << text;
  EXPECT_NE(text.find("called __trap()"), std::string::npos) << text;
  // Too much dynamic shared memory for the function's limit.
  EXPECT_EQ(d.cuLaunchKernel(add, 1, 1, 1, 32, 1, 1, 64 * 1024, nullptr,
                             addParams, nullptr),
            701);
  EXPECT_EQ(d.cuFuncSetAttribute(
                add, cuda::kCuFuncAttrMaxDynamicSharedSizeBytes, 64 * 1024),
            0);
  EXPECT_EQ(d.cuStreamDestroy_v2(s), 0);
  EXPECT_EQ(d.cuMemFree_v2(buf), 0);
}

TEST(EmulatedDriver, UnknownModulesAreInvalidImages) {
  const CudaDriverApi &d = driver();
  emu::EmulatedModuleImage image;
  image.module = "no-such.cu";
  void *m = nullptr;
  EXPECT_EQ(d.cuModuleLoadData(&m, &image), 200);
  const char notAnImage[16] = "\177ELF";
  EXPECT_EQ(d.cuModuleLoadData(&m, notAnImage), 200);
}

/// CUDA C that no build registered is compiled for the emulator when its
/// module is loaded (runtime/cuda/emu/RuntimeCompile.h): the kernels of a
/// bundle's fused regions take this path on cuda-emu.
TEST(EmulatedDriver, CompilesUnregisteredSourceAtLoad) {
  const CudaDriverApi &d = driver();
  const char *text = R"(#include "common.cuh"
extern "C" __global__ void scale_rt(const float *x, float *y, float a, int n) {
  __shared__ float unused[32];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  unused[threadIdx.x % 32] = 0.0f;
  if (i < n)
    y[i] = mtc_cuda::fromFloat<float>(a * x[i]);
}
)";
  emu::EmulatedModuleImage image;
  image.module = "runtime-compiled-test.cu";
  image.source = text;
  std::string log;
  image.log = &log;
  void *m = nullptr;
  ASSERT_EQ(d.cuModuleLoadData(&m, &image), 0) << log;
  void *f = nullptr;
  ASSERT_EQ(d.cuModuleGetFunction(&f, m, "scale_rt"), 0);
  std::vector<float> x(77), y(77, -1.0f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i);
  const float *xp = x.data();
  float *yp = y.data();
  float a = 0.5f;
  int n = 77;
  void *params[] = {&xp, &yp, &a, &n};
  ASSERT_EQ(d.cuLaunchKernel(f, 3, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr),
            0);
  ASSERT_EQ(d.cuCtxSynchronize(), 0);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(y[i], 0.5f * static_cast<float>(i));
  // Loaded again: the module is registered now (no second compile).
  void *again = nullptr;
  ASSERT_EQ(d.cuModuleLoadData(&again, &image), 0);
  EXPECT_EQ(d.cuModuleUnload(again), 0);
  EXPECT_EQ(d.cuModuleUnload(m), 0);

  // A compile error is an invalid image whose log carries the compiler's
  // message with the file and line.
  emu::EmulatedModuleImage bad;
  bad.module = "runtime-compiled-bad.cu";
  bad.source = "extern \"C\" __global__ void broken(float *y) { y[0] = z; }\n";
  bad.log = &log;
  EXPECT_EQ(d.cuModuleLoadData(&m, &bad), 200);
  EXPECT_NE(log.find("runtime-compiled-bad.cu: compiling for the CUDA "
                     "emulator:"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("runtime-compiled-bad.cu:1:"), std::string::npos) << log;
  EXPECT_NE(log.find("'z'"), std::string::npos) << log;
}
