//===- Communicator.h - Collectives among data-parallel ranks ---*- C++ -*-===//
//
// Part of mtc. Data-parallel training (docs/distributed.md) needs a handful of
// collectives among the ranks of one run: sums of gradients, losses and
// norms, the gathering of updated weight shards, a broadcast of rank 0's
// view at start, and an abort that ends every rank. A Communicator is that
// narrow interface; two implementations exist: one process (N = 1, every
// collective the identity) and MPI through the dlopen'ed plugin
// libmtc-mpi.so (dist/MpiApi.h), so that no binary links libmpi.
//
// Thread safety: one Communicator may be used by one thread at a time;
// collectives on a duplicate() never match the original's, so two threads
// may each drive their own (the gradient reducer does).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DIST_COMMUNICATOR_H
#define MTC_RUNTIME_DIST_COMMUNICATOR_H

#include "lib/Support/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtc::dist {

class Communicator {
public:
  virtual ~Communicator() = default;
  /// This process's rank in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// What carries the collectives ("single process", "MPI (Open MPI v4.1.4)").
  virtual std::string name() const = 0;

  /// In-place sum of \p n elements over every rank.
  virtual Status allreduceSum(float *buf, int64_t n) = 0;
  virtual Status allreduceSum(double *buf, int64_t n) = 0;
  /// The sum over every rank of \p send (the sum of \p counts elements):
  /// this rank receives its part, counts[rank()] elements, into \p recv.
  virtual Status reduceScatterSum(const float *send, float *recv,
                                  const std::vector<int64_t> &counts) = 0;
  /// Every rank's counts[r] bytes of \p send, concatenated in rank order
  /// into \p recv (which may hold this rank's part in place).
  virtual Status allgather(const void *send, void *recv,
                           const std::vector<int64_t> &counts) = 0;
  /// \p bytes of rank \p root's \p buf into every rank's.
  virtual Status broadcast(void *buf, int64_t bytes, int root) = 0;
  virtual Status barrier() = 0;
  /// A communicator over the same ranks whose collectives are independent
  /// of this one's (for a second thread).
  virtual Expected<std::unique_ptr<Communicator>> duplicate() = 0;
  /// Ends every rank of the run with exit status \p code (MPI_Abort).
  [[noreturn]] virtual void abort(int code) = 0;
};

/// The sum over the ranks of \p buf (\p n elements) added in rank order,
/// ((rank 0's + rank 1's) + rank 2's) + ..., on every rank: the same bits
/// whatever the MPI library's reduction algorithm (--deterministic-reduce).
/// Gathers every rank's buffer (N x n elements of transient memory).
Status orderedSum(Communicator &c, float *buf, int64_t n);
Status orderedSum(Communicator &c, double *buf, int64_t n);
/// This rank's part (counts[rank] elements, after the parts of the ranks
/// before it) of the rank-ordered sum of every rank's \p send, into \p recv:
/// a reduce-scatter with orderedSum's bits.
Status orderedReduceScatter(Communicator &c, const float *send, float *recv,
                            const std::vector<int64_t> &counts);

/// The communicator of a run that is not data parallel: rank 0 of 1.
std::unique_ptr<Communicator> singleProcess();

/// Whether this process was started by an MPI launcher (mpirun, srun):
/// OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK is set.
bool launchedUnderMpi();

/// The rank an MPI launcher gave this process (OMPI_COMM_WORLD_RANK,
/// PMI_RANK or PMIX_RANK), known before MPI is opened; -1 when none is set
/// or it is not a number.
int launchRank();

/// MPI through libmtc-mpi.so: the plugin named by MTC_MPI_PLUGIN, else the
/// one beside the executable (bin/../lib/libmtc-mpi.so, bin/libmtc-mpi.so),
/// else the dynamic loader's search path. The error says that the plugin or
/// libmpi is missing. MPI is finalized when the last reference is gone.
Expected<std::shared_ptr<Communicator>> openMpi();

/// The world of a `train` run for --data-parallel \p mode: "off" (one
/// process), "mpi" (MPI, an error without it), "auto" (MPI when
/// launchedUnderMpi(), else one process).
Expected<std::shared_ptr<Communicator>> openWorld(const std::string &mode);

} // namespace mtc::dist

#endif // MTC_RUNTIME_DIST_COMMUNICATOR_H
