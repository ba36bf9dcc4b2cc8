//===- DataParallel.cpp - A training run's share among its ranks ----------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/dataparallel/DataParallel.h"

#include "lib/Support/Hash.h"
#include "runtime/dataparallel/DeviceReduce.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace mtc::driver {

bool splitsMicroBatches(const TrainOptions &opts) {
  return opts.deterministicReduce && opts.world && opts.world->size() > 1;
}

int64_t rankBatch(const TrainOptions &opts) {
  int n = opts.world ? opts.world->size() : 1;
  return splitsMicroBatches(opts) ? opts.batch : opts.batch / n;
}

int64_t rankMicroBatches(const TrainOptions &opts) {
  return splitsMicroBatches(opts) ? opts.microBatches / opts.world->size()
                                  : opts.microBatches;
}

bool shardsOptimizer(const TrainOptions &opts) {
  // The bit-identical sums need whole gradients on every rank (the norm is
  // one process's sum of squares): auto is off under --deterministic-reduce.
  return opts.world && opts.world->size() > 1 &&
         (opts.shardOptimizer == "on" ||
          (opts.shardOptimizer == "auto" && !opts.deterministicReduce));
}

Status openDataParallel(TrainOptions &opts) {
  if (opts.dataParallel != "auto" && opts.dataParallel != "mpi" &&
      opts.dataParallel != "off")
    return Status::error("train: --data-parallel expects auto, mpi or off, "
                         "got '" +
                         opts.dataParallel + "'");
  if (opts.shardOptimizer != "auto" && opts.shardOptimizer != "on" &&
      opts.shardOptimizer != "off")
    return Status::error("train: --shard-optimizer expects auto, on or off, "
                         "got '" +
                         opts.shardOptimizer + "'");
  if (Status st = checkDistBackend(opts); !st)
    return st;
  Expected<std::shared_ptr<dist::Communicator>> w =
      dist::openWorld(opts.dataParallel);
  if (!w)
    return w.status().withPrefix("train");
  opts.world = *w;
  const int n = opts.world->size();
  if (n > 1 && opts.deterministicReduce) {
    // Whole micro-batches per rank (docs/distributed.md, "Bits").
    if (opts.shardOptimizer == "on")
      return Status::error(
          "train: --deterministic-reduce sums whole gradients in one "
          "process's order (and their norm with them), which the sharded "
          "optimizer's per-rank parts cannot reproduce: leave out "
          "--shard-optimizer on (auto is off with --deterministic-reduce)");
    if (opts.microBatches % n != 0)
      return Status::error(
          "train: --deterministic-reduce gives each rank whole "
          "micro-batches: --micro-batches " +
          std::to_string(opts.microBatches) + " is not divisible by the " +
          std::to_string(n) + " ranks; pass a multiple of " +
          std::to_string(n));
    return Status::success();
  }
  if (opts.batch % n != 0)
    return Status::error(
        "train: --batch " + std::to_string(opts.batch) +
        " (the global batch) is not divisible by the " + std::to_string(n) +
        " ranks; each rank trains on an equal share of every micro-batch");
  return Status::success();
}

Expected<std::unique_ptr<DataParallel>>
DataParallel::create(std::shared_ptr<dist::Communicator> world,
                     const bundle::Bundle &b, exec::ParamStore &store) {
  Expected<std::unique_ptr<dist::GradientReducer>> reducer =
      dist::GradientReducer::create(*world);
  if (!reducer)
    return reducer.status();
  std::unique_ptr<DataParallel> dp(
      new DataParallel(std::move(world), std::move(*reducer)));
  for (exec::ParamSlot &s : store.slots())
    dp->all.push_back(&s);
  for (const bundle::Layer &l : b.layers)
    for (int64_t i = 0; i < l.count; ++i) {
      std::vector<exec::ParamSlot *> &g = dp->instances[{l.name, i}];
      for (const bundle::Param &pr : l.params)
        g.push_back(store.layer(l.name, i, pr.name));
      for (const bundle::Expert &x : l.experts)
        for (int64_t e = 0; e < x.count; ++e)
          for (const bundle::Param &pr : x.params)
            g.push_back(store.expert(l.name, i, x.name, e, pr.name));
    }
  return dp;
}

