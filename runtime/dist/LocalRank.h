//===- LocalRank.h - Which GPU a rank of a node opens ------------*- C++
//-*-===//
//
// Part of mtc. With several ranks on one node, each rank opens its own GPU
// (docs/distributed.md, "GPUs and NCCL"): the rank's index among the ranks
// of its node, as the MPI launcher exports it, modulo the GPUs the driver
// sees. A launcher that exports no local rank, or a single rank, opens GPU
// 0; `CUDA_VISIBLE_DEVICES` set per rank by the launcher still works (each
// rank then sees one GPU).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DIST_LOCALRANK_H
#define MTC_RUNTIME_DIST_LOCALRANK_H

#include "lib/Support/Status.h"

#include <string>

namespace mtc::dist {

/// The launcher's local rank of this process: the first of
/// OMPI_COMM_WORLD_LOCAL_RANK (Open MPI), MPI_LOCALRANKID (MPICH),
/// SLURM_LOCALID (srun) that is set; -1 when none is. A set but malformed
/// value is an error naming the variable.
Expected<int> localRankFromEnvironment();

/// The GPU ordinal of local rank \p localRank among \p deviceCount GPUs:
/// localRank mod deviceCount, and 0 for no local rank (-1) or no GPU count.
int gpuForLocalRank(int localRank, int deviceCount);

} // namespace mtc::dist

#endif // MTC_RUNTIME_DIST_LOCALRANK_H
