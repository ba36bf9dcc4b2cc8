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
#include "runtime/device/CudaDevice.h"

#include <gtest/gtest.h>

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