namespace {

/// xxh64 of this process's executable (0 if it cannot be read).
uint64_t executableHash() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  return in.bad() ? 0 : xxh64(bytes.data(), bytes.size());
}

/// The model as the ranks must agree on it: its hash, config and parameters.
uint64_t modelHash(const bundle::Bundle &b) {
  std::ostringstream s;
  s << b.model << '\n' << b.modelHash << '\n';
  for (const auto &[k, v] : b.config)
    s << k << '=' << v << '\n';
  auto params = [&](const std::vector<bundle::Param> &ps) {
    for (const bundle::Param &p : ps) {
      s << p.name << ':';
      for (int64_t d : p.shape)
        s << d << ',';
      s << '\n';
    }
  };
  params(b.params);
  for (const bundle::Layer &l : b.layers) {
    s << l.name << 'x' << l.count << '\n';
    params(l.params);
    for (const bundle::Expert &x : l.experts) {
      s << x.name << 'x' << x.count << '\n';
      params(x.params);
    }
  }
  s << (b.step ? "plan" : "no plan") << '\n';
  std::string t = s.str();
  return xxh64(t.data(), t.size());
}

/// The options every rank must share (outputs and thread counts may differ).
uint64_t optionsHash(const TrainOptions &o) {
  std::ostringstream s;
  s.precision(17);
  s << o.data << '|' << o.dataFormat << '|' << o.steps << '|' << o.batch << '|'
    << o.seq << '|' << o.microBatches << '|' << o.lr << '|' << o.warmup << '|'
    << o.minLrRatio << '|' << o.weightDecay << '|' << o.beta1 << '|' << o.beta2
    << '|' << o.eps << '|' << o.clip << '|' << o.optimizerPlacement << '|'
    << o.seed << '|' << o.evalEvery << '|' << o.evalBatches << '|'
    << o.valFraction << '|' << o.saveEvery << '|' << o.useKernels << '|'
    << o.initFrom << '|' << o.resume << '|' << o.stopAfter << '|'
    << o.deviceMemory << '|' << deviceKindName(o.device) << '|' << o.hfWeights
    << '|' << o.tokenizer << '|' << o.shardOptimizer << '|'
    << o.deterministicReduce << '|' << o.distBackend;
  std::string t = s.str();
  return xxh64(t.data(), t.size());
}

} // namespace

Status DataParallel::checkConsistent(dist::Communicator &world,
                                     const bundle::Bundle &b,
                                     const TrainOptions &opts) {
  const int n = world.size();
  uint64_t mine[3] = {executableHash(), modelHash(b), optionsHash(opts)};
  std::vector<uint64_t> every(3 * static_cast<size_t>(n));
  if (Status st = world.allgather(mine, every.data(),
                                  std::vector<int64_t>(n, sizeof mine));
      !st)
    return st;
  static const char *what[3] = {
      "executable (another build of the tool)",
      "model (another model file, config or compilation)",
      ("training options (flags that must agree: data, batch, seq, steps, "
       "schedule, optimizer, seed, device, ...)")};
  for (int r = 1; r < n; ++r)
    for (int k = 0; k < 3; ++k)
      if (every[3 * r + k] != every[k])
        return Status::error("data-parallel ranks disagree: rank " +
                             std::to_string(r) + "'s " + what[k] +
                             " differs from rank 0's; launch every rank with "
                             "the same binary, model and flags");
  return Status::success();
}

void DataParallel::beginStep() {
  std::lock_guard<std::mutex> g(mu);
  summed.clear();
  reducer->resetStats();
  if (deviceReduce)
    deviceReduce->beginStep();
}

