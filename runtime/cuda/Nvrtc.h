//===- Nvrtc.h - CUDA C to PTX and cubin at run time ------------*- C++ -*-===//
//
// Part of mtc. NVRTC, loaded with dlopen (libnvrtc.so.13, .12, or the path in
// $MTC_NVRTC), compiles CUDA C to PTX and, with ptxas, to a cubin for one
// architecture; with the cubin come ptxas' statistics per kernel (registers,
// spills, shared memory). Nothing here needs a GPU: the compiler uses it for
// `mtc compile --emit=ptx|kernel-stats`, the runtime to JIT the kernels of
// the GPU it runs on (cached on disk by KernelCache).
//
// Thread safety: a loaded Nvrtc is immutable; compile() may be called from
// several threads (NVRTC programs are independent).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_NVRTC_H
#define MTC_RUNTIME_CUDA_NVRTC_H

#include "lib/Support/Status.h"
#include "runtime/cuda/DynamicLibrary.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mtc::cuda {

/// NVRTC's entry points (NvrtcSymbols.def).
struct NvrtcApi {
#define MTC_NVRTC_SYMBOL(name, ret, params) ret(*name) params = nullptr;
#include "runtime/cuda/NvrtcSymbols.def"
};

/// What ptxas reports about one kernel of a cubin.
struct KernelStats {
  std::string name;        ///< the entry (mangled unless extern "C")
  int registers = 0;       ///< per thread
  int64_t spillStores = 0; ///< bytes
  int64_t spillLoads = 0;  ///< bytes
  int64_t stackBytes = 0;  ///< stack frame per thread
  int64_t sharedBytes = 0; ///< static shared memory per block
  int64_t constantBytes = 0;
};

/// How one source is compiled.
struct NvrtcOptions {
  std::string arch = "sm_90"; ///< "sm_80", "sm_90", ...
  bool cubin = true;          ///< also ptxas to a cubin (with KernelStats)
  /// More NVRTC options ("-DMTC_CUDA_PORTABLE", "-lineinfo"); the defaults
  /// are -std=c++17, the arch and, with cubin, ptxas -v.
  std::vector<std::string> extra;
  /// Directories searched by #include (e.g. cudaToolkitIncludeDir(), for
  /// <cuda_bf16.h>).
  std::vector<std::string> includeDirs;
  /// Headers given in memory, {name, text}: `#include "name"` finds them
  /// before any directory (the library kernels' common.cuh).
  std::vector<std::pair<std::string, std::string>> headers;
};

/// The result of compiling one source.
struct CompiledModule {
  std::string arch;
  std::string ptx;
  std::string cubin; ///< empty unless NvrtcOptions::cubin
  std::string log;   ///< NVRTC's log (warnings, ptxas statistics)
  std::vector<KernelStats> stats;
};

class Nvrtc {
public:
  /// The process's NVRTC, loaded once. Errors: "NVRTC not found:
  /// libnvrtc.so.13, libnvrtc.so.12 or libnvrtc.so not found (...); install
  /// the CUDA toolkit or set MTC_NVRTC to libnvrtc.so's path".
  static Expected<std::shared_ptr<const Nvrtc>> load();

  /// NVRTC's version, e.g. {13, 0}.
  int major() const { return versionMajor; }
  int minor() const { return versionMinor; }
  /// The architectures it compiles for, as "sm_XY".
  std::vector<std::string> supportedArchs() const;
  /// A string that changes whenever the compiler does (for cache keys):
  /// the library's name and version.
  std::string identity() const;

  /// Compiles \p source; \p name stands for the file in NVRTC's messages
  /// and in errors ("rmsnorm.cu: NVRTC failed for sm_90:\n<log>").
  Expected<CompiledModule> compile(const std::string &source,
                                   const std::string &name,
                                   const NvrtcOptions &options) const;

private:
  DynamicLibrary lib;
  NvrtcApi api;
  int versionMajor = 0, versionMinor = 0;
};

/// The CUDA toolkit's include directory, for the <cuda_bf16.h> the kernels
/// include: $MTC_CUDA_INCLUDE, else $CUDA_HOME/include, $CUDA_PATH/include,
/// /usr/local/cuda/include — the first holding cuda_bf16.h. The error says
/// where it looked and how to point at one.
Expected<std::string> cudaToolkitIncludeDir();

/// The per-kernel statistics in ptxas' verbose output (`-v`): "Compiling
/// entry function 'k' for 'sm_90'", "Used 8 registers, used 1 barriers, 64
/// bytes smem", "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill
/// loads".
std::vector<KernelStats> parsePtxasLog(const std::string &log);

} // namespace mtc::cuda

#endif // MTC_RUNTIME_CUDA_NVRTC_H
