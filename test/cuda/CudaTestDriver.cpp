//===- CudaTestDriver.cpp - Kernel tests over either CUDA driver ----------===//
//
// Part of mtc. See CudaTestDriver.h.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/CudaTestDriver.h"

#include "runtime/cuda/emu/EmulatedDriver.h"
#include "runtime/cuda/emu/EmulatedGemm.h"
#include "runtime/device/CpuDevice.h"

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace mtc::cuda::test {

#define CUDA_OK(expr, what)                                                    \
  do {                                                                         \
    Status s_ = cudaCheck(*api, (expr), what);                                 \
    ASSERT_TRUE(s_.ok()) << s_.message();                                      \
  } while (0)

void CudaDriverTest::SetUp() {
  Expected<std::shared_ptr<const CudaDriverApi>> a =
      GetParam().emulated ? emu::emulatedCudaDriver() : loadCudaDriver();
  if (!a) {
    if (GetParam().emulated)
      FAIL() << a.message();
    GTEST_SKIP() << "no GPU here: " << a.message();
  }
  api = *a;
  CUDA_OK(api->cuInit(0), "cuInit");
  int count = 0;
  if (api->cuDeviceGetCount(&count) != kCudaSuccess || count == 0)
    GTEST_SKIP() << "no CUDA device (" << api->where << ")";
  CUDA_OK(api->cuDeviceGet(&device, 0), "cuDeviceGet");
  CUDA_OK(api->cuDevicePrimaryCtxRetain(&context, device),
          "cuDevicePrimaryCtxRetain");
  CUDA_OK(api->cuCtxSetCurrent(context), "cuCtxSetCurrent");
  CUDA_OK(api->cuStreamCreate(&stream, kCuStreamNonBlocking), "cuStreamCreate");
  Expected<std::unique_ptr<KernelLoader>> l = KernelLoader::create(api, 0);
  ASSERT_TRUE(l.ok()) << l.message();
  loader = std::move(*l);
}

void CudaDriverTest::TearDown() {
  if (!api)
    return;
  if (stream)
    api->cuStreamSynchronize(stream);
  gemmEngine.reset();
  functions.reset();
  for (unsigned long long p : allocations)
    api->cuMemFree_v2(p);
  allocations.clear();
  functions.reset();
  loader.reset();
  if (stream)
    api->cuStreamDestroy_v2(stream);
  if (context)
    api->cuDevicePrimaryCtxRelease_v2(device);
}

unsigned long long CudaDriverTest::alloc(size_t bytes) {
  unsigned long long p = 0;
  int rc = api->cuMemAlloc_v2(&p, bytes == 0 ? 1 : bytes);
  EXPECT_EQ(rc, kCudaSuccess) << cudaErrorText(*api, rc);
  if (rc == kCudaSuccess)
    allocations.push_back(p);
  return p;
}

void CudaDriverTest::copyIn(unsigned long long dst, const void *src,
                            size_t bytes) {
  CUDA_OK(api->cuMemcpyHtoDAsync_v2(dst, src, bytes, stream), "copy in");
  sync();
}

void CudaDriverTest::copyOut(void *dst, unsigned long long src, size_t bytes) {
  CUDA_OK(api->cuMemcpyDtoHAsync_v2(dst, src, bytes, stream), "copy out");
  sync();
}

void CudaDriverTest::sync() {
  CUDA_OK(api->cuStreamSynchronize(stream), "cuStreamSynchronize");
}

void *CudaDriverTest::kernel(const std::string &file, const std::string &entry,
                             const std::string &sourcePath) {
  Expected<void *> m = Status::error("");
  if (sourcePath.empty()) {
    m = loader->loadLibrary(file);
  } else {
    std::string text;
    if (!emulated()) {
      text = readFile(sourceDir() + "/" + sourcePath);
      EXPECT_FALSE(text.empty())
          << "cannot read " << sourceDir() << "/" << sourcePath
          << " (set MTC_SOURCE_DIR to the source tree)";
    }
    m = loader->load(file, text);
  }
  EXPECT_TRUE(m.ok()) << m.message();
  if (!m)
    return nullptr;
  Expected<void *> fn = loader->function(*m, entry);
  EXPECT_TRUE(fn.ok()) << fn.message();
  return fn ? *fn : nullptr;
}

void CudaDriverTest::launch(void *fn, Dim3 grid, Dim3 block,
                            unsigned sharedBytes, std::vector<void *> args) {
  ASSERT_NE(fn, nullptr);
  if (sharedBytes > 48 * 1024)
    CUDA_OK(api->cuFuncSetAttribute(fn, kCuFuncAttrMaxDynamicSharedSizeBytes,
                                    static_cast<int>(sharedBytes)),
            "cuFuncSetAttribute");
  CUDA_OK(api->cuLaunchKernel(fn, grid.x, grid.y, grid.z, block.x, block.y,
                              block.z, sharedBytes, stream, args.data(),
                              nullptr),
          "cuLaunchKernel");
  sync();
}

ops::Launch CudaDriverTest::makeLaunch() {
  ops::Launch L;
  L.api = api.get();
  L.stream = stream;
  if (!functions)
    functions = std::make_unique<ops::KernelFunctions>(*loader);
  L.functions = functions.get();
  if (!gemmEngine) {
    if (emulated()) {
      gemmEngine = emu::emulatedGemm(api);
    } else {
      Expected<std::unique_ptr<GemmEngine>> lt = openCublasLt();
      EXPECT_TRUE(lt.ok()) << lt.message();
      if (lt)
        gemmEngine = std::move(*lt);
    }
  }
  L.gemm = gemmEngine.get();
  L.gemmWorkspaceBytes = size_t(32) << 20;
  L.gemmWorkspace = reinterpret_cast<void *>(alloc(L.gemmWorkspaceBytes));
  L.scratch = [this](int64_t bytes) -> Expected<ops::DevPtr> {
    if (bytes < 0)
      return Status::error("test scratch: negative size");
    return alloc(static_cast<size_t>(bytes));
  };
  return L;
}

std::string sourceDir() {
  if (const char *env = std::getenv("MTC_SOURCE_DIR"); env && *env)
    return env;
  return MTC_SOURCE_DIR;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<float> randoms(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

uint16_t toBf16(float x) {
  uint16_t h;
  device::convertF32ToBF16(&x, &h, 1);
  return h;
}

float fromBf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

int bf16Ulps(uint16_t a, uint16_t b) {
  auto key = [](uint16_t h) {
    return (h & 0x8000) ? -static_cast<int>(h & 0x7fff) : static_cast<int>(h);
  };
  return std::abs(key(a) - key(b));
}

} // namespace mtc::cuda::test
