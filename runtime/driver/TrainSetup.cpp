//===- TrainSetup.cpp - What a run creates before its steps -----*- C++ -*-===//
//
// Part of mtc. The stages of TrainRun (TrainRun.h) that create the parameter
// state and its starting weights, the executors and the device of --device,
// data parallelism, the optimizer and the metrics, and print the header.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/TrainRun.h"

#include "lib/Bundle/Plan.h"
#include "runtime/checkpoint/InitWeights.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/device/CpuDevice.h"
#include "runtime/device/CudaDevice.h"
#include "runtime/dist/Communicator.h"
#include "runtime/dist/LocalRank.h"
#include "runtime/driver/DeviceSelect.h"
#include "runtime/exec/cuda/CudaBackend.h"
#include "runtime/hf/HFWeights.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace mtc::driver {

namespace {

/// --trace-ops: each op the executor runs as a span on the compute track,
/// named "OP [d0,d1,...]" by its first result's shape.
exec::Executor::OpTimer opSpans(device::Trace &trace) {
  int track = trace.track("compute");
  return
      [&trace, track](const bundle::Op &op, const std::vector<int64_t> &shape,
                      device::Trace::Clock::time_point begin,
                      device::Trace::Clock::time_point end) {
        std::string name = op.name + " [";
        for (size_t i = 0; i < shape.size(); ++i)
          name += (i ? "," : "") + std::to_string(shape[i]);
        trace.span(track, name + "]", begin, end, "op");
      };
}

} // namespace

Status TrainRun::createState() {
  exec::HostStateOptions hopts;
  hopts.file = opts.hostStateFile;
  // Ranks on one node map files of their own (PATH.rank1, ...).
  if (rank > 0 && !hopts.file.empty())
    hopts.file += ".rank" + std::to_string(rank);
  hopts.gradients = !immediate && !(shard && ringGrads); // through the ring
  hopts.moments = !shard; // each rank's part: ShardedOptimizer
  hopts.bf16Gradients = bf16Store;
  Expected<std::unique_ptr<exec::ParamStore>> created =
      exec::ParamStore::create(b, hopts);
  if (!created)
    return created.status();
  store = std::move(*created);
  // Streaming copies weights from and gradients to this memory: pinned,
  // they can be asynchronous on a GPU (best effort).
  if (b.step)
    store->pin(&unpinned);
  if (shard)
    sharded = std::make_unique<ShardedOptimizer>(rank, ranks, *store);
  if (ckDir.empty()) {
    store->initialize(opts.seed);
    return Status::success();
  }
  // A sharded optimizer reads the whole moments, then keeps its part.
  if (sharded)
    (void)sharded->gatherMoments(*opts.world, /*gather=*/false);
  Expected<TrainerState> state =
      readCheckpoint(ckDir, b, *store, &notes, opts.allowModelChange);
  if (sharded)
    state ? sharded->keepShards() : sharded->releaseMoments();
  if (!state)
    return state.status();
  startStep = state->step;
  if (startStep == opts.steps) {
    out << "the checkpoint is at --steps " << opts.steps
        << "; nothing to train (raise --steps to continue)\n";
    nothingToTrain = true;
  }
  return Status::success();
}

Status TrainRun::initializeWeights() {
  if (!opts.initFrom.empty()) {
    if (!ckDir.empty() || !opts.hfWeights.empty())
      return Status::error("--init-from starts a new run from given weights; " +
                           (ckDir.empty()
                                ? "the --hf directory '" + opts.hfWeights +
                                      "' has weights of its own (give one or "
                                      "the other)"
                                : std::string("--resume continues one from its "
                                              "checkpoint (give one or the "
                                              "other)")));
    // An mtc checkpoint (trainer_state.json, or a write of one under
    // way) is read whole from one checkpoint while a run may replace it.
    namespace fs = std::filesystem;
    std::string from = opts.initFrom;
    while (from.size() > 1 && from.back() == '/')
      from.pop_back();
    std::error_code ec;
    const bool checkpoint = fs::exists(from + "/trainer_state.json", ec) ||
                            (!fs::exists(from, ec) &&
                             fs::exists(from + ".bak/trainer_state.json", ec));
    size_t n = 0;
    auto load = [&](const std::string &path) {
      Expected<size_t> read = loadInitWeights(*store, path);
      n = read ? *read : 0;
      return read.status();
    };
    if (Status st =
            checkpoint ? readStableCheckpoint(from, load) : load(opts.initFrom);
        !st.ok())
      return st;
    out << "initialised from " << opts.initFrom << " (" << n << " tensors)\n";
  }
  if (!opts.hfWeights.empty() && ckDir.empty()) {
    if (Status st = loadHFWeights(*store, b, opts.hfWeights); !st.ok())
      return st;
    out << "initialised from " << opts.hfWeights << "\n";
  }
  return Status::success();
}

