//===- NcclApi.h - The NCCL entry points, loaded with dlopen ----*- C++ -*-===//
//
// Part of mtc. Data parallel on CUDA devices sums gradients on the GPU with
// NCCL (docs/distributed.md, "GPUs and NCCL"). No binary links NCCL: like
// libcuda (runtime/cuda/CudaDriver.h), libnccl.so.2 is opened with dlopen
// when a run asks for it, and every call goes through a table of entry
// points, so that every tool starts on machines without a GPU or NCCL. The
// declarations here are our own, of the part of NCCL's C ABI mtc calls:
// enums are C enums (int-sized), a communicator and a stream are opaque
// pointers, and the unique id is 128 bytes passed by value.
// test/unit/NcclAbiTest.cpp checks every value and size here against the
// toolkit's nccl.h where CMake finds one.
//
// The same table is filled by the emulated NCCL of `--device cuda-emu`
// (dist/EmulatedNccl.h), whose collectives run over MPI on the emulated
// driver's streams.
//
// Thread safety: a loaded table is immutable and shared.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DIST_NCCLAPI_H
#define MTC_RUNTIME_DIST_NCCLAPI_H

#include "lib/Support/Status.h"

#include <cstddef>
#include <memory>
#include <string>

namespace mtc::dist {

/// ncclResult_t.
enum NcclResult : int {
  kNcclSuccess = 0,
  kNcclUnhandledCudaError = 1,
  kNcclSystemError = 2,
  kNcclInternalError = 3,
  kNcclInvalidArgument = 4,
  kNcclInvalidUsage = 5,
  kNcclRemoteError = 6,
  kNcclInProgress = 7,
};

/// ncclDataType_t (the types mtc reduces).
enum NcclDataType : int {
  kNcclFloat32 = 7,
  kNcclFloat64 = 8,
  kNcclBfloat16 = 9,
};

/// ncclRedOp_t (the built-in operations mtc uses).
enum NcclRedOp : int {
  kNcclSum = 0,
  kNcclMax = 2,
};

/// ncclUniqueId: NCCL_UNIQUE_ID_BYTES (128) bytes, passed by value.
struct NcclUniqueId {
  char internal[128];
};

/// ncclComm_t and cudaStream_t (CUstream): opaque pointers.
using NcclComm = void *;
using NcclStream = void *;

/// NCCL's entry points. Every function returns an NcclResult but
/// ncclGetErrorString.
struct NcclApi {
  int (*ncclGetVersion)(int *version) = nullptr;
  int (*ncclGetUniqueId)(NcclUniqueId *id) = nullptr;
  int (*ncclCommInitRank)(NcclComm *comm, int nranks, NcclUniqueId id,
                          int rank) = nullptr;
  int (*ncclCommDestroy)(NcclComm comm) = nullptr;
  int (*ncclCommAbort)(NcclComm comm) = nullptr;
  int (*ncclAllReduce)(const void *send, void *recv, size_t count, int type,
                       int op, NcclComm comm, NcclStream stream) = nullptr;
  int (*ncclReduceScatter)(const void *send, void *recv, size_t recvCount,
                           int type, int op, NcclComm comm,
                           NcclStream stream) = nullptr;
  int (*ncclAllGather)(const void *send, void *recv, size_t sendCount, int type,
                       NcclComm comm, NcclStream stream) = nullptr;
  int (*ncclGroupStart)() = nullptr;
  int (*ncclGroupEnd)() = nullptr;
  const char *(*ncclGetErrorString)(int result) = nullptr;
  int (*ncclCommGetAsyncError)(NcclComm comm, int *asyncError) = nullptr;

  /// "libnccl.so.2" or "the emulated NCCL".
  std::string where;
  bool emulated = false;
  /// What keeps the entry points valid (the library handle, the emulation).
  std::shared_ptr<void> owner;
};

/// Where a real NCCL is looked up: MTC_NCCL_LIBRARY when set, else
/// "libnccl.so.2" on the dynamic loader's path.
std::string ncclLibraryName();

/// NCCL from the library \p name (a path or a name for the loader), every
/// entry point resolved; not cached (loadNccl() is).
Expected<std::shared_ptr<const NcclApi>> openNccl(const std::string &name);

/// The process's NCCL: dlopen of ncclLibraryName(), every entry point
/// resolved. Errors: "NCCL not found: libnccl.so.2 could not be opened
/// (...)", or the first entry point missing. Loaded once; later calls
/// return the same table or the same error.
Expected<std::shared_ptr<const NcclApi>> loadNccl();

/// "ncclInvalidUsage (5): <NCCL's text>" for \p result.
std::string ncclErrorText(const NcclApi &api, int result);

/// \p version (ncclGetVersion's: major * 10000 + minor * 100 + patch from
/// 2.9 on, major * 1000 + minor * 100 + patch before) as "2.28.9".
std::string ncclVersionText(int version);

} // namespace mtc::dist

#endif // MTC_RUNTIME_DIST_NCCLAPI_H
