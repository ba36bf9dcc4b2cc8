//===- CudaEmit.cpp - mtc compile --emit=cuda|ptx|kernel-stats ------------===//
//
// Part of mtc. See CudaEmit.h.
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/CudaEmit.h"

#include "runtime/cuda/KernelCache.h"
#include "runtime/cuda/Nvrtc.h"
#include "runtime/cuda/kernels/KernelSources.h"

#include <utility>
#include <vector>

namespace mtc {

namespace {
/// {file name, text} of every kernel source the CUDA backend may load.
std::vector<std::pair<std::string, std::string>>
kernelFiles(const bundle::Bundle &b, bool withHeaders) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const cuda::KernelSource &src : cuda::libraryKernelSources())
    if (withHeaders || !src.header)
      files.emplace_back(src.name, src.text);
  if (!b.cudaKernels.source.empty())
    files.emplace_back(b.cudaKernels.file, b.cudaKernels.source);
  return files;
}
} // namespace

Status emitCuda(const bundle::Bundle &b, const std::string &emit,
                const std::string &arch, std::ostream &os) {
  if (emit == "cuda") {
    for (const auto &[name, text] : kernelFiles(b, true))
      os << "// ===== " << name << " =====\n" << text << "\n";
    return Status();
  }
  Expected<std::shared_ptr<const cuda::Nvrtc>> nvrtc = cuda::Nvrtc::load();
  if (!nvrtc)
    return Status::error("--emit=" + emit +
                         " compiles through NVRTC: " + nvrtc.message());
  cuda::NvrtcOptions options;
  options.arch = arch;
  options.cubin = emit == "kernel-stats";
  options.headers = cuda::libraryKernelHeaders();
  Expected<std::string> include = cuda::cudaToolkitIncludeDir();
  if (!include)
    return Status::error("--emit=" + emit + ": " + include.message());
  options.includeDirs.push_back(*include);
  cuda::KernelCache cache;
  int64_t kernels = 0, spills = 0;
  for (const auto &[name, text] : kernelFiles(b, false)) {
    Expected<cuda::CompiledModule> m =
        cache.getOrCompile(**nvrtc, text, name, options);
    if (!m)
      return m.status();
    if (emit == "ptx") {
      os << "// ===== " << name << " (" << arch << ") =====\n"
         << m->ptx << "\n";
      continue;
    }
    for (const cuda::KernelStats &k : m->stats) {
      int64_t spill = k.spillStores + k.spillLoads;
      os << k.name << " regs=" << k.registers << " spill=" << spill
         << " smem=" << k.sharedBytes << "\n";
      ++kernels;
      spills += spill;
    }
  }
  if (emit == "kernel-stats")
    os << "kernels: " << kernels << ", spills: " << spills << "\n";
  return Status();
}

} // namespace mtc
