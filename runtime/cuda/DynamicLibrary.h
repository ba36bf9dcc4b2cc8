//===- DynamicLibrary.h - A shared library opened with dlopen ---*- C++ -*-===//
//
// Part of mtc. GPU libraries (the CUDA driver, NVRTC, cuBLASLt) are never
// linked: every binary builds and starts on a machine without them, and
// reaches them through dlopen at run time. One DynamicLibrary is one dlopen
// handle, tried under a list of names; symbols are looked up by name.
// Thread safety: open() and symbol() may be called from any thread (dlopen
// and dlsym are thread-safe); the object itself is not shared mutably.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_DYNAMICLIBRARY_H
#define MTC_RUNTIME_CUDA_DYNAMICLIBRARY_H

#include "lib/Support/Status.h"

#include <string>
#include <vector>

namespace mtc::cuda {

class DynamicLibrary {
public:
  /// Opens the first of \p names that dlopen finds (RTLD_NOW | RTLD_LOCAL).
  /// When the environment variable \p overrideEnv is set (e.g. MTC_NVRTC)
  /// its value is the only name tried. The error names every name tried and
  /// dlopen's last message: "libcuda.so.1 not found (...)".
  static Expected<DynamicLibrary> open(const std::vector<std::string> &names,
                                       const char *overrideEnv = nullptr);

  DynamicLibrary() = default;
  DynamicLibrary(DynamicLibrary &&other) noexcept;
  DynamicLibrary &operator=(DynamicLibrary &&other) noexcept;
  DynamicLibrary(const DynamicLibrary &) = delete;
  DynamicLibrary &operator=(const DynamicLibrary &) = delete;
  ~DynamicLibrary();

  /// The address of \p symbol, or nullptr.
  void *symbol(const char *symbol) const;
  /// The name the library was opened under ("libnvrtc.so.13").
  const std::string &name() const { return opened; }

private:
  void *handle = nullptr;
  std::string opened;
};

/// Fills every entry of a symbol table from \p lib: for each name of
/// \p names, `*slots[i] = dlsym(name)`. Returns an error naming the first
/// missing symbol and the library ("libnvrtc.so.13 has no nvrtcGetCUBIN: the
/// CUDA toolkit is older than mtc needs").
Status resolveSymbols(const DynamicLibrary &lib,
                      const std::vector<const char *> &names,
                      const std::vector<void **> &slots);

} // namespace mtc::cuda

#endif // MTC_RUNTIME_CUDA_DYNAMICLIBRARY_H