Status TrainRun::createExecutors() {
  Expected<std::unique_ptr<exec::Executor>> host =
      exec::Executor::create(b, *store);
  if (!host)
    return host.status();
  ex = std::move(*host);
  if (opts.useKernels)
    if (Status st = ex->useBundleKernels(); !st.ok())
      return st;
  return b.step ? createStreaming() : Status::success();
}

Status TrainRun::createStreaming() {
  const bundle::StepPlan &plan = *b.step;
  if (plan.batch != localBatch || plan.seq != opts.seq ||
      plan.microBatches != localMicroBatches) {
    std::string ours = std::to_string(localBatch) + " / " +
                       std::to_string(opts.seq) + " / " +
                       std::to_string(localMicroBatches);
    std::string hint = "; pass those";
    if (splitMB) {
      ours += " (--micro-batches " + std::to_string(opts.microBatches) +
              " over " + std::to_string(ranks) +
              " ranks with --deterministic-reduce: each rank runs whole "
              "micro-batches of all --batch rows)";
      hint = "; recompile it for --batch " + std::to_string(opts.batch) +
             " --micro-batches " + std::to_string(localMicroBatches) +
             " (mtc compile --device-memory ...)";
    } else if (ranks > 1) {
      ours = std::to_string(localBatch) + " (--batch " +
             std::to_string(opts.batch) + " over " + std::to_string(ranks) +
             " ranks) / " + std::to_string(opts.seq) + " / " +
             std::to_string(opts.microBatches);
      hint = "; with " + std::to_string(ranks) + " ranks pass --batch " +
             std::to_string(plan.batch * ranks) +
             " (each rank runs the plan's batch) or recompile the plan "
             "(mtc compile --device-memory ...)";
    } else {
      hint += " or recompile the plan (mtc compile --device-memory ...)";
    }
    return Status::error(
        "the bundle's step plan is for --batch " + std::to_string(plan.batch) +
        " --seq " + std::to_string(plan.seq) + " --micro-batches " +
        std::to_string(plan.microBatches) + ", not " + ours + hint);
  }
  if (!opts.useKernels)
    return Status::error(
        "--kernels off cannot run a step plan: interpreted "
        "fused regions allocate temporaries the memory plan does not "
        "count (use --kernels on, or train without --device-memory)");
  int64_t budget =
      opts.deviceMemory > 0 ? opts.deviceMemory : plan.deviceBudget;
  if (budget < plan.devicePeak)
    return Status::error(
        "the step plan needs " + std::to_string(plan.devicePeak) +
        " bytes of device memory; the device has " + std::to_string(budget));
  if (Status st = createDevice(budget); !st.ok())
    return st;
  if (!opts.trace.empty())
    streamDevice->setTrace(&trace);
  Expected<std::unique_ptr<exec::Executor>> onDevice = exec::Executor::create(
      b, *store, backend ? *backend : exec::cpuDeviceBackend());
  if (!onDevice)
    return onDevice.status().withPrefix(std::string("--device ") +
                                        deviceKindName(opts.device));
  streamEx = std::move(*onDevice);
  if (opts.traceOps)
    streamEx->setOpTimer(opSpans(trace));
  if (!backend)
    if (Status st = streamEx->useBundleKernels(); !st.ok())
      return st;
  Expected<std::unique_ptr<stream::StreamExecutor>> s =
      stream::StreamExecutor::create(b, *store, *streamEx, *streamDevice);
  if (!s)
    return s.status();
  streamer = std::move(*s);
  return Status::success();
}

