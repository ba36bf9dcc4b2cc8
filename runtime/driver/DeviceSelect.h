//===- DeviceSelect.h - Opening the device of --device ----------*- C++ -*-===//
//
// Part of mtc. What the commands share about `--device cpu|cuda|cuda-emu`
// and `--device-memory SIZE|auto`: opening the CUDA driver of a device kind
// (the emulated one honours MTC_CUDA_EMU_MEMORY, its capacity), the device
// memory the CUDA backend allocates outside the memory plan, and what `auto`
// chooses:
//
//   cpu        half of the host's available memory (MemAvailable): the CPU
//              device's "device memory" is host memory, and the other half
//              is left to the host state, the plan's host buffers and the
//              rest of the machine
//   cuda,      the GPU's free memory (cuMemGetInfo) minus the CUDA backend's
//   cuda-emu   own allocations (cudaBackendReserveBytes: its scratch region
//              and flags) and a safety margin (cudaSafetyMarginBytes: the
//              modules' code, the driver's own allocations), so that the
//              plan's arena plus the backend's allocations fit the device
//
// docs/cuda.md ("Device memory") has the accounting.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_DEVICESELECT_H
#define MTC_RUNTIME_DRIVER_DEVICESELECT_H

#include "lib/Support/Status.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/driver/DeviceKind.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mtc::driver {

/// The driver table of GPU \p device (its row's openDriver, DeviceKind.h).
/// Errors say why: no driver, a bad MTC_CUDA_EMU_MEMORY, not a GPU.
Expected<std::shared_ptr<const cuda::CudaDriverApi>>
openCudaDriverFor(DeviceKind device);

/// Device memory the CUDA backend allocates beside the plan's arena: its
/// scratch region and its deferred-error and aux-loss flags (the cuBLASLt
/// GEMMs run without a workspace).
int64_t cudaBackendReserveBytes();

/// What `--device-memory auto` leaves free on a GPU of \p totalBytes for
/// what the driver and the loaded modules take: 64 MiB plus 2% of the
/// device.
int64_t cudaSafetyMarginBytes(int64_t totalBytes);

/// `--device-memory auto` resolved for \p device.
struct AutoDeviceMemory {
  int64_t bytes = 0;  ///< the plan's budget (the device's arena)
  std::string reason; ///< how it was chosen, for the "device memory" line
};

/// The budget `auto` picks on \p device (see the file comment). Errors when
/// the device is not there (no CUDA driver or GPU: the driver's message) or
/// leaves nothing for a plan.
Expected<AutoDeviceMemory> autoDeviceMemory(DeviceKind device);

/// `--device-memory` text for \p device: "auto" resolved (and a line
/// "TOOL: device memory auto on DEVICE: N bytes (...)" printed to \p out),
/// anything else parsed as a byte size. \p command names the command in
/// errors.
Expected<int64_t> resolveDeviceMemory(const std::string &text,
                                      DeviceKind device,
                                      const std::string &command,
                                      std::ostream &out);

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_DEVICESELECT_H
