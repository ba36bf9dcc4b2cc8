//===- ShardedOptimizer.cpp - AdamW state split among the ranks -----------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/dataparallel/ShardedOptimizer.h"

#include <algorithm>

namespace mtc::driver {

ShardedOptimizer::ShardedOptimizer(int rank, int size, exec::ParamStore &store)
    : store(store) {
  size_t total = 0;
  for (exec::ParamSlot &s : store.slots()) {
    const size_t n = s.value.size();
    Shard sh;
    for (int r = 0; r < size; ++r)
      sh.counts.push_back(static_cast<int64_t>(n * (r + 1) / size) -
                          static_cast<int64_t>(n * r / size));
    sh.lo = n * rank / size;
    sh.n = static_cast<size_t>(sh.counts[rank]);
    index[&s] = shards.size();
    shards.push_back(sh);
    total += sh.n;
  }
  state.assign(3 * total, 0.0f);
  float *p = state.data();
  for (Shard &sh : shards) {
    sh.m = p;
    sh.v = p + total;
    sh.g = p + 2 * total;
    p += sh.n;
  }
}

Status ShardedOptimizer::scatter(dist::Communicator &c,
                                 const std::vector<exec::ParamSlot *> &slots,
                                 const std::vector<const float *> &grads,
                                 int64_t &bytes) {
  for (size_t i = 0; i < slots.size(); ++i) {
    Shard &sh = shards[index.at(slots[i])];
    if (Status st =
            deterministic
                ? dist::orderedReduceScatter(c, grads[i], sh.g, sh.counts)
                : c.reduceScatterSum(grads[i], sh.g, sh.counts);
        !st)
      return st;
    bytes += 4 * static_cast<int64_t>(slots[i]->value.size());
    sh.sumsq = train::sumOfSquares(sh.g, sh.n);
  }
  return Status::success();
}

double ShardedOptimizer::sumOfSquares() const {
  double s = 0;
  for (const Shard &sh : shards)
    s += sh.sumsq;
  return s;
}

Status ShardedOptimizer::update(dist::Communicator &c, train::AdamW &adamw,
                                int64_t step, float lr, float gradScale,
                                int64_t &bytes) {
  std::vector<exec::ParamSlot> &slots = store.slots();
  std::vector<train::AdamWTensor> mine;
  for (size_t i = 0; i < slots.size(); ++i) {
    Shard &sh = shards[i];
    mine.push_back({slots[i].value.data() + sh.lo, sh.m, sh.v, sh.g, sh.n,
                    slots[i].decay()});
  }
  adamw.step(mine, step, lr, gradScale);
  for (size_t i = 0; i < slots.size(); ++i) {
    Shard &sh = shards[i];
    std::vector<int64_t> byteCounts(sh.counts);
    for (int64_t &n : byteCounts)
      n *= 4;
    float *v = slots[i].value.data();
    if (Status st = c.allgather(v + sh.lo, v, byteCounts); !st)
      return st;
    bytes += 4 * static_cast<int64_t>(slots[i].value.size());
  }
  return Status::success();
}

Status ShardedOptimizer::gatherMoments(dist::Communicator &c, bool gather) {
  size_t total = 0;
  for (const exec::ParamSlot &s : store.slots())
    total += s.value.size();
  fullMoments.assign(2 * total, 0.0f);
  float *p = fullMoments.data();
  std::vector<exec::ParamSlot> &slots = store.slots();
  for (size_t i = 0; i < slots.size(); ++i) {
    const size_t n = slots[i].value.size();
    slots[i].m = exec::HostArray(p, n);
    slots[i].v = exec::HostArray(p + total, n);
    p += n;
    if (!gather)
      continue;
    const Shard &sh = shards[i];
    std::vector<int64_t> byteCounts(sh.counts);
    for (int64_t &b : byteCounts)
      b *= 4;
    if (Status st = c.allgather(sh.m, slots[i].m.data(), byteCounts); !st)
      return st;
    if (Status st = c.allgather(sh.v, slots[i].v.data(), byteCounts); !st)
      return st;
  }
  return Status::success();
}

void ShardedOptimizer::keepShards() {
  std::vector<exec::ParamSlot> &slots = store.slots();
  for (size_t i = 0; i < slots.size(); ++i) {
    Shard &sh = shards[i];
    std::copy_n(slots[i].m.data() + sh.lo, sh.n, sh.m);
    std::copy_n(slots[i].v.data() + sh.lo, sh.n, sh.v);
  }
  releaseMoments();
}

void ShardedOptimizer::releaseMoments() {
  for (exec::ParamSlot &s : store.slots()) {
    s.m = exec::HostArray();
    s.v = exec::HostArray();
  }
  fullMoments.clear();
  fullMoments.shrink_to_fit();
}

} // namespace mtc::driver
