//===- Wrap.h - CUDA C source as host C++ for the emulator ------*- C++ -*-===//
//
// Part of mtc. A .cu file is compiled for the emulator through a generated
// wrapper that
//   1. includes cuda_emu.h (CUDA's keywords, built-ins and intrinsics),
//   2. maps every dynamic shared memory array (`extern __shared__ T name[];`,
//      written on one line) to MTC_EMU_DYNAMIC_SHARED,
//   3. includes the unchanged kernel text (so diagnostics point into it),
//   4. registers every entry point (`extern "C" __global__ void
//      [__launch_bounds__(...)] NAME(`) for the emulated driver
//      (KernelRegistry.h) under the module name.
// One implementation serves the build (the tool mtc-cuda-emu-wrap, used by
// mtc_cuda_emu_kernels) and the emulated driver's run-time compiler.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_EMU_WRAP_H
#define MTC_RUNTIME_CUDA_EMU_WRAP_H

#include "lib/Support/Status.h"

#include <string>
#include <vector>

namespace mtc::emu {

/// The entry points of \p text, in order.
std::vector<std::string> kernelEntryPoints(const std::string &text);

/// The wrapper of the kernel source \p text found at \p path (included by
/// that path), registered as \p module. Errors: a dynamic shared array
/// declaration without a name on its line.
Expected<std::string> wrapKernelSource(const std::string &text,
                                       const std::string &path,
                                       const std::string &module);

} // namespace mtc::emu

#endif // MTC_RUNTIME_CUDA_EMU_WRAP_H