void DataParallel::setDeviceReduce(DeviceReduce *r) {
  deviceReduce = r;
  summedComm = alreadySummed(rank(), size());
}

int64_t DataParallel::allreduceBytes() const {
  return reducer->bytes() + (deviceReduce ? deviceReduce->bytes() : 0);
}

double DataParallel::exposedSeconds() const {
  return reducer->exposedSeconds() +
         (deviceReduce ? deviceReduce->exposedSeconds() : 0);
}

void DataParallel::enqueue(const std::vector<exec::ParamSlot *> &slots) {
  dist::GradientReducer::Buffers bufs;
  std::vector<exec::ParamSlot *> todo;
  std::vector<const float *> grads;
  {
    std::lock_guard<std::mutex> g(mu);
    for (exec::ParamSlot *s : slots) {
      bool &done = summed[s];
      if (done || s->grad.empty())
        continue;
      done = true;
      bufs.push_back({s->grad.data(), static_cast<int64_t>(s->grad.size())});
      todo.push_back(s);
      grads.push_back(s->grad.data());
    }
  }
  if (bufs.empty())
    return;
  if (deviceReduce) {
    // Summed on the device already: a sharded optimizer keeps its range.
    if (sharded)
      reducer->enqueue([this, todo = std::move(todo), grads = std::move(grads)](
                           dist::Communicator &, int64_t &) {
        int64_t counted = 0; // the device's sum counts these bytes
        return sharded->scatter(*summedComm, todo, grads, counted);
      });
    return;
  }
  if (!sharded) {
    reducer->enqueue(sumJob(std::move(bufs)));
    return;
  }
  reducer->enqueue([this, todo = std::move(todo), grads = std::move(grads)](
                       dist::Communicator &c, int64_t &bytes) {
    return sharded->scatter(c, todo, grads, bytes);
  });
}

dist::GradientReducer::Job
DataParallel::sumJob(dist::GradientReducer::Buffers bufs) const {
  return [bufs = std::move(bufs), det = deterministic](dist::Communicator &c,
                                                       int64_t &bytes) {
    for (const auto &[p, n] : bufs) {
      if (Status st = det ? dist::orderedSum(c, p, n) : c.allreduceSum(p, n);
          !st)
        return st;
      bytes += 4 * n;
    }
    return Status::success();
  };
}

Status DataParallel::scatterNow(const std::vector<exec::ParamSlot *> &slots,
                                const std::vector<const float *> &grads) {
  return reducer->runNow([&](dist::Communicator &c, int64_t &bytes) {
    if (deviceReduce) {
      int64_t counted = 0; // the device's sum counts these bytes
      return sharded->scatter(*summedComm, slots, grads, counted);
    }
    return sharded->scatter(c, slots, grads, bytes);
  });
}

Status DataParallel::shardedUpdate(train::AdamW &adamw, int64_t step, float lr,
                                   float gradScale) {
  return reducer->runNow([&](dist::Communicator &c, int64_t &bytes) {
    return sharded->update(c, adamw, step, lr, gradScale, bytes);
  });
}

Status DataParallel::gatherMoments(bool gather) {
  return reducer->runNow([&](dist::Communicator &c, int64_t &) {
    return sharded->gatherMoments(c, gather);
  });
}

void DataParallel::instanceDone(const std::string &layer, int64_t instance) {
  auto it = instances.find({layer, instance});
  if (it != instances.end())
    enqueue(it->second);
}

void DataParallel::slotsDone(const std::vector<exec::ParamSlot *> &slots) {
  enqueue(slots);
}

Status DataParallel::finishGradients() {
  enqueue(all);
  Status st = reducer->wait();
  if (st && deviceReduce)
    return deviceReduce->check();
  return st;
}

