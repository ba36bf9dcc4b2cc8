//===- ShardedOptimizer.h - AdamW state split among the ranks ---*- C++ -*-===//
//
// Part of mtc. With --shard-optimizer (data parallel, docs/distributed.md)
// each rank keeps, for 1/N of every tensor (a contiguous range of its
// elements: rank r's is [n*r/N, n*(r+1)/N)), the AdamW moments m and v and
// the gradient summed over the ranks; the fp32 values stay whole on every
// rank (they are what the forward loads). A step:
//   1. each gradient is reduce-scattered: rank r receives the sum over the
//      ranks of its range (scatter(), on the gradient reducer's thread or the
//      optimizer stream, as the gradients become final);
//   2. the global gradient norm is the sum over the ranks of each rank's
//      sums of squares (sumOfSquares(), then an allreduce by the caller);
//   3. AdamW updates each rank's range of the values (clipped by that norm;
//      elementwise, so exactly the update one process makes), and the values
//      are all-gathered, so every rank holds the same updated weights
//      (update()).
// Host memory per parameter and rank: 4 (values) + 12 / N (m, v, summed
// gradient), plus 4 for the full gradient where the backward writes it to
// host memory (no gradient ring in the step plan, or no plan).
//
// Checkpoints hold the whole m and v, as one process writes them:
// gatherMoments() assembles them (a transient full-size copy on every rank)
// behind the slots' m and v views; after a checkpoint is read into such
// views, keepShards() keeps this rank's ranges.
//
// Thread safety: one thread at a time (the collectives of one communicator).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DATAPARALLEL_SHARDEDOPTIMIZER_H
#define MTC_RUNTIME_DATAPARALLEL_SHARDEDOPTIMIZER_H

#include "runtime/dist/Communicator.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/train/Optimizer.h"

#include <map>
#include <memory>
#include <vector>

namespace mtc::driver {

class ShardedOptimizer {
public:
  /// Shards of every tensor of \p store (created without m and v) for rank
  /// \p rank of \p size; the moments start at zero.
  ShardedOptimizer(int rank, int size, exec::ParamStore &store);

  /// Reduce-scatters \p grads (one per slot of \p slots, whole tensors) over
  /// \p c into this rank's summed gradients and sums of squares; adds the
  /// bytes reduced to \p bytes.
  Status scatter(dist::Communicator &c,
                 const std::vector<exec::ParamSlot *> &slots,
                 const std::vector<const float *> &grads, int64_t &bytes);
  /// Reduce-scatters in rank order (dist::orderedReduceScatter).
  void setDeterministic(bool on) { deterministic = on; }
  /// This rank's sum of squares of its summed gradients (every tensor, in
  /// the store's order), of the last scatter() of each.
  double sumOfSquares() const;
  /// AdamW on this rank's range of every tensor with \p adamw, then the
  /// values all-gathered over \p c; adds the bytes gathered to \p bytes.
  Status update(dist::Communicator &c, train::AdamW &adamw, int64_t step,
                float lr, float gradScale, int64_t &bytes);

  /// Points every slot's m and v at full-size copies: all-gathered over
  /// \p c (for a checkpoint), or uninitialised when \p gather is false (to
  /// read a checkpoint into). releaseMoments() frees them.
  Status gatherMoments(dist::Communicator &c, bool gather = true);
  /// Keeps this rank's ranges of the slots' full m and v (a checkpoint just
  /// read), then releases them.
  void keepShards();
  void releaseMoments();

  /// Bytes of host memory this rank holds for its shards.
  int64_t hostBytes() const { return static_cast<int64_t>(4 * state.size()); }

private:
  struct Shard {
    size_t lo = 0, n = 0;
    float *m = nullptr, *v = nullptr, *g = nullptr;
    std::vector<int64_t> counts; ///< elements of each rank's range
    double sumsq = 0;
  };
  bool deterministic = false;
  exec::ParamStore &store;
  std::vector<Shard> shards; ///< one per slot of the store, in its order
  std::map<const exec::ParamSlot *, size_t> index;
  std::vector<float> state;       ///< m, v and g of every shard
  std::vector<float> fullMoments; ///< gatherMoments()'s m and v
};

} // namespace mtc::driver

#endif // MTC_RUNTIME_DATAPARALLEL_SHARDEDOPTIMIZER_H