Status TrainRun::createDevice(int64_t budget) {
  const DeviceKindInfo &kind = deviceKindInfo(opts.device);
  if (!kind.gpu) {
    Expected<std::unique_ptr<device::CpuDevice>> cpu =
        device::CpuDevice::create(budget);
    if (!cpu)
      return cpu.status();
    streamDevice = std::move(*cpu);
    return Status::success();
  }
  // The CUDA backend over the real driver or the emulated one.
  Expected<std::shared_ptr<const cuda::CudaDriverApi>> driver =
      openCudaDriverFor(opts.device);
  if (!driver)
    return Status::error(std::string("--device ") + kind.name + ": " +
                         driver.message());
  // Several ranks of a node: each opens the GPU of its local rank.
  int ordinal = 0;
  if (ranks > 1) {
    Expected<int> local = dist::localRankFromEnvironment();
    if (!local)
      return local.status();
    int count = 0;
    if ((*driver)->cuDeviceGetCount(&count) == 0)
      ordinal = dist::gpuForLocalRank(*local, count);
  }
  Expected<std::unique_ptr<device::CudaDevice>> opened =
      device::CudaDevice::create(*driver, budget, ordinal);
  if (!opened)
    return opened.status();
  std::unique_ptr<device::CudaDevice> gpu = std::move(*opened);
  // Weights are copied from the values block and gradients into the grads
  // block: pinned, those copies are asynchronous DMA. Best effort:
  // unpinned, the same copies are synchronous but correct.
  const int64_t blockBytes = static_cast<int64_t>(4 * store->blockElements());
  for (auto kind :
       {exec::ParamStore::Kind::Value, exec::ParamStore::Kind::Grad})
    if (store->block(kind))
      (void)gpu->registerHost(store->block(kind), blockBytes);
  Expected<std::unique_ptr<exec::CudaBackend>> be =
      exec::CudaBackend::create(*gpu);
  if (!be)
    return Status::error(std::string("--device ") + kind.name + ": " +
                         be.message());
  backend = std::move(*be);
  streamDevice = std::move(gpu);
  return Status::success();
}

Status TrainRun::createDataParallel() {
  // --dist-backend: with NCCL each group's gradients are summed on the
  // device before their copy to the host (dataparallel/DeviceReduce.h).
  Expected<std::unique_ptr<DeviceReduce>> nccl = openDeviceReduce(
      opts, streamer ? streamDevice.get() : nullptr,
      streamer ? streamer->computeStream() : device::Stream(), out);
  if (!nccl)
    return nccl.status();
  deviceReduce = std::move(*nccl);
  if (deviceReduce)
    streamer->setDeviceReduceHook(
        [r = deviceReduce.get()](
            device::Stream s,
            const std::vector<std::pair<int64_t, int64_t>> &ranges,
            bool last) { return r->reduce(s, ranges, last); });
  if (ranks == 1)
    return Status::success();
  Expected<std::unique_ptr<DataParallel>> d =
      DataParallel::create(opts.world, b, *store);
  if (!d)
    return d.status();
  dp = std::move(*d);
  dp->setSharded(sharded.get());
  if (deviceReduce)
    dp->setDeviceReduce(deviceReduce.get());
  dp->setDeterministic(opts.deterministicReduce);
  if (sharded)
    sharded->setDeterministic(opts.deterministicReduce);
  if (!opts.trace.empty() && streamDevice)
    dp->setTrace(&trace);
  if (streamer && shard && ringGrads)
    // Each group's gradients are reduce-scattered out of the ring slot on
    // the optimizer stream, as soon as they are there.
    return streamer->updateImmediately(
        [this](const std::vector<exec::ParamSlot *> &ss,
               const std::vector<const float *> &grads) {
          if (Status st = dp->scatterNow(ss, grads); !st)
            throw std::runtime_error(st.message());
        });
  if (streamer)
    streamer->setGradsReadyHook(
        [this](const std::vector<exec::ParamSlot *> &ss) {
          dp->slotsDone(ss);
        });
  return Status::success();
}

