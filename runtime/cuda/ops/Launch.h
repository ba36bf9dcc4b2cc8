//===- Launch.h - Where the CUDA op launchers queue their work --*- C++ -*-===//
//
// Part of mtc. The host side of the CUDA kernels: one launcher per CPU kernel
// of runtime/cpu/Kernels.h (runtime/cuda/ops/*.h), with the same arguments
// except that pointers are device pointers and storage may be bf16. A
// launcher computes the launch geometry, finds the library kernel
// (runtime/cuda/kernels) and queues it on a stream; it never synchronises.
// The CUDA backend of the executor (runtime/exec/cuda) calls them with
// values of the device arena; the tests (test/cuda) with their own memory.
//
// A Launch names the driver, the kernel loader, the stream, the GEMM engine
// and a scratch allocator (device memory that stays valid until the work
// queued on the stream has run: the executor's workspace region, a test's
// allocation).
//
// Thread safety: a Launch and its KernelFunctions are used by one host
// thread at a time (the one issuing the stream's work).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_LAUNCH_H
#define MTC_RUNTIME_CUDA_OPS_LAUNCH_H

#include "lib/Support/Status.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/KernelLoader.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mtc::cuda::ops {

/// A device pointer (CUdeviceptr).
using DevPtr = unsigned long long;

/// Storage type of a tensor on the device; arithmetic is always fp32.
enum class DType { F32, BF16 };

/// Bytes per element of \p t.
inline int64_t dtypeBytes(DType t) { return t == DType::F32 ? 4 : 2; }
/// The entry-name suffix of \p t: "f32", "bf16".
inline const char *dtypeSuffix(DType t) {
  return t == DType::F32 ? "f32" : "bf16";
}

/// The CUfunctions of library kernel entries, looked up once per
/// (file, entry) through a KernelLoader.
class KernelFunctions {
public:
  explicit KernelFunctions(KernelLoader &loader) : loader(loader) {}
  /// Entry \p entry of library kernel file \p file ("norm.cu").
  Expected<void *> get(const std::string &file, const std::string &entry);

private:
  KernelLoader &loader;
  std::map<std::pair<std::string, std::string>, void *> cache;
};

/// A launch geometry.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct Launch {
  const CudaDriverApi *api = nullptr;
  KernelFunctions *functions = nullptr;
  void *stream = nullptr; ///< CUstream
  GemmEngine *gemm = nullptr;
  void *gemmWorkspace = nullptr; ///< device scratch for the GEMM engine
  size_t gemmWorkspaceBytes = 0;
  /// \p bytes of device scratch (64-byte aligned), valid until the work
  /// queued on the stream so far and next has run; an exhausted scratch
  /// region is an error naming it.
  std::function<Expected<DevPtr>(int64_t bytes)> scratch;

  /// Queues entry \p entry of \p file with \p args (pointers to each kernel
  /// argument, in order) on the stream. Errors name the entry and the
  /// driver's error.
  Status kernel(const std::string &file, const std::string &entry, Dim3 grid,
                Dim3 block, unsigned sharedBytes,
                std::vector<void *> args) const;
  /// Queues function \p fn (a CUfunction; \p what names it in errors:
  /// "'entry' (file)") as kernel() queues a library entry.
  Status launchFunction(void *fn, const std::string &what, Dim3 grid,
                        Dim3 block, unsigned sharedBytes,
                        std::vector<void *> args) const;
  /// Queues \p bytes of zeros at \p p / a copy of \p bytes from \p src to
  /// \p dst (device to device) on the stream.
  Status zero(DevPtr p, int64_t bytes) const;
  Status copy(DevPtr dst, DevPtr src, int64_t bytes) const;
  /// Queues a GEMM (Gemm.h) on the stream.
  Status gemmOp(const GemmShape &shape, const GemmOperands &ops) const;
};

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_LAUNCH_H
