//===- DeviceKind.h - The devices of --device, one row each -----*- C++ -*-===//
//
// Part of mtc. The kinds of device a step plan (or `generate`, `gradcheck`)
// runs on, as one table: a new kind is a row here and an enumerator, and
// every question the runtime asks of a device -- its name, its kernels,
// whether it is a GPU, whether gradients can be summed on it, how its driver
// opens -- is answered by the row, never by comparing names.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_DEVICEKIND_H
#define MTC_RUNTIME_DRIVER_DEVICEKIND_H

#include "lib/Support/Status.h"
#include "runtime/cuda/CudaDriver.h"

#include <memory>
#include <string>

namespace mtc::driver {

/// A device of `--device` (docs/cuda.md).
enum class DeviceKind { Cpu, Cuda, CudaEmu };

/// The kernel table a device runs (exec::Backend).
enum class KernelBackend {
  Cpu, ///< the CPU kernels (exec::cpuDeviceBackend under a step plan)
  Cuda ///< the CUDA kernels (exec::CudaBackend)
};

/// One row of the device table.
struct DeviceKindInfo {
  DeviceKind kind;
  const char *name;      ///< the `--device` spelling
  KernelBackend backend; ///< the kernels it runs
  bool gpu;              ///< a CudaDevice (over a real or an emulated driver)
  /// Gradients can be summed over the ranks on it (`--dist-backend nccl`,
  /// dataparallel/DeviceReduce.h).
  bool collectives;
  /// Opens its CUDA driver (null for the CPU device): libcuda.so.1 through
  /// dlopen, or the emulated driver, whose capacity is MTC_CUDA_EMU_MEMORY
  /// when set (a byte size as --device-memory takes), else 16 GiB.
  Expected<std::shared_ptr<const cuda::CudaDriverApi>> (*openDriver)();
};

/// The row of \p kind.
const DeviceKindInfo &deviceKindInfo(DeviceKind kind);
/// The `--device` spelling of \p kind ("cpu", "cuda", "cuda-emu").
inline const char *deviceKindName(DeviceKind kind) {
  return deviceKindInfo(kind).name;
}
/// Whether \p kind is a GPU (a CudaDevice running the CUDA kernels).
inline bool isGpu(DeviceKind kind) { return deviceKindInfo(kind).gpu; }
/// The kind spelled \p name; else "--device expects cpu, cuda or cuda-emu,
/// got 'NAME'".
Expected<DeviceKind> parseDeviceKind(const std::string &name);

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_DEVICEKIND_H
