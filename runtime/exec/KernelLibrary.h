//===- KernelLibrary.h - CPU kernels loaded with dlopen ---------*- C++ -*-===//
//
// Part of mtc. The compiler carries the LLVM code of every mt.fused region as
// an ELF shared object in the bundle (`cpu_kernels`, docs/bundle.md). This
// class loads those bytes without LLVM: it writes them to a temporary file
// (mkstemp in $TMPDIR, else /tmp), opens it with dlopen(RTLD_NOW |
// RTLD_LOCAL), removes the file, and resolves kernels by name.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_KERNELLIBRARY_H
#define MTC_RUNTIME_EXEC_KERNELLIBRARY_H

#include "lib/Support/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mtc::exec {

class KernelLibrary {
public:
  /// The ABI of every kernel (compiler/Target/CpuKernels.h): n elements of
  /// the iteration shape; input k read at i, 0 or i mod its size; result r
  /// written to outputs[r][i]. Outputs must not overlap inputs or each other.
  using Kernel = void (*)(const float *const *inputs, float *const *outputs,
                          int64_t n);

  /// Loads a shared object from its bytes. Errors carry dlerror()'s text.
  static Expected<std::unique_ptr<KernelLibrary>>
  load(const std::string &sharedObject);

  /// The kernel named \p name ("mtc_fused_3"), or an error naming it.
  Expected<Kernel> lookup(const std::string &name) const;

  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

private:
  explicit KernelLibrary(void *handle) : handle(handle) {}
  void *handle;
};

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_KERNELLIBRARY_H
