//===- KernelSources.h - The library kernels' CUDA C text -------*- C++ -*-===//
//
// Part of mtc. The CUDA C of runtime/cuda/kernels/ (every .cu and .cuh),
// embedded into the runtime at build time: the runtime hands it to NVRTC on
// the GPU it runs on (the .cuh files as in-memory headers), the compiler
// prints it (`mtc compile --target cuda --emit=cuda`), and the same files
// run on the CPU emulator in tests (test/cuda-emu).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_KERNELS_KERNELSOURCES_H
#define MTC_RUNTIME_CUDA_KERNELS_KERNELSOURCES_H

#include <string>
#include <utility>
#include <vector>

namespace mtc::cuda {

struct KernelSource {
  const char *name; ///< file name: "norm.cu", "common.cuh"
  const char *text;
  bool header; ///< a .cuh: included by the others, not compiled alone
};

/// Every library kernel source, in file-name order.
const std::vector<KernelSource> &libraryKernelSources();

/// The .cuh files as NVRTC in-memory headers, {name, text}.
std::vector<std::pair<std::string, std::string>> libraryKernelHeaders();

} // namespace mtc::cuda

#endif // MTC_RUNTIME_CUDA_KERNELS_KERNELSOURCES_H
