//===- DataParallel.h - A training run's share among its ranks --*- C++ -*-===//
//
// Part of mtc. What `train` does differently when several ranks train one
// model data parallel (docs/distributed.md): each rank runs its share of
// every micro-batch's rows (the windows one process would draw), each layer
// instance's gradient is summed over the ranks as soon as it is final, on the
// gradient reducer's thread while the backward goes on, the losses are
// averaged, and at start every rank's binary, model and options are checked
// against rank 0's. The training loop (Train.cpp) calls these few hooks; a run
// of one process has none of this.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DATAPARALLEL_DATAPARALLEL_H
#define MTC_RUNTIME_DATAPARALLEL_DATAPARALLEL_H

#include "lib/Bundle/Bundle.h"
#include "runtime/dataparallel/ShardedOptimizer.h"
#include "runtime/device/Trace.h"
#include "runtime/dist/Communicator.h"
#include "runtime/dist/GradientReducer.h"
#include "runtime/driver/TrainOptions.h"
#include "runtime/exec/ParamStore.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mtc::driver {

class DeviceReduce;

/// Whether the ranks of this run share the micro-batches rather than the
/// rows of each (--deterministic-reduce with more than one rank): rank r
/// trains micro-batches r*M/N .. (r+1)*M/N - 1, all --batch rows of each.
bool splitsMicroBatches(const TrainOptions &opts);
/// The rows of every micro-batch this rank trains on: the global --batch
/// divided among the ranks of opts.world (all of it when the ranks split
/// the micro-batches).
int64_t rankBatch(const TrainOptions &opts);
/// The micro-batches of a step this rank trains: --micro-batches, divided
/// among the ranks when they split the micro-batches.
int64_t rankMicroBatches(const TrainOptions &opts);
/// Whether this run shards the optimizer state among its ranks
/// (--shard-optimizer on, or auto with more than one rank and without
/// --deterministic-reduce).
bool shardsOptimizer(const TrainOptions &opts);
/// Opens opts.world for opts.dataParallel (dist::openWorld) and checks that
/// the ranks divide --batch. The error names the flag.
Status openDataParallel(TrainOptions &opts);

class DataParallel {
public:
  /// For the parameters of \p store (laid out as \p b declares them), over
  /// \p world (size > 1).
  static Expected<std::unique_ptr<DataParallel>>
  create(std::shared_ptr<dist::Communicator> world, const bundle::Bundle &b,
         exec::ParamStore &store);

  int rank() const { return world->rank(); }
  int size() const { return world->size(); }
  dist::Communicator &communicator() { return *world; }

  /// Every rank of \p world: its executable, model and training options
  /// against rank 0's; an error on every rank naming the first rank that
  /// differs and what.
  static Status checkConsistent(dist::Communicator &world,
                                const bundle::Bundle &b,
                                const TrainOptions &opts);

  /// A new step: no gradient has been summed yet.
  void beginStep();
  /// The gradients of layer instance \p instance of \p layer are final:
  /// their sum over the ranks starts on the reducer's thread.
  void instanceDone(const std::string &layer, int64_t instance);
  /// The same for the gradients of \p slots.
  void slotsDone(const std::vector<exec::ParamSlot *> &slots);
  /// Sums every gradient not summed yet (the model-level parameters) and
  /// waits for all: then every rank's store holds the sum of the ranks'
  /// gradients.
  Status finishGradients();
  /// Sums \p grads (of \p slots, elsewhere than in the store) over the ranks
  /// on the calling thread, now.
  Status reduceNow(const std::vector<exec::ParamSlot *> &slots,
                   const std::vector<const float *> &grads);

  /// With a sharded optimizer the gradients are reduce-scattered into
  /// \p sharded's ranges instead of summed whole (null: summed whole).
  void setSharded(ShardedOptimizer *sharded) { this->sharded = sharded; }
  /// --deterministic-reduce: every sum in rank order (dist::orderedSum),
  /// the same bits whatever the MPI library's algorithm.
  void setDeterministic(bool on) { deterministic = on; }
  /// --dist-backend nccl: the gradients reach the host already summed by
  /// \p r (on the device): nothing is summed here, a sharded optimizer
  /// keeps its range of them, and the step's counters include r's.
  void setDeviceReduce(DeviceReduce *r);
  /// Reduce-scatters \p grads (of \p slots) now, on the calling thread.
  Status scatterNow(const std::vector<exec::ParamSlot *> &slots,
                    const std::vector<const float *> &grads);
  /// The sharded optimizer's update (ShardedOptimizer::update) and moments
  /// (gatherMoments), over the reducer's communicator (nothing enqueued).
  Status shardedUpdate(train::AdamW &adamw, int64_t step, float lr,
                       float gradScale);
  Status gatherMoments(bool gather);

  /// Records each job of the gradient reducer (its collectives: an
  /// instance's gradients, the sharded update's gather) as a span on the
  /// "reduce" track of \p trace.
  void setTrace(device::Trace *trace);

  /// --deterministic-reduce (the ranks split the micro-batches): every
  /// rank's \p mine (one value per micro-batch it trained, in order) added
  /// one by one from 0 in rank order, the order one process adds the
  /// micro-batches' values in.
  Expected<double> sumInOrder(const std::vector<double> &mine);
  /// The same for every gradient: \p earlier[k][i] holds this rank's
  /// micro-batch k's gradient of store slot i (all but its last micro-batch),
  /// the store the last one's; on return every rank's store holds
  /// ((0 + g_0) + g_1) + ... over the step's micro-batches. Gathers every
  /// rank's micro-batch gradients of one tensor at a time on the reducer's
  /// thread.
  Status sumGradientsInOrder(
      const std::vector<std::vector<std::vector<float>>> &earlier);

  /// The sum of \p v over the ranks.
  Expected<double> sum(double v);
  /// The mean of \p v over the ranks.
  Expected<double> mean(double v);
  /// Whether \p v is non-zero on any rank.
  Expected<bool> any(bool v);

  /// Bytes summed over the ranks in the last step, and the seconds the step
  /// waited for sums the backward did not hide.
  int64_t allreduceBytes() const;
  double exposedSeconds() const;

private:
  DataParallel(std::shared_ptr<dist::Communicator> world,
               std::unique_ptr<dist::GradientReducer> reducer)
      : world(std::move(world)), reducer(std::move(reducer)) {}
  void enqueue(const std::vector<exec::ParamSlot *> &slots);

  std::shared_ptr<dist::Communicator> world;
  std::unique_ptr<dist::GradientReducer> reducer;
  ShardedOptimizer *sharded = nullptr;
  DeviceReduce *deviceReduce = nullptr;
  std::unique_ptr<dist::Communicator> summedComm; ///< alreadySummed()'s
  bool deterministic = false;
  /// The job that sums \p bufs (in rank order when deterministic).
  dist::GradientReducer::Job sumJob(dist::GradientReducer::Buffers bufs) const;
  std::vector<exec::ParamSlot *> all;
  std::map<std::pair<std::string, int64_t>, std::vector<exec::ParamSlot *>>
      instances;
  std::mutex mu; ///< guards summed (slotsDone runs on a device stream)
  std::map<const exec::ParamSlot *, bool> summed;
};

} // namespace mtc::driver

#endif // MTC_RUNTIME_DATAPARALLEL_DATAPARALLEL_H
