//===- CudaDeviceTest.cpp - CudaDevice passes the conformance suite -------===//
//
// Part of mtc. CudaDevice over the emulated CUDA driver (cuda_emu: the whole
// CudaDevice code on the CPU) and over the real driver (cuda: skipped, with
// the loader's reason, on machines without a GPU) runs the device
// conformance suite (DeviceConformanceTest.cpp); plus what is CudaDevice's
// own: its name, its capability, pinning host memory.
//
//===----------------------------------------------------------------------===//

#include "DeviceConformance.h"

#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/emu/EmulatedDriver.h"
#include "runtime/device/CpuDevice.h"
#include "runtime/device/CudaDevice.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

using namespace mtc;
using namespace mtc::device;
using namespace mtc::device::cts;

namespace {

Expected<std::unique_ptr<Device>>
open(const std::shared_ptr<const cuda::CudaDriverApi> &api, int64_t capacity) {
  Expected<std::unique_ptr<CudaDevice>> dev = CudaDevice::create(api, capacity);
  if (!dev)
    return dev.status();
  return std::unique_ptr<Device>(std::move(*dev));
}

Expected<std::unique_ptr<Device>> makeEmulated(int64_t capacity,
                                               std::string &) {
  Expected<std::shared_ptr<const cuda::CudaDriverApi>> api =
      emu::emulatedCudaDriver();
  if (!api)
    return api.status();
  return open(*api, capacity);
}

Expected<std::unique_ptr<Device>> makeReal(int64_t capacity,
                                           std::string &unavailable) {
  Expected<std::shared_ptr<const cuda::CudaDriverApi>> api =
      cuda::loadCudaDriver();
  if (!api) {
    unavailable = api.message();
    return std::unique_ptr<Device>();
  }
  return open(*api, capacity);
}

} // namespace

INSTANTIATE_TEST_SUITE_P(CudaDevice, DeviceTest,
                         ::testing::Values(DeviceFactory{"cuda_emu",
                                                         makeEmulated},
                                           DeviceFactory{"cuda", makeReal}),
                         DeviceFactoryName());

TEST(CudaDeviceEmulated, NameCapabilityAndPinning) {
  std::string none;
  std::unique_ptr<Device> dev = must(makeEmulated(4096, none));
  auto &cuda = static_cast<CudaDevice &>(*dev);
  EXPECT_EQ(cuda.name().rfind("cuda:0 (mtc cuda-emu", 0), 0u) << cuda.name();
  EXPECT_EQ(cuda.computeCapability(), std::make_pair(9, 0));
  auto [free, total] = must(cuda.memoryInfo());
  EXPECT_GE(total - free, 4096);
  std::vector<char> host(1 << 16);
  Status st = cuda.registerHost(host.data(), host.size());
  EXPECT_TRUE(st.ok()) << st.message();
  // Pinning the same memory twice is the driver's error, said plainly.
  st = cuda.registerHost(host.data(), host.size());
  EXPECT_FALSE(st.ok());
  const std::string &reason = st.message();
  EXPECT_NE(reason.find("cannot pin 64.0 KiB"), std::string::npos) << reason;
  EXPECT_NE(reason.find("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"),
            std::string::npos)
      << reason;
}

TEST(CudaDeviceEmulated, ArenaTooLargeNamesTheSizes) {
  std::string none;
  Expected<std::unique_ptr<Device>> dev = makeEmulated(int64_t(1) << 50, none);
  ASSERT_FALSE(dev.ok()) << "an arena larger than the device was allocated";
  EXPECT_NE(dev.message().find("cannot allocate the 1024.0 TiB"),
            std::string::npos)
      << dev.message();
  EXPECT_NE(dev.message().find("CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos)
      << dev.message();
}

namespace {

/// Sets MTC_CONVERT_THREADS for one device's construction.
struct ConvertThreadsEnv {
  explicit ConvertThreadsEnv(const char *v) {
    setenv("MTC_CONVERT_THREADS", v, 1);
  }
  ~ConvertThreadsEnv() { unsetenv("MTC_CONVERT_THREADS"); }
};

} // namespace

TEST(CudaDeviceEmulated, F32ToBF16OverSeveralThreadsEqualsOneThread) {
  // Three full 256K-value chunks and a partial one, converted by a pool of 4
  // threads: the same bits as the reference conversion of the whole source.
  const int64_t n = 3 * (int64_t(1) << 18) + 5;
  std::vector<float> src(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    src[i] = static_cast<float>(i % 9973) * 1.0009765625f - 4000.3f;
  std::vector<uint16_t> want(src.size()), got(src.size());
  convertF32ToBF16(src.data(), want.data(), n);
  std::string none;
  std::unique_ptr<Device> dev;
  {
    ConvertThreadsEnv env("4");
    dev = must(makeEmulated(2 * n, none));
  }
  Stream s = must(dev->createStream("copy"));
  must(dev->copyToDevice(s, 0, src.data(), 4 * n, Convert::F32ToBF16));
  must(dev->copyToHost(s, got.data(), 0, 2 * n));
  must(dev->synchronize(s));
  EXPECT_EQ(got, want);
}

TEST(CudaDeviceEmulated, BadConvertThreadsIsAnError) {
  ConvertThreadsEnv env("four");
  std::string none;
  Expected<std::unique_ptr<Device>> dev = makeEmulated(64, none);
  ASSERT_FALSE(dev.ok());
  EXPECT_NE(dev.message().find("MTC_CONVERT_THREADS='four'"), std::string::npos)
      << dev.message();
}
