//===- TrainRun.h - One training run, stage by stage ------------*- C++ -*-===//
//
// Part of mtc. Private to runtime/driver: the run train() makes, one object
// whose stages are spread over the files named after them:
//
//   Train.cpp        the entry point and the stages in order
//   TrainChecks.cpp  what is checked before anything is allocated: the
//                    model and the optimizer placement, the ranks, the
//                    outputs, the data, the checkpoint to resume, the host
//                    memory
//   TrainSetup.cpp   the parameter state, the starting weights, the
//                    executors and the device, data parallelism, the
//                    optimizer, the metrics and the header lines
//   TrainStep.cpp    the step loop: forward and backward, the update (deferred,
//                    immediate or sharded), metrics, evaluation, checkpoints,
//                    stop signals and the end of the run
//
// Generation (the sample, `generate`) is Generate.h's.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_TRAINRUN_H
#define MTC_RUNTIME_DRIVER_TRAINRUN_H

#include "lib/Support/ThreadPool.h"
#include "lib/Tokenizer/Tokenizer.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/dataparallel/DataParallel.h"
#include "runtime/dataparallel/DeviceReduce.h"
#include "runtime/dataparallel/ShardedOptimizer.h"
#include "runtime/device/Device.h"
#include "runtime/device/Trace.h"
#include "runtime/driver/Train.h"
#include "runtime/exec/Backend.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/stream/StreamExecutor.h"
#include "runtime/train/Data.h"
#include "runtime/train/Metrics.h"
#include "runtime/train/Optimizer.h"
#include "runtime/train/Schedule.h"

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace mtc::driver {

/// Installs the stop handler for SIGINT, SIGTERM and SIGUSR1 while alive
/// (TrainStep.cpp): the first such signal asks the run to stop after the
/// current step (with a checkpoint), a second one ends the process at once.
class StopSignals {
public:
  /// \p tool names the program in the message.
  explicit StopSignals(const std::string &tool);
  ~StopSignals();
  /// The signal received (0: none).
  int received() const;

private:
  struct sigaction oldInt {
  }, oldTerm{}, oldUsr1{};
};

/// One `train` run, as the steps it takes in order: the model, the outputs,
/// the data, the checkpoint to resume, the host memory, the parameter state,
/// the streaming device, the optimizer and metrics, then the step loop (each
/// step: forward and backward, the update, metrics, evaluation, saving) and
/// the end (trace, summary, sample). Each step returns a Status: the first
/// error ends the run, printed once as "TOOL: error: MESSAGE".
class TrainRun {
public:
  TrainRun(const bundle::Bundle &b, const TrainOptions &opts, std::ostream &out,
           std::ostream &err)
      : b(b), opts(opts), out(out), err(err) {}

  /// Runs every stage; returns the process exit code (Train.cpp).
  int run();

private:
  // Train.cpp
  /// Prints "TOOL: error: MESSAGE" and returns 1.
  int fail(const Status &st);
  /// "rank R of N: " in a data-parallel run ("" otherwise).
  std::string rankTag() const;

  // TrainChecks.cpp
  /// The model can be trained at --batch and --seq; the optimizer
  /// placement (immediate needs clip 0 and the plan's gradient ring).
  Status checkModel();
  /// Data parallelism (docs/distributed.md): this rank and the ranks, and
  /// before anything is allocated, every rank's binary, model and options
  /// against rank 0's.
  Status checkRanks();
  /// --deterministic-reduce with several ranks: what the bit-identical sums
  /// need. A step plan accumulates a rank's micro-batches in one device
  /// buffer, so it must run one micro-batch per rank; a parameter with
  /// several param_grads in one function (several gradient terms per
  /// micro-batch) is added to the running sum term by term in one process.
  Status checkSplitMicroBatches();
  /// Outputs against inputs first (nothing is touched yet), then the one
  /// writer of --out, before any training time is spent.
  Status claimOutputs();
  /// The tokenizer, the loss mask and the token data.
  Status openData();
  /// Checkpoints (checkpoint/Checkpoint.h): the data file's identity, the --out
  /// directory, and with --resume the checkpoint's state against these
  /// options, all checked before anything is allocated.
  Status checkResume();
  /// Checked before allocating: parameters, gradients and AdamW moments
  /// (16 bytes per parameter), the step's working set, and under streaming
  /// the CPU device's memory and the plan's host buffers, each named.
  Status checkHostMemory();

  // TrainSetup.cpp
  /// The parameter state, pinned under streaming, read from the checkpoint
  /// with --resume or initialised from the seed.
  Status createState();
  /// --init-from and --hf weights over the initialised state.
  Status initializeWeights();
  /// The host executor (validation, sampling, and steps without a plan) and
  /// under streaming the device of --device with its own executor.
  Status createExecutors();
  /// Streaming: the bundle's step plan runs on the device of --device (the
  /// CPU device, or a CudaDevice with the CUDA backend).
  Status createStreaming();
  /// The device of --device with \p budget bytes of memory (and for CUDA its
  /// backend).
  Status createDevice(int64_t budget);
  /// The gradient sums over the ranks, started as each layer instance's
  /// gradients are final: by the host executor after each instance's
  /// backward (in the last micro-batch), by the stream executor after each
  /// group's gradients reach host memory.
  Status createDataParallel();
  /// AdamW on the kernels' thread count, and under streaming the deferred
  /// AdamW on a pool of its own; the schedule and the batch sampler.
  Status createOptimizer();
  /// --metrics: resuming appends, after dropping the records of steps after
  /// the checkpoint (an interrupted run may have logged them).
  Status openMetrics();
  /// The model, the data, the step and the device, before the first step;
  /// the device's error if it cannot say how much memory is in use.
  Status printHeader();

  // TrainStep.cpp
  /// The step loop, to --steps, --stop-after or a stop signal.
  Status runSteps();
  /// One step: forward and backward over every micro-batch, the update,
  /// then metrics, evaluation and saving as due.
  Status runStep(int64_t step);
  /// The mean loss of step \p step's micro-batches; the gradients hold
  /// their sum.
  Expected<double> forwardBackward(int64_t step);
  /// AdamW at \p lr with the gradients clipped to --clip by their global
  /// \p norm: now, or under streaming deferred to just before each layer
  /// instance's weights are next loaded (bit-identical to updating here).
  Status update(int64_t step, double lr, double norm);
  /// The immediate placement (clip 0): from this step's backward on, each
  /// group's update runs on the optimizer stream as soon as its gradients
  /// are in the plan's ring. Each tensor's sum of squares is kept for the
  /// gradient norm; a group with a non-finite one, and every group after
  /// it, is left unchanged. The error of flushing a pending update.
  Status updateImmediately(int64_t step, double lr);
  /// One JSONL record of step \p step (with the streaming counters under
  /// streaming).
  Status writeMetrics(int64_t step, double loss, double lr, double norm,
                      double dt, bool evalNow, double valLoss);
  /// A checkpoint of step \p step in --out (never of non-finite weights).
  Status save(int64_t step, double loss);
  /// "; the last checkpoint (DIR, step N) is untouched" when there is one.
  std::string untouched() const;
  /// The trace, the summary, how the run stopped and the sample; returns
  /// the exit code.
  int finish();
  /// Test hook MTC_TEST_KILL_RANK=R@N: rank R of a data-parallel run is
  /// killed (SIGKILL, no cleanup) at the start of step N, as a crashed node
  /// would stop (docs/distributed.md, "Faults").
  void testKillHook(int64_t step) const;
  /// The means the summed gradients add up: one per micro-batch and rank
  /// (one per micro-batch when the ranks split the micro-batches).
  int64_t gradParts() const;

  const bundle::Bundle &b;
  const TrainOptions &opts;
  std::ostream &out, &err;

  // The model, the outputs, the data, the checkpoint resumed.
  int64_t vocab = 0;
  std::optional<CheckpointLock> outLock;
  std::string outDir; ///< the locked --out ("" : none)
  std::shared_ptr<tok::Tokenizer> tok;
  std::optional<train::TokenDataset> data;
  DataIdentity dataId;
  TrainerState ck;   ///< the checkpoint resumed (with --resume)
  std::string ckDir; ///< its directory ("" : none)
  std::vector<std::string> notes;
  bool nothingToTrain = false;

  // The parameter state and the executors. The trace outlives the device
  // that writes to it; the streamer goes before what it drives.
  std::unique_ptr<exec::ParamStore> store;
  std::string unpinned; ///< why the state is not pinned ("" : it is)
  int64_t startStep = 0;
  std::unique_ptr<exec::Executor> ex;
  device::Trace trace;
  std::unique_ptr<device::Device> streamDevice;
  std::unique_ptr<exec::Backend> backend;
  std::unique_ptr<exec::Executor> streamEx;
  std::unique_ptr<stream::StreamExecutor> streamer;
  /// --dist-backend nccl: the gradients' sums on the device.
  std::unique_ptr<DeviceReduce> deviceReduce;

  // The optimizer, the schedule, the sampler, the metrics.
  std::unique_ptr<ThreadPool> pool;
  train::AdamWConfig acfg;
  std::optional<train::AdamW> adamw;
  std::unique_ptr<ThreadPool> optPool;
  std::optional<train::AdamW> deferredAdamW;
  /// The immediate optimizer placement (checkModel): per tensor of the
  /// store, its index and this step's gradient sum of squares.
  bool immediate = false;
  /// --grad-dtype bf16, and whether the store keeps the gradients as bf16
  /// (under a step plan; the plain executor rounds its fp32 sums in place).
  bool bf16Grads = false, bf16Store = false;
  std::map<const exec::ParamSlot *, size_t> slotIndex;
  std::vector<double> slotSumsq;
  std::atomic<bool> nonFinite{false};
  std::vector<train::AdamWTensor> tensors;
  train::LrSchedule sched;
  std::optional<train::BatchSampler> sampler;
  train::JsonlWriter metrics;
  bool haveMetrics = false;

  // The step loop.
  int64_t tokensPerStep = 0, hostBytes = 0;
  std::vector<int32_t> in, tg;
  std::vector<std::vector<int32_t>> streamIn, streamTg;
  std::optional<train::ProgressReporter> progress;
  std::optional<StopSignals> signals;
  double firstLoss = std::nan(""), lastLoss = 0, start = 0;
  int64_t lastStep = 0, lastValStep = 0, savedStep = 0;
  double lastVal = 0;
  int stoppedBy = 0; ///< the signal that stopped the run

  // Data parallelism: this rank, the ranks, this rank's rows of every
  // micro-batch, the gradient sums; /dev/null for the other ranks' progress.
  int rank = 0, ranks = 1;
  int64_t localBatch = opts.batch;
  /// --deterministic-reduce with several ranks: each rank trains
  /// localMicroBatches whole micro-batches of the step.
  bool splitMB = false;
  int64_t localMicroBatches = opts.microBatches;

  std::unique_ptr<DataParallel> dp;
  /// --shard-optimizer: the update waits for the backward; gradients leave
  /// the device through the plan's ring when it has one.
  bool shard = false, ringGrads = false;
  std::unique_ptr<ShardedOptimizer> sharded;
  struct CloseFile {
    void operator()(FILE *f) const { std::fclose(f); }
  };
  std::unique_ptr<FILE, CloseFile> quiet;
};

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_TRAINRUN_H
