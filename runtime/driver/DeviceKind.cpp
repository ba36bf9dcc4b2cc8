//===- DeviceKind.cpp - The devices of --device, one row each ---*- C++ -*-===//
//
// Part of mtc. See DeviceKind.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/DeviceKind.h"

#include "lib/Support/ByteSize.h"
#include "runtime/cuda/emu/EmulatedDriver.h"

#include <cstdlib>
#include <iterator>

namespace mtc::driver {

namespace {

Expected<std::shared_ptr<const cuda::CudaDriverApi>> openEmulatedDriver() {
  emu::EmulatedDriverOptions options;
  if (const char *text = std::getenv("MTC_CUDA_EMU_MEMORY"); text && *text) {
    Expected<int64_t> bytes = parseDeviceBudget(text);
    if (!bytes)
      return bytes.status().withPrefix("MTC_CUDA_EMU_MEMORY");
    options.deviceBytes = *bytes;
  }
  return emu::emulatedCudaDriver(options);
}

/// Indexed by DeviceKind; listed in this order in messages.
constexpr DeviceKindInfo kDeviceKinds[] = {
    // kind, name, backend, gpu, collectives, openDriver
    {DeviceKind::Cpu, "cpu", KernelBackend::Cpu, false, false, nullptr},
    {DeviceKind::Cuda, "cuda", KernelBackend::Cuda, true, true,
     cuda::loadCudaDriver},
    {DeviceKind::CudaEmu, "cuda-emu", KernelBackend::Cuda, true, true,
     openEmulatedDriver},
};
static_assert(kDeviceKinds[size_t(DeviceKind::Cpu)].kind == DeviceKind::Cpu &&
                  kDeviceKinds[size_t(DeviceKind::Cuda)].kind ==
                      DeviceKind::Cuda &&
                  kDeviceKinds[size_t(DeviceKind::CudaEmu)].kind ==
                      DeviceKind::CudaEmu,
              "kDeviceKinds is indexed by DeviceKind");

} // namespace

const DeviceKindInfo &deviceKindInfo(DeviceKind kind) {
  return kDeviceKinds[static_cast<size_t>(kind)];
}

Expected<DeviceKind> parseDeviceKind(const std::string &name) {
  std::string choices;
  const size_t n = std::size(kDeviceKinds);
  for (size_t i = 0; i < n; ++i) {
    if (name == kDeviceKinds[i].name)
      return kDeviceKinds[i].kind;
    choices += (i == 0 ? "" : i + 1 == n ? " or " : ", ");
    choices += kDeviceKinds[i].name;
  }
  return Status::error("--device expects " + choices + ", got '" + name + "'");
}

} // namespace mtc::driver
