//===- KernelLoader.h - CUDA C modules onto a driver ------------*- C++ -*-===//
//
// Part of mtc. One way to put a CUDA C kernel file on a device, whichever
// driver is underneath (runtime/cuda/CudaDriver.h):
//
//   real driver      the text is compiled by NVRTC for the device's
//                    architecture (sm_XY from its compute capability) to a
//                    cubin, through the disk cache (KernelCache.h), with the
//                    library headers (common.cuh) in memory and the toolkit's
//                    include directory for <cuda_bf16.h>; cuModuleLoadData
//                    takes the cubin
//   emulated driver  the module registered under the same file name (the
//                    .cu compiled for the emulator at build time,
//                    runtime/cuda/emu) is loaded; a name nothing registered
//                    (a bundle's fused kernels) has its text compiled for the
//                    emulator then (runtime/cuda/emu/RuntimeCompile.h)
//
// So a test or the CUDA backend names a kernel file and its entry points and
// runs them on a GPU or on the CPU alike. Loading and launching need the
// device's context current on the calling thread (real driver).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_KERNELLOADER_H
#define MTC_RUNTIME_CUDA_KERNELLOADER_H

#include "lib/Support/Status.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/Nvrtc.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mtc::cuda {

class KernelCache;

class KernelLoader {
public:
  /// A loader for device \p ordinal of \p api. On the real driver this
  /// loads NVRTC and reads the device's architecture; \p cache (optional,
  /// kept by the caller) holds compiled cubins across runs.
  static Expected<std::unique_ptr<KernelLoader>>
  create(std::shared_ptr<const CudaDriverApi> api, int ordinal = 0,
         KernelCache *cache = nullptr);
  ~KernelLoader();
  KernelLoader(const KernelLoader &) = delete;
  KernelLoader &operator=(const KernelLoader &) = delete;

  /// "sm_90" (the emulated device reports 9.0 too).
  const std::string &arch() const { return archName; }

  /// The module of kernel file \p name with CUDA C \p text (on the
  /// emulated driver: used only when no module \p name is registered),
  /// loaded once per name. \p extraOptions go to NVRTC
  /// ("-DMTC_CUDA_PORTABLE"); the emulated driver refuses any, since its
  /// modules were compiled at build time.
  Expected<void *> load(const std::string &name, const std::string &text,
                        const std::vector<std::string> &extraOptions = {});
  /// A library kernel file (runtime/cuda/kernels, embedded at build time).
  Expected<void *> loadLibrary(const std::string &name);
  /// Entry point \p entry of \p module ("norm.cu: no kernel 'x'").
  Expected<void *> function(void *module, const std::string &entry);

  /// ptxas statistics of the kernels compiled so far (real driver).
  const std::vector<KernelStats> &stats() const { return kernelStats; }

private:
  KernelLoader() = default;

  std::shared_ptr<const CudaDriverApi> api;
  std::shared_ptr<const Nvrtc> nvrtc;
  KernelCache *cache = nullptr;
  std::string archName;
  std::vector<std::string> includeDirs;
  std::mutex mu;
  std::map<std::string, void *> modules;
  std::map<void *, std::string> moduleNames;
  std::vector<KernelStats> kernelStats;
};

} // namespace mtc::cuda

#endif // MTC_RUNTIME_CUDA_KERNELLOADER_H
