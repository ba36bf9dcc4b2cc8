//===- KernelSources.cpp - The library kernels' CUDA C text ---------------===//
//
// Part of mtc. The table itself is generated (Embed.cmake).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/kernels/KernelSources.h"

namespace mtc::cuda {

std::vector<std::pair<std::string, std::string>> libraryKernelHeaders() {
  std::vector<std::pair<std::string, std::string>> headers;
  for (const KernelSource &s : libraryKernelSources())
    if (s.header)
      headers.emplace_back(s.name, s.text);
  return headers;
}

} // namespace mtc::cuda
