//===- CudaDriver.h - The CUDA driver API, loaded with dlopen ---*- C++ -*-===//
//
// Part of mtc. The driver API as a table of entry points
// (CudaDriverSymbols.def) filled by dlopen("libcuda.so.1") — no link-time
// dependency, so every binary starts on a machine without a GPU and says
// plainly why CUDA is unavailable — or by the emulated driver of
// `--device cuda-emu`, which fills the same table with functions running on
// the CPU. CudaDevice only ever calls through the table.
//
// Thread safety: a loaded table is immutable and shared.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_CUDADRIVER_H
#define MTC_RUNTIME_CUDA_CUDADRIVER_H

#include "lib/Support/Status.h"
#include "runtime/cuda/DynamicLibrary.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mtc::cuda {

/// The driver's entry points. `where` names the emulated or real driver in
/// messages.
struct CudaDriverApi {
#define MTC_CUDA_SYMBOL(name, params) int(*name) params = nullptr;
#include "runtime/cuda/CudaDriverSymbols.def"
  std::string where; ///< "libcuda.so.1" or "the emulated driver"
  /// The emulated driver (runtime/cuda/emu): modules are EmulatedModuleImage
  /// values naming kernels compiled for the emulator, not cubins.
  bool emulated = false;
};

/// What the emulated driver's cuModuleLoadData takes: the module (a .cu
/// compiled for the emulator and registered, runtime/cuda/emu/KernelRegistry.h)
/// of this name.
struct EmulatedModuleImage {
  char magic[8] = {'M', 'T', 'C', 'E', 'M', 'U', '1', '\0'};
  const char *module = nullptr; ///< "norm.cu"
  /// The module's CUDA C (NUL-terminated), compiled for the emulator at run
  /// time when no module of that name is registered (a bundle's fused
  /// kernels, runtime/cuda/emu/RuntimeCompile.h); null: registered only.
  const char *source = nullptr;
  /// If set, receives the run-time compiler's message when it fails.
  std::string *log = nullptr;
};

/// The few driver constants mtc uses (values from cuda.h).
enum : int {
  kCudaSuccess = 0,
  kCudaErrorNotReady = 600,
  kCudaErrorNoDevice = 100,
  kCuDevAttrComputeCapabilityMajor = 75,
  kCuDevAttrComputeCapabilityMinor = 76,
  kCuDevAttrMultiprocessorCount = 16,
  kCuDevAttrMaxSharedMemoryPerBlockOptin = 97,
  kCuFuncAttrMaxDynamicSharedSizeBytes = 8,
  kCuMemHostRegisterPortable = 1,
  kCuMemHostRegisterDeviceMap = 2,
  kCuStreamWaitValueGeq = 0,
  kCuStreamNonBlocking = 1,
  kCuEventDisableTiming = 2,
};

/// Fills \p api from \p lib (every symbol of CudaDriverSymbols.def); an error
/// names the first one missing.
Status resolveDriverSymbols(const DynamicLibrary &lib, CudaDriverApi &api);

/// The process's CUDA driver: dlopen("libcuda.so.1"), every symbol resolved,
/// cuInit(0) called. Errors: "no CUDA driver: libcuda.so.1 not found (...)",
/// "no CUDA driver: cuInit failed: CUDA_ERROR_NO_DEVICE (100)". Loaded once;
/// later calls return the same table or the same error.
Expected<std::shared_ptr<const CudaDriverApi>> loadCudaDriver();

/// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory" for result \p rc, through
/// the driver's own names where it has them.
std::string cudaErrorText(const CudaDriverApi &api, int rc);

/// Status of a driver call: ok for CUDA_SUCCESS, else an error
/// "<what>: <cudaErrorText>".
Status cudaCheck(const CudaDriverApi &api, int rc, const std::string &what);

} // namespace mtc::cuda

#endif // MTC_RUNTIME_CUDA_CUDADRIVER_H
