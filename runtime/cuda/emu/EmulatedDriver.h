//===- EmulatedDriver.h - The CUDA driver API on the CPU --------*- C++ -*-===//
//
// Part of mtc. `--device cuda-emu` runs the whole CUDA code path -- CudaDevice,
// the CUDA kernels, their launches -- on a machine without a GPU. This is the
// driver under it: a CudaDriverApi (runtime/cuda/CudaDriver.h) whose entry
// points run on the CPU with the driver's semantics:
//
//   memory       cuMemAlloc takes host memory (256-byte aligned) against a
//                fixed device capacity; a device pointer is its host address
//                (CUDA_ERROR_OUT_OF_MEMORY past the capacity)
//   streams      one worker thread each, executing its commands in order;
//                the null stream runs its commands on the caller after every
//                other stream is idle
//   events       a record is a command; cuStreamWaitEvent holds a stream
//                until the record it saw has executed; elapsed time from
//                host clocks
//   copies       memcpy / memset commands on the stream; as on a GPU, a
//                copy from pageable (not registered, not cuMemAllocHost)
//                memory first waits for the stream's earlier work, and one
//                to pageable memory returns only when done -- the caller
//                blocks; cuMemFreeHost waits for the device to go idle
//   modules      cuModuleLoadData takes an EmulatedModuleImage naming kernels
//                compiled for the emulator (KernelRegistry.h), or carrying
//                CUDA C that is compiled for it then (RuntimeCompile.h); a
//                function is an entry point found by name
//   launches     cuLaunchKernel copies the arguments (as CUDA does) and
//                queues an emulated launch (Emulator.h); an error in the
//                kernel fails the stream: later commands are skipped and the
//                next synchronisation returns CUDA_ERROR_LAUNCH_FAILED, whose
//                cuGetErrorString text is the emulator's message
//   host funcs   cuLaunchHostFunc runs the function in stream order
//
// One device (compute capability 9.0). The driver is process-wide (the
// entry points are plain functions); configure() may change its capacity
// and launch options before first use or when no memory is allocated.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_EMU_EMULATEDDRIVER_H
#define MTC_RUNTIME_CUDA_EMU_EMULATEDDRIVER_H

#include "lib/Support/Status.h"
#include "runtime/cuda/CudaDriver.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mtc::emu {

struct EmulatedDriverOptions {
  /// The device's memory (cuDeviceTotalMem; cuMemAlloc fails beyond it).
  int64_t deviceBytes = int64_t(16) << 30;
  /// Worker threads of each emulated launch (blocks run in parallel).
  int launchWorkers = 1;
};

/// What cuModuleLoadData accepts (defined with the driver table).
using cuda::EmulatedModuleImage;

/// The process's emulated driver (configured with \p options the first time
/// and whenever no device memory is allocated; otherwise an error).
Expected<std::shared_ptr<const cuda::CudaDriverApi>>
emulatedCudaDriver(const EmulatedDriverOptions &options = {});

/// Bytes currently allocated with cuMemAlloc.
int64_t emulatedBytesAllocated();

} // namespace mtc::emu

#endif // MTC_RUNTIME_CUDA_EMU_EMULATEDDRIVER_H