Status TrainRun::createOptimizer() {
  pool = std::make_unique<ThreadPool>(cpu::threads());
  acfg.beta1 = static_cast<float>(opts.beta1);
  acfg.beta2 = static_cast<float>(opts.beta2);
  acfg.eps = static_cast<float>(opts.eps);
  acfg.weightDecay = static_cast<float>(opts.weightDecay);
  adamw.emplace(acfg, pool.get());
  // The deferred updates run on the optimizer stream while the compute
  // stream's kernels run: on their own pool of the cores the kernels leave
  // free (at least one thread), so that they do not fight the kernels'
  // pool (on the CPU device the kernels use cpu::threads() cores; a GPU
  // device would leave the optimizer every core). An update is
  // elementwise, so the thread count does not change the result.
  unsigned optThreads = static_cast<unsigned>(opts.optimizerThreads);
  if (optThreads == 0) {
    unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    unsigned kernels = static_cast<unsigned>(std::max(1, cpu::threads()));
    optThreads = hw > kernels ? hw - kernels : 1;
  }
  if (streamer && optThreads > 1)
    optPool = std::make_unique<ThreadPool>(optThreads);
  deferredAdamW.emplace(acfg, optPool.get());
  for (exec::ParamSlot &s : store->slots())
    tensors.push_back({s.value.data(), s.m.data(), s.v.data(), s.grad.data(),
                       s.value.size(), s.decay()});
  sched.peakLr = opts.lr;
  sched.warmupSteps = opts.warmup;
  sched.totalSteps = opts.steps;
  sched.minLrRatio = opts.minLrRatio;
  sampler.emplace(*data, opts.batch, opts.seed);
  return Status::success();
}

Status TrainRun::openMetrics() {
  if (opts.metrics.empty() || rank != 0)
    return Status::success();
  Status trimmed =
      startStep > 0 ? trimMetrics(opts.metrics, startStep) : Status::success();
  Expected<train::JsonlWriter> w =
      trimmed.ok() ? train::JsonlWriter::open(opts.metrics, startStep > 0)
                   : Expected<train::JsonlWriter>(trimmed);
  if (!w)
    return w.status();
  metrics = std::move(*w);
  haveMetrics = true;
  return Status::success();
}

