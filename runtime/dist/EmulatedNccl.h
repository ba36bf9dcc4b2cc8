//===- EmulatedNccl.h - NCCL over MPI on the emulated driver ----*- C++ -*-===//
//
// Part of mtc. `--device cuda-emu` runs the CUDA code path on the CPU
// (runtime/cuda/emu/EmulatedDriver.h); this is the NCCL under it: an NcclApi
// table (dist/NcclApi.h) whose communicator is the run's MPI world and whose
// collectives are host functions queued on the stream they are given
// (the emulated driver's cuLaunchHostFunc), so they run in that stream's
// order exactly as NCCL's kernels would: after the commands queued before
// them, before those queued after. A device pointer of the emulated driver
// is a host address, so a collective is the Communicator's on that memory:
//
//   ncclGetUniqueId     128 bytes, random
//   ncclCommInitRank    checks nranks and rank against the world and that
//                       every rank passed rank 0's id (an allgather), then
//                       duplicates the world (its collectives are its own)
//   ncclAllReduce       sum of fp32 or fp64, in place or out of place
//   ncclReduceScatter   sum of fp32, recvcount elements per rank
//   ncclAllGather       any type, sendcount elements per rank
//   ncclGroupStart/End  accepted (collectives are queued as they are called)
//   errors              a failed collective sets the communicator's
//                       asynchronous error (ncclCommGetAsyncError) and prints
//                       the Communicator's message; bad arguments return
//                       ncclInvalidArgument at the call
//
// One world per process (the table's entries are plain functions):
// emulatedNccl() replaces it.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DIST_EMULATEDNCCL_H
#define MTC_RUNTIME_DIST_EMULATEDNCCL_H

#include "runtime/dist/Communicator.h"
#include "runtime/dist/NcclApi.h"

#include <memory>

namespace mtc::dist {

/// cuLaunchHostFunc's signature (the emulated driver's entry).
using LaunchHostFunc = int (*)(void *stream, void (*fn)(void *), void *data);

/// The emulated NCCL over \p world (which the caller keeps alive until
/// ncclCommInitRank; a communicator holds a duplicate of it), queueing its
/// collectives with \p launchHostFunc. An error while a communicator of an
/// earlier world is still open.
Expected<std::shared_ptr<const NcclApi>>
emulatedNccl(std::shared_ptr<Communicator> world,
             LaunchHostFunc launchHostFunc);

} // namespace mtc::dist

#endif // MTC_RUNTIME_DIST_EMULATEDNCCL_H