Status DataParallel::reduceNow(const std::vector<exec::ParamSlot *> &slots,
                               const std::vector<const float *> &grads) {
  if (deviceReduce)
    return Status::success(); // summed on the device before the copy
  dist::GradientReducer::Buffers bufs;
  for (size_t i = 0; i < slots.size(); ++i)
    bufs.push_back({const_cast<float *>(grads[i]),
                    static_cast<int64_t>(slots[i]->value.size())});
  return reducer->runNow(sumJob(bufs));
}

void DataParallel::setTrace(device::Trace *trace) {
  // One span per job of the reducer: an instance's gradients summed (or
  // reduce-scattered), and with a sharded optimizer the step's update and
  // all-gather.
  const int track = trace->track("reduce");
  reducer->setObserver([trace, track](auto begin, auto end, int64_t bytes) {
    trace->span(track, "collectives " + std::to_string(bytes) + " bytes", begin,
                end, "reduce");
  });
}

namespace {

/// Every rank's \p parts buffers of \p n elements (\p parts(k), k <
/// \p count), gathered, and added one by one from 0 in rank order into
/// \p out (n elements).
template <typename T, typename Part>
Status gatherInOrder(dist::Communicator &c, int64_t n, int64_t count,
                     Part parts, T *out, int64_t &bytes) {
  std::vector<T> mine(static_cast<size_t>(n * count));
  for (int64_t k = 0; k < count; ++k)
    std::copy(parts(k), parts(k) + n, mine.begin() + k * n);
  std::vector<T> all(mine.size() * static_cast<size_t>(c.size()));
  if (Status st =
          c.allgather(mine.data(), all.data(),
                      std::vector<int64_t>(c.size(), sizeof(T) * n * count));
      !st)
    return st;
  bytes += static_cast<int64_t>(sizeof(T)) * n * count;
  const int64_t total = count * c.size();
  for (int64_t i = 0; i < n; ++i) {
    T s = 0;
    for (int64_t q = 0; q < total; ++q)
      s += all[static_cast<size_t>(q * n + i)];
    out[i] = s;
  }
  return Status::success();
}

} // namespace

Expected<double> DataParallel::sumInOrder(const std::vector<double> &mine) {
  double v = 0;
  int64_t bytes = 0;
  if (Status st = gatherInOrder<double>(
          *world, 1, static_cast<int64_t>(mine.size()),
          [&](int64_t k) { return &mine[k]; }, &v, bytes);
      !st)
    return st;
  return v;
}

Status DataParallel::sumGradientsInOrder(
    const std::vector<std::vector<std::vector<float>>> &earlier) {
  const int64_t count = static_cast<int64_t>(earlier.size()) + 1;
  for (size_t i = 0; i < all.size(); ++i) {
    exec::ParamSlot *s = all[i];
    if (s->grad.empty())
      continue;
    {
      std::lock_guard<std::mutex> g(mu);
      summed[s] = true;
    }
    reducer->enqueue(
        [&earlier, s, i, count](dist::Communicator &c, int64_t &bytes) {
          const int64_t n = static_cast<int64_t>(s->grad.size());
          auto part = [&](int64_t k) -> const float * {
            return k + 1 == count ? s->grad.data() : earlier[k][i].data();
          };
          return gatherInOrder<float>(c, n, count, part, s->grad.data(), bytes);
        });
  }
  return reducer->wait();
}

Expected<double> DataParallel::sum(double v) {
  if (Status st = deterministic ? dist::orderedSum(*world, &v, 1)
                                : world->allreduceSum(&v, 1);
      !st)
    return st;
  return v;
}

Expected<double> DataParallel::mean(double v) {
  if (Status st = deterministic ? dist::orderedSum(*world, &v, 1)
                                : world->allreduceSum(&v, 1);
      !st)
    return st;
  return v / size();
}

Expected<bool> DataParallel::any(bool v) {
  double x = v ? 1 : 0;
  if (Status st = world->allreduceSum(&x, 1); !st)
    return st;
  return x > 0;
}

} // namespace mtc::driver