Status TrainRun::printHeader() {
  tokensPerStep = opts.batch * opts.seq * opts.microBatches;
  out << "model " << b.model << ": " << store->totalParams() << " parameters, "
      << b.totalLayerInstances() << " layer instances\n"
      << "data " << opts.data << ": " << data->trainTokens()
      << " training tokens, " << data->valTokens() << " validation tokens ("
      << train::tokenFileFormatName(data->format()) << ")\n";
  if (data->hasMask())
    out << "loss mask " << data->maskPath() << ": "
        << data->trainedTokens(1, data->trainTokens())
        << " trained training targets, "
        << data->trainedTokens(data->trainTokens() + 1, data->numTokens())
        << " trained validation targets; masked targets are "
        << data->ignoreIndex() << " (the model's ignore_index)\n";
  out << "step: " << opts.microBatches << " x " << opts.batch << " x "
      << opts.seq << " = " << tokensPerStep << " tokens, " << cpu::threads()
      << " threads, ";
  if (auto *cb = dynamic_cast<exec::CudaBackend *>(backend.get()))
    out << "device " << streamDevice->name() << " (CUDA kernels, GEMMs on "
        << cb->gemmName() << ", fused regions as CUDA C)\n";
  else
    out << "fused kernels "
        << (b.cpuKernels.empty() || !opts.useKernels
                ? std::string("interpreted")
                : "compiled for " + b.cpuKernelsTarget)
        << "\n";
  if (dp && splitMB)
    out << "data parallel: " << ranks << " ranks over " << opts.world->name()
        << ", " << localMicroBatches << " whole micro-batch"
        << (localMicroBatches == 1 ? "" : "es")
        << " each (--deterministic-reduce); gradients and losses summed in "
           "one process's order\n";
  else if (dp)
    out << "data parallel: " << ranks << " ranks over " << opts.world->name()
        << ", " << localBatch << " rows of every micro-batch each; gradients "
        << (sharded ? "reduce-scattered" : "summed")
        << " per layer instance while the backward runs\n";
  if (dp && rank == 0 && dist::launchedUnderMpi())
    out << "stop: send SIGUSR1 to mpirun to stop after a step with a "
           "checkpoint (Open MPI forwards it; on SIGINT or SIGTERM it ends "
           "the ranks itself within a second)\n";
  if (deviceReduce)
    out << "dist backend: nccl, " << deviceReduce->description()
        << ": each group's fp32 gradients summed on the device (stream "
           "nccl) before their copy to the host\n";
  else if (dp)
    out << "dist backend: mpi (gradients summed in host memory)\n";
  if (sharded)
    out << "optimizer: sharded (each rank: AdamW m, v and the summed "
           "gradient of 1/"
        << ranks << " of every tensor, " << sharded->hostBytes()
        << " bytes; updated values all-gathered)\n";
  for (const std::string &n : notes)
    out << "note: " << n << "\n";
  if (startStep > 0)
    out << "resumed from " << ckDir << " at step " << startStep << " (loss "
        << ck.loss << ")\n";
  out.flush();

  in.assign(opts.batch * opts.seq, 0);
  tg.assign(opts.batch * opts.seq, 0);
  hostBytes = store->hostBytes() + (sharded ? sharded->hostBytes() : 0);
  if (streamer) {
    streamIn.assign(opts.microBatches, in);
    streamTg.assign(opts.microBatches, tg);
    hostBytes += streamer->hostBytes();
    const bundle::StepPlan &plan = streamer->plan();
    out << "streaming: device memory " << streamDevice->capacity()
        << " bytes (plan peak " << plan.devicePeak << "), prefetch depth "
        << plan.prefetchDepth << ", recompute " << plan.recompute
        << (plan.checkpointEvery > 1
                ? " (checkpoint every " + std::to_string(plan.checkpointEvery) +
                      " instances)"
                : std::string())
        << (plan.selectiveLayers >= 0
                ? " for the first " + std::to_string(plan.selectiveLayers) +
                      " layer instances, full for the rest"
                : std::string())
        << ", checkpoints " << plan.checkpoints << ", host " << hostBytes
        << " bytes\n";
    if (backend) {
      // The CUDA backend's own allocations beside the plan's arena, and
      // what the driver reports in use (docs/cuda.md, "Device memory").
      auto *gpu = static_cast<device::CudaDevice *>(streamDevice.get());
      Expected<std::pair<int64_t, int64_t>> info = gpu->memoryInfo();
      if (!info)
        return info.status().withPrefix("device");
      auto [free, total] = *info;
      out << "device memory beside the plan: CUDA backend "
          << exec::CudaBackend::deviceBytes()
          << " bytes (scratch and flags); device total "
          << streamDevice->capacity() + exec::CudaBackend::deviceBytes()
          << " bytes; in use on the device " << total - free << " of " << total
          << "\n";
    }
    if (!sharded)
      out << "optimizer: "
          << (immediate ? "immediate (AdamW as soon as a layer's gradient is "
                          "final; gradients through a ring of " +
                              std::to_string(streamer->gradRingSlots()) +
                              " slots in host memory)"
                        : std::string("deferred (AdamW of each layer just "
                                      "before its next load)"))
          << "\n";
    if (bf16Store)
      out << "gradients: bf16 in host memory (--grad-dtype bf16: rounded "
             "from the device's fp32 sums as they are copied back; "
          << bundle::kBf16GradStateBytesPerParam << " B/param of state)\n";
  }
  if (bf16Grads && !streamer)
    out << "gradients: accumulated in fp32, rounded to bf16 before the "
           "norm and AdamW (--grad-dtype bf16)\n";
  if (streamer || store->fileBacked()) {
    out << "host state: " << store->hostBytes() << " bytes";
    if (store->fileBacked())
      out << " mapped from " << opts.hostStateFile;
    if (streamer)
      out << (unpinned.empty() ? ", pinned" : ", not pinned: " + unpinned);
    out << "\n";
  }
  return Status::success();
}

} // namespace mtc::driver
