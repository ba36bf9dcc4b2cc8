//===- KernelCache.h - Compiled CUDA kernels kept on disk --------*- C++
//-*-===//
//
// Part of mtc. NVRTC takes 45-70 ms a kernel; a model needs dozens. The
// results are kept in one file per (source, architecture, NVRTC identity,
// options) under $MTC_CACHE_DIR, else $XDG_CACHE_HOME/mtc, else
// ~/.cache/mtc (kernels/<xxh64 key>.bin). An entry is a header (magic
// "MTCK", format version, payload size and xxh64) and the payload (PTX,
// cubin, log); it is written to a temporary file and renamed, so readers
// never see half an entry. An entry that fails any check (size, checksum,
// key) is compiled again and replaced — a cache entry is never trusted.
//
// Thread safety: one KernelCache may be used from several threads; two
// processes writing one entry at once both write whole files (the rename
// makes the last one win; both are valid).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_KERNELCACHE_H
#define MTC_RUNTIME_CUDA_KERNELCACHE_H

#include "runtime/cuda/Nvrtc.h"

#include <atomic>
#include <string>

namespace mtc::cuda {

class KernelCache {
public:
  /// $MTC_CACHE_DIR, else $XDG_CACHE_HOME/mtc, else $HOME/.cache/mtc; ""
  /// when none can be formed (then nothing is cached).
  static std::string defaultDirectory();

  /// A cache under \p dir ("" : compile every time).
  explicit KernelCache(std::string dir = defaultDirectory());

  /// The compiled module of \p source from the cache, or compiled with
  /// \p nvrtc (and stored). Compile errors are not cached. A cache that
  /// cannot be written is not an error (the module is returned).
  Expected<CompiledModule> getOrCompile(const Nvrtc &nvrtc,
                                        const std::string &source,
                                        const std::string &name,
                                        const NvrtcOptions &options);

  /// The key of an entry: xxh64 over the source, the arch, the cubin flag,
  /// the extra options, the include directories, the in-memory headers and
  /// the NVRTC identity.
  static uint64_t key(const Nvrtc &nvrtc, const std::string &source,
                      const NvrtcOptions &options);
  /// The file of the entry with \p key.
  std::string entryPath(uint64_t key) const;

  const std::string &directory() const { return dir; }
  int64_t hits() const { return hitCount; }
  int64_t misses() const { return missCount; }
  /// Entries found damaged and compiled again.
  int64_t rejected() const { return rejectCount; }

private:
  std::string dir;
  std::atomic<int64_t> hitCount{0}, missCount{0}, rejectCount{0};
};

} // namespace mtc::cuda

#endif // MTC_RUNTIME_CUDA_KERNELCACHE_H
