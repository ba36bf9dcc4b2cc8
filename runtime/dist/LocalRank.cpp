//===- LocalRank.cpp - Which GPU a rank of a node opens -------------------===//
//
// Part of mtc. See LocalRank.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/dist/LocalRank.h"

#include <cerrno>
#include <cstdlib>

namespace mtc::dist {

Expected<int> localRankFromEnvironment() {
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char *value = std::getenv(name);
    if (!value)
      continue;
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(value, &end, 10);
    if (!*value || *end || errno || v < 0 || v > 1 << 20)
      return Status::error(std::string(name) + "='" + value +
                           "': expected the launcher's local rank, a "
                           "number from 0");
    return static_cast<int>(v);
  }
  return -1;
}

int gpuForLocalRank(int localRank, int deviceCount) {
  if (localRank < 0 || deviceCount <= 0)
    return 0;
  return localRank % deviceCount;
}

} // namespace mtc::dist
