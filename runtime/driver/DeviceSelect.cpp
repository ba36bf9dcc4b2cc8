//===- DeviceSelect.cpp - Opening the device of --device --------*- C++ -*-===//
//
// Part of mtc. See DeviceSelect.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/DeviceSelect.h"

#include "lib/Support/ByteSize.h"
#include "runtime/device/CudaDevice.h"
#include "runtime/driver/Train.h"
#include "runtime/exec/cuda/CudaBackend.h"

#include <ostream>

namespace mtc::driver {

Expected<std::shared_ptr<const cuda::CudaDriverApi>>
openCudaDriverFor(DeviceKind device) {
  const DeviceKindInfo &row = deviceKindInfo(device);
  if (!row.openDriver)
    return Status::error(std::string("--device ") + row.name +
                         " has no CUDA driver");
  return row.openDriver();
}

int64_t cudaBackendReserveBytes() { return exec::CudaBackend::deviceBytes(); }

int64_t cudaSafetyMarginBytes(int64_t totalBytes) {
  return (int64_t(64) << 20) + totalBytes / 50;
}

Expected<AutoDeviceMemory> autoDeviceMemory(DeviceKind device) {
  AutoDeviceMemory a;
  const std::string name = deviceKindName(device);
  if (!isGpu(device)) {
    double avail = hostMemoryAvailable();
    if (avail <= 0)
      return Status::error("--device-memory auto on --device cpu: this "
                           "machine's available memory is unknown (no "
                           "MemAvailable in /proc/meminfo); give a size");
    a.bytes = static_cast<int64_t>(avail / 2);
    a.reason = "half of the host's available " +
               formatBytes(static_cast<int64_t>(avail), ByteFormat::approx());
    return a;
  }
  Expected<std::shared_ptr<const cuda::CudaDriverApi>> api =
      openCudaDriverFor(device);
  if (!api)
    return api.status().withPrefix("--device-memory auto needs the device, "
                                   "and --device " +
                                   name + " is not there");
  Expected<std::unique_ptr<device::CudaDevice>> probe =
      device::CudaDevice::create(*api, 0);
  if (!probe)
    return probe.status().withPrefix("--device-memory auto: --device " + name);
  Expected<std::pair<int64_t, int64_t>> info = (*probe)->memoryInfo();
  if (!info)
    return info.status().withPrefix("--device-memory auto: --device " + name);
  const auto [free, total] = *info;
  const int64_t reserve = cudaBackendReserveBytes();
  const int64_t margin = cudaSafetyMarginBytes(total);
  a.bytes = free - reserve - margin;
  a.reason = formatBytes(free, ByteFormat::approx()) + " free of " +
             formatBytes(total, ByteFormat::approx()) +
             ", less the CUDA backend's " +
             formatBytes(reserve, ByteFormat::approx()) +
             " (scratch and flags) and a margin of " +
             formatBytes(margin, ByteFormat::approx());
  if (a.bytes <= 0)
    return Status::error("--device-memory auto: --device " + name + " has " +
                         a.reason + ": nothing is left for a plan");
  return a;
}

Expected<int64_t> resolveDeviceMemory(const std::string &text,
                                      DeviceKind device,
                                      const std::string &command,
                                      std::ostream &out) {
  if (text != "auto") {
    Expected<int64_t> bytes = parseDeviceBudget(text);
    if (!bytes)
      return bytes.status().withPrefix(command + ": --device-memory");
    return *bytes;
  }
  Expected<AutoDeviceMemory> a = autoDeviceMemory(device);
  if (!a)
    return a.status().withPrefix(command);
  out << "device memory auto on " << deviceKindName(device) << ": " << a->bytes
      << " bytes (" << formatBytes(a->bytes, ByteFormat::approx()) << ": "
      << a->reason << ")\n";
  return a->bytes;
}

} // namespace mtc::driver
