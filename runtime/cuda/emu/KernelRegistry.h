//===- KernelRegistry.h - Kernels the emulated driver finds by name -*- C++
//-*-=//
//
// Part of mtc. The emulated CUDA driver (EmulatedDriver.h) loads "modules" of
// kernels compiled as host C++ for the emulator and finds their entry points
// by name, as cuModuleGetFunction does in a cubin. A module is the file a
// kernel came from ("norm.cu"); its entry points are the functions written
// `extern "C" __global__ void [__launch_bounds__(...)] NAME(...)`, which the
// build registers (mtc_cuda_emu_kernels in CMakeLists.txt appends one
// KernelRegistration per entry to the file's generated wrapper).
//
// cuLaunchKernel hands over CUDA's argument array (`void **kernelParams`, one
// pointer per parameter); KernelEntry::launch reads each parameter with its
// declared type, so a registered kernel is launched exactly as on a GPU.
//
// Thread safety: registration happens during static initialisation; lookups
// may run from any thread afterwards.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_EMU_KERNELREGISTRY_H
#define MTC_RUNTIME_CUDA_EMU_KERNELREGISTRY_H

#include "runtime/cuda/emu/Emulator.h"

#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace mtc::emu {

/// One launchable entry point.
struct KernelEntry {
  std::string module; ///< "norm.cu"
  std::string name;   ///< "mtc_rmsnorm_f32"
  const void *kernel = nullptr;
  /// Copies the arguments params[i] points at (one per parameter, read with
  /// its declared type, as cuLaunchKernel copies them when it is called)
  /// into a launch to run later.
  std::function<Status(const LaunchConfig &)> (*bind)(const void *kernel,
                                                      void **params) = nullptr;
  int parameters = 0;
};

namespace detail {
template <typename... P, size_t... I>
std::function<Status(const LaunchConfig &)>
bindParams(void (*kernel)(P...), void **params, std::index_sequence<I...>) {
  std::tuple<std::decay_t<P>...> args{
      *static_cast<std::decay_t<P> *>(params[I])...};
  return [kernel, args](const LaunchConfig &cfg) {
    return std::apply(
        [&](const auto &...a) { return launch(cfg, kernel, a...); }, args);
  };
}
template <typename... P>
std::function<Status(const LaunchConfig &)> bind(const void *kernel,
                                                 void **params) {
  auto k = reinterpret_cast<void (*)(P...)>(const_cast<void *>(kernel));
  return bindParams(k, params, std::index_sequence_for<P...>{});
}
void registerKernel(KernelEntry entry);
} // namespace detail

/// A static object registering one entry point (see the banner).
struct KernelRegistration {
  template <typename... P>
  KernelRegistration(const char *module, const char *name,
                     void (*kernel)(P...)) {
    detail::registerKernel(
        KernelEntry{module, name, reinterpret_cast<const void *>(kernel),
                    &detail::bind<P...>, static_cast<int>(sizeof...(P))});
  }
};

/// The entry points registered for \p module, in registration order (empty
/// when none).
std::vector<KernelEntry> registeredKernels(const std::string &module);

/// Every module registered in this process.
std::vector<std::string> registeredModules();

} // namespace mtc::emu

#endif // MTC_RUNTIME_CUDA_EMU_KERNELREGISTRY_H
