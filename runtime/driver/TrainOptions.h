//===- TrainOptions.h - What a training run is asked to do ------*- C++ -*-===//
//
// Part of mtc. The options of `mtc train` and `mtc-run train` as the flags
// (runtime/driver/TrainCommand.h) and a checkpoint's trainer_state.json
// (runtime/checkpoint/Checkpoint.h) give them; train() runs them.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_TRAINOPTIONS_H
#define MTC_RUNTIME_DRIVER_TRAINOPTIONS_H

#include "lib/Bundle/Plan.h"
#include "runtime/driver/DeviceKind.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtc::dist {
class Communicator;
} // namespace mtc::dist

namespace mtc::driver {

struct TrainOptions {
  std::string data; ///< token file (.bin) or text (.txt)
  /// How --data is read: auto, text, llmc or raw-u16 (train/Data.h).
  std::string dataFormat = "auto";
  int64_t steps = 200;
  int64_t batch = 8; ///< sequences per micro-batch
  int64_t seq = 128;
  int64_t microBatches = 1; ///< gradient accumulation
  double lr = 1e-3;         ///< peak learning rate
  int64_t warmup = 20;
  double minLrRatio = 0.1; ///< cosine decay floor, relative to lr
  double weightDecay = 0.1;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double clip = 1.0; ///< global gradient-norm clip (0: none)
  /// When AdamW runs (docs/training.md, "Optimizer placement"): "deferred"
  /// (after the backward, each layer's update just before its next load;
  /// 16 B/param), "immediate" (as soon as a layer instance's gradient is
  /// final, through the plan's `grads.host` ring; 12 B/param; needs clip 0
  /// and a plan compiled with it) or "auto" (immediate when both hold).
  std::string optimizerPlacement = "auto";
  /// How the deferred optimizer's gradients are kept in host memory
  /// (docs/training.md, "Gradient dtype"): "fp32" (16 B/param of state) or
  /// "bf16" (rounded to nearest even from the device's fp32 sums; 14
  /// B/param under a step plan). The global norm is that of the rounded
  /// values. Refused with the immediate placement, which keeps none.
  bundle::GradDType gradDtype = bundle::GradDType::F32;
  /// The precision of the step plan a checkpoint was trained with, as its
  /// trainer_state.json records it ("fp32" or "bf16"; "" : not recorded).
  /// Read from checkpoints only: a resume without --precision compiles in
  /// it; the bundle decides the precision of a run.
  std::string precision;
  uint64_t seed = 1;
  int64_t evalEvery = 50; ///< 0: only at the end
  int64_t evalBatches = 8;
  double valFraction = 0.1;
  int64_t saveEvery = 0; ///< 0: only at the end
  std::string outDir;    ///< checkpoint directory ("" : none)
  std::string metrics;   ///< JSONL file ("" : none)
  int threads = 0;       ///< 0: all cores
  /// Threads of the deferred AdamW under streaming (its own pool, beside the
  /// kernels'); 0: the cores the kernels leave free, at least one.
  int optimizerThreads = 0;
  std::string samplePrompt; ///< printed sample after training
  int64_t sampleTokens = 0;
  bool useKernels = true; ///< false: run fused regions op by op
  /// A HuggingFace checkpoint (hf/HFWeights.h) to start from instead of
  /// the initializers; "" : none.
  std::string hfWeights;
  /// Safetensors with the model's parameter names (a file, an index or a
  /// directory such as a checkpoint; checkpoint/InitWeights.h) to start from
  /// instead of the initializers; "" : none. Not with hfWeights or resume.
  std::string initFrom;
  /// A checkpoint directory to continue from ("" : none); see
  /// checkpoint/Checkpoint.h. `steps` stays the total.
  std::string resume;
  /// End this run after this optimizer step (writing a checkpoint when outDir
  /// is set) without changing the schedule; 0: run to `steps`.
  int64_t stopAfter = 0;
  /// Streaming (bundles with a step plan, docs/streaming.md): the CPU
  /// device's memory in bytes (0: the plan's budget).
  int64_t deviceMemory = 0;
  /// The device the step plan runs on (DeviceKind.h): the CPU device with
  /// the CPU kernels, a GPU through libcuda with the CUDA kernels, or the
  /// CUDA code path over the emulated driver, on the CPU; docs/cuda.md.
  DeviceKind device = DeviceKind::Cpu;
  /// Chrome-trace JSON of every device stream ("" : none).
  std::string trace;
  /// --trace-ops: every op the compute stream runs as a span of its own
  /// (category "op", named by the op and its result shape) inside the
  /// layer spans of the trace.
  bool traceOps = false;
  /// tokenizer.json (or a directory holding one) for .txt data and the
  /// sample; "" : the bundle's (HF imports), else bytes.
  std::string tokenizer;
  /// Map the parameters, gradients and AdamW moments from a scratch file
  /// created at this path (which must not exist) instead of RAM ("" : RAM);
  /// see exec::HostStateOptions.
  std::string hostStateFile;
  /// The files the model came from (a .mt or .mtb, or an HF directory's
  /// config.json and weights): inputs that no output may overwrite.
  std::vector<std::string> modelFiles;
  /// Resume even when the checkpoint's model differs from this one in its
  /// computation (same parameters and config); otherwise an error.
  bool allowModelChange = false;
  /// The program the user ran ("mtc", "mtc-run"): messages start with it
  /// ("mtc-run: error: ...").
  std::string toolName = "mtc";
  /// Data parallelism (docs/distributed.md): --data-parallel auto|mpi|off,
  /// and the ranks it opened (null: one process). `batch` stays the global
  /// batch; each rank trains on batch / size of its rows.
  std::string dataParallel = "auto";
  std::shared_ptr<dist::Communicator> world;
  /// --shard-optimizer auto|on|off: each rank keeps the AdamW state and the
  /// summed gradient of 1/N of every tensor (dataparallel/ShardedOptimizer.h);
  /// auto: on with more than one rank.
  std::string shardOptimizer = "auto";
  /// --deterministic-reduce: with several ranks, each rank trains whole
  /// micro-batches and every sum over them runs in one process's order, so
  /// the run is bit-identical to one process (docs/distributed.md, "Bits").
  bool deterministicReduce = false;
  /// --dist-backend auto|mpi|nccl: where the gradients are summed over the
  /// ranks (dataparallel/DeviceReduce.h); auto: NCCL on a CUDA device under a
  /// step plan, else MPI.
  std::string distBackend = "auto";
};

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_TRAINOPTIONS_H
