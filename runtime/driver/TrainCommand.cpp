//===- TrainCommand.cpp - The train and generate commands -------*- C++ -*-===//
//
// Part of mtc. See TrainCommand.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/TrainCommand.h"

#include "lib/Bundle/Bundle.h"
#include "lib/Bundle/OpKind.h"
#include "lib/Support/ByteSize.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/dataparallel/DataParallel.h"
#include "runtime/driver/CommandLine.h"
#include "runtime/driver/DeviceSelect.h"
#include "runtime/driver/Generate.h"
#include "runtime/exec/cuda/CudaBackend.h"

namespace mtc::driver {

std::string trainUsage(const Tool &tool) {
  std::string t = tool.name;
  std::string u =
      t + " train " +
      (tool.compiles ? "MODEL.mt|MODEL.mtb|--hf DIR" : "MODEL.mtb") +
      " --data FILE [--data-format auto|text|llmc|raw-u16] "
      "[--steps N] [--batch N] [--seq N] [--micro-batches N] "
      "[--lr X] [--warmup N] [--min-lr-ratio X] "
      "[--weight-decay X] [--beta1 X] [--beta2 X] [--clip X] "
      "[--optimizer-placement auto|deferred|immediate] "
      "[--grad-dtype fp32|bf16] [--seed N] [--eval-every N] [--eval-batches N] "
      "[--val-fraction X] [--save-every N] [--out DIR] "
      "[--resume DIR [--allow-model-change]] [--init-from "
      "FILE.safetensors|DIR] [--stop-after N] "
      "[--metrics FILE.jsonl] [--threads N] [--sample-prompt "
      "TEXT] [--sample-tokens N] [--kernels on|off] "
      "[--data-parallel auto|mpi|off] [--shard-optimizer auto|on|off] "
      "[--deterministic-reduce] [--dist-backend auto|mpi|nccl] ";
  if (tool.compiles)
    u += "[--recompute auto|full|selective|none] [--cpu NAME] [--set "
         "NAME=VALUE]... [--host-state-file PATH] [--device-memory SIZE|auto "
         "[--host-memory SIZE] "
         "[--device cpu|cuda|cuda-emu [--gpu NAME|FILE]] [--prefetch-depth N] "
         "[--checkpoint-every K] [--selective-layers S] "
         "[--checkpoints device|host|auto] [--precision "
         "fp32|bf16] [--optimizer-threads N] "
         "[--trace FILE.json [--trace-ops]]] ";
  else
    u += "[--host-state-file PATH] [--device cpu|cuda|cuda-emu] "
         "[--device-memory SIZE|auto] [--optimizer-threads N] [--trace "
         "FILE.json [--trace-ops]] ";
  u += "[--tokenizer tokenizer.json]\n       " + t +
       " train --resume DIR [--steps N] [flags]...";
  return u;
}

std::string trainSummary(const Tool &tool) {
  if (tool.compiles)
    return "train a model on a text or token file (CPU; with --device-memory "
           "the layers stream through a device of that size: the CPU device, "
           "a GPU (--device cuda) or the CUDA path on the CPU (--device "
           "cuda-emu))";
  return "train a compiled bundle (.mtb) on a text or token file, on the CPU "
         "or through a device (--device cpu|cuda|cuda-emu)";
}

const char *trainDetails() {
  return "Checkpoints (--out DIR; every --save-every steps, at --stop-after "
         "and at the end):\n"
         "  model.mtb, model.safetensors (fp32 weights), "
         "optimizer.safetensors\n"
         "  (AdamW <param>.exp_avg, <param>.exp_avg_sq), trainer_state.json "
         "(step,\n"
         "  options, data file size and fingerprint, RNG, file checksums).\n"
         "  Written into DIR.tmp, then DIR -> DIR.bak, DIR.tmp -> DIR, "
         "DIR.bak\n"
         "  removed: after a crash DIR, or DIR.bak while DIR is missing, is a\n"
         "  complete checkpoint. --out must be new, empty or a checkpoint.\n"
         "--resume DIR continues the run bit-identically (DIR.bak when DIR is\n"
         "  missing). MODEL defaults to DIR/model.mtb, --out to DIR; flags "
         "left\n"
         "  out take the checkpoint's values; --metrics is appended to.\n"
         "  --steps is the total. Must match: --batch, --seq, "
         "--micro-batches,\n"
         "  --seed, --val-fraction, the data file. May change (with a note):\n"
         "  --steps, --lr, --warmup, --min-lr-ratio, --weight-decay, --beta1,\n"
         "  --beta2, --clip, --grad-dtype.\n"
         "--optimizer-placement auto|deferred|immediate: immediate runs AdamW\n"
         "  as soon as a layer's gradient is final (12 B/param of host state\n"
         "  instead of 16; only with --clip 0 and a step plan); auto picks it\n"
         "  when --clip is 0 and the plan has its gradient ring.\n"
         "--grad-dtype fp32|bf16: bf16 keeps the deferred optimizer's\n"
         "  gradients as bf16 in host memory (rounded from the device's fp32\n"
         "  sums; 14 B/param of state under a step plan instead of 16); the\n"
         "  global norm is that of the rounded values. Not with the\n"
         "  immediate placement, which keeps no gradient buffer.\n"
         "--init-from FILE.safetensors|DIR starts from the weights of tensors\n"
         "  named as the model's parameters (tok_emb, Block.0.wq, ...: "
         "another\n"
         "  run's checkpoint, or weights saved under these names) instead of\n"
         "  the initializers; names and shapes must all agree (every mismatch\n"
         "  is listed). Step, schedule and optimizer start afresh.\n"
         "--stop-after N ends this run after step N (with a checkpoint) "
         "without\n"
         "  changing the schedule; --resume continues it. See "
         "docs/training.md.\n"
         "One run writes an --out at a time (a lock beside it, DIR.lock). The\n"
         "  first Ctrl-C, SIGTERM or SIGUSR1 finishes the step, saves a\n"
         "  checkpoint and exits 130/143/138; a second one stops at once\n"
         "  (under mpirun send SIGUSR1 to mpirun: Open MPI forwards it, while\n"
         "  it ends the ranks itself on SIGINT or SIGTERM). A step whose loss "
         "or\n"
         "  gradient norm is not finite is never applied or saved.\n"
         "Under mpirun (or --data-parallel mpi) the ranks train data "
         "parallel:\n"
         "  each its share of --batch, gradients summed over the ranks while\n"
         "  the backward runs; rank 0 prints and saves. With\n"
         "  --deterministic-reduce each rank trains whole micro-batches\n"
         "  (--micro-batches a multiple of the ranks), bit-identical to one\n"
         "  process. --dist-backend nccl sums them on a CUDA device with\n"
         "  NCCL (auto: there when it loads). See docs/distributed.md.\n"
         "--device cuda|cuda-emu runs a step plan (a bundle compiled with\n"
         "  --device-memory, or .mt with --device-memory) through the CUDA\n"
         "  backend; --device-memory sizes the device (default: the plan's\n"
         "  budget). See docs/cuda.md.\n"
         "--data-format: auto reads an llm.c .bin by its magic and any UTF-8\n"
         "  text as text; raw-u16 (headerless uint16 tokens) must be asked "
         "for.\n"
         "--host-state-file PATH maps the parameters, gradients and AdamW\n"
         "  moments (16 bytes per parameter) from a scratch file created at "
         "PATH\n"
         "  (which must not exist; removed at once, its space freed at exit)\n"
         "  instead of RAM, for state larger than memory.";
}

std::string generateUsage(const Tool &tool) {
  return std::string(tool.name) +
         " generate CHECKPOINT_DIR [--prompt TEXT] [--tokens N] "
         "[--temperature X] [--top-k N] [--seed N] [--context N] [--kv-cache "
         "on|off] [--tokenizer tokenizer.json] [--device cpu|cuda|cuda-emu "
         "[--device-memory SIZE|auto]]";
}

const char *generateSummary() {
  return "continue a prompt with a trained checkpoint";
}

namespace {

/// The hint of every "not a bundle" error of a tool that does not compile.
std::string compileHint(const std::string &bundle) {
  return "compile the model where mtc is built: mtc compile MODEL.mt "
         "[--device-memory SIZE --batch N --seq N] [--device cuda] -o " +
         (bundle.empty() ? std::string("MODEL.mtb") : bundle);
}

/// Whether any function of \p b (model-level, layer or expert) holds a
/// `fused` op.
bool hasFusedOps(const bundle::Bundle &b) {
  auto in = [](const std::map<std::string, bundle::Function> &fns) {
    for (const auto &[name, fn] : fns)
      for (const bundle::Op &op : fn.ops)
        if (bundle::opKindOf(op.name) == bundle::OpKind::Fused)
          return true;
    return false;
  };
  if (in(b.functions))
    return true;
  for (const bundle::Layer &l : b.layers) {
    if (in(l.functions))
      return true;
    for (const bundle::Expert &e : l.experts)
      if (in(e.functions))
        return true;
  }
  return false;
}

} // namespace

Status parseTrainCommand(const Tool &tool, const std::vector<std::string> &args,
                         TrainCommand &cmd) {
  TrainOptions &opts = cmd.opts;
  int64_t threads = 0, optimizerThreads = 0;
  std::string kernels = "on", device = "cpu", gradDtype = "fp32";
  std::vector<std::string> pos, valued;
  for (const std::string &a : args) {
    if (a == "--allow-model-change")
      opts.allowModelChange = true;
    else if (a == "--deterministic-reduce")
      opts.deterministicReduce = true;
    else if (a == "--trace-ops")
      opts.traceOps = true;
    else
      valued.push_back(a);
  }
  if (Status st = parseFlags(
          "train", valued,
          {{Flag::String, "--data", &opts.data},
           {Flag::String, "--data-format", &opts.dataFormat},
           {Flag::Int, "--steps", &opts.steps, 1, limits::kSteps},
           {Flag::Int, "--batch", &opts.batch, 1, limits::kBatch},
           {Flag::Int, "--seq", &opts.seq, 1, limits::kSeq},
           {Flag::Int, "--micro-batches", &opts.microBatches, 1,
            limits::kMicroBatches},
           {Flag::Double, "--lr", &opts.lr, 0},
           {Flag::Int, "--warmup", &opts.warmup, 0, limits::kSteps},
           {Flag::Double, "--min-lr-ratio", &opts.minLrRatio, 0},
           {Flag::Double, "--weight-decay", &opts.weightDecay, 0},
           {Flag::Double, "--beta1", &opts.beta1, 0},
           {Flag::Double, "--beta2", &opts.beta2, 0},
           {Flag::Double, "--clip", &opts.clip, 0},
           {Flag::String, "--optimizer-placement", &opts.optimizerPlacement},
           {Flag::String, "--grad-dtype", &gradDtype},
           {Flag::Uint, "--seed", &opts.seed, 0},
           {Flag::Int, "--eval-every", &opts.evalEvery, 0, limits::kSteps},
           {Flag::Int, "--eval-batches", &opts.evalBatches, 1,
            limits::kEvalBatches},
           {Flag::Double, "--val-fraction", &opts.valFraction, 0},
           {Flag::Int, "--save-every", &opts.saveEvery, 0, limits::kSteps},
           {Flag::String, "--out", &opts.outDir},
           {Flag::String, "--metrics", &opts.metrics},
           {Flag::Int, "--threads", &threads, 0, limits::kThreads},
           {Flag::Text, "--sample-prompt", &opts.samplePrompt},
           {Flag::Int, "--sample-tokens", &opts.sampleTokens, 0,
            limits::kTokens},
           {Flag::String, "--kernels", &kernels},
           {Flag::List, "--set", &cmd.sets},
           {Flag::String, "--recompute", &cmd.recompute},
           {Flag::String, "--cpu", &cmd.cpu},
           {Flag::String, "--gpu", &cmd.gpu},
           {Flag::String, "--hf", &cmd.hf},
           {Flag::String, "--resume", &opts.resume},
           {Flag::String, "--init-from", &opts.initFrom},
           {Flag::Int, "--stop-after", &opts.stopAfter, 1, limits::kSteps},
           {Flag::String, "--device-memory", &cmd.deviceMemory},
           {Flag::String, "--host-memory", &cmd.hostMemory},
           {Flag::Int, "--prefetch-depth", &cmd.prefetchDepth, 1,
            limits::kLayerInstances},
           {Flag::Int, "--checkpoint-every", &cmd.checkpointEvery, 1,
            limits::kLayerInstances},
           {Flag::Int, "--selective-layers", &cmd.selectiveLayers, 0,
            limits::kLayerInstances},
           {Flag::String, "--checkpoints", &cmd.checkpoints},
           {Flag::String, "--precision", &cmd.precision},
           {Flag::Int, "--optimizer-threads", &optimizerThreads, 0,
            limits::kThreads},
           {Flag::String, "--trace", &opts.trace},
           {Flag::String, "--tokenizer", &opts.tokenizer},
           {Flag::String, "--host-state-file", &opts.hostStateFile},
           {Flag::String, "--device", &device},
           {Flag::String, "--data-parallel", &opts.dataParallel},
           {Flag::String, "--shard-optimizer", &opts.shardOptimizer},
           {Flag::String, "--dist-backend", &opts.distBackend}},
          pos, &cmd.given);
      !st.ok())
    return st;
  if (opts.traceOps && opts.trace.empty())
    return Status::error("train: --trace-ops adds per-op spans to the "
                         "--trace FILE.json timeline; give --trace too");
  Expected<DeviceKind> kind = parseDeviceKind(device);
  if (!kind)
    return kind.status().withPrefix("train");
  opts.device = *kind;
  if (!tool.compiles && !cmd.hostMemory.empty())
    return Status::error(
        std::string("train: ") + tool.name +
        " runs bundles; --host-memory is a planner budget: " + compileHint(""));
  if (!tool.compiles && !cmd.hf.empty())
    return Status::error(
        std::string("train: ") + tool.name +
        " runs bundles; --hf needs the compiler: " + compileHint(""));
  if (!opts.resume.empty()) {
    // Flags left out take the checkpoint's values; the model defaults to the
    // checkpoint's bundle and --out to the checkpoint directory.
    Expected<std::string> dir = resolveCheckpoint(opts.resume);
    if (!dir)
      return dir.status();
    Expected<TrainerState> state = readTrainerState(*dir);
    if (!state)
      return state.status();
    inheritOptions(state->options, cmd.given, opts);
    // A model compiled for the resumed run computes in the checkpoint's
    // precision unless --precision says otherwise (then readCheckpoint
    // refuses the change without --allow-model-change).
    if (!cmd.given.count("--precision"))
      cmd.precision = state->options.precision;
    if (opts.outDir.empty())
      opts.outDir = opts.resume;
    if (pos.empty() && cmd.hf.empty())
      pos.push_back(*dir + "/model.mtb");
  }
  // After --resume: the checkpoint's values count too.
  if (Status st =
          checkStepTokens("train", opts.batch, opts.seq, opts.microBatches);
      !st.ok())
    return st;
  if (cmd.hf.empty()) {
    Expected<std::string> model = onePositional("train", pos, trainUsage(tool));
    if (!model)
      return model.status();
    cmd.input = *model;
    if (!tool.compiles && !isBundlePath(cmd.input))
      return Status::error(std::string("train: ") + tool.name +
                           " runs bundles, and '" + cmd.input +
                           "' is not one (.mtb): " + compileHint(""));
  } else if (!pos.empty()) {
    return Status::error("train: give either a model file or --hf DIR, not "
                         "both");
  }
  opts.threads = static_cast<int>(threads);
  opts.optimizerThreads = static_cast<int>(optimizerThreads);
  if (kernels != "on" && kernels != "off")
    return Status::error("train: --kernels expects on or off, got '" + kernels +
                         "'");
  opts.useKernels = kernels == "on";
  if (opts.data.empty())
    return Status::error("train: --data FILE is required (a .txt file, or a "
                         "token file in the llm.c .bin layout)");
  if (opts.dataFormat != "auto" && opts.dataFormat != "text" &&
      opts.dataFormat != "llmc" && opts.dataFormat != "raw-u16")
    return Status::error("train: --data-format expects auto, text, llmc or "
                         "raw-u16, got '" +
                         opts.dataFormat + "'");
  if (opts.optimizerPlacement != "auto" &&
      opts.optimizerPlacement != "deferred" &&
      opts.optimizerPlacement != "immediate")
    return Status::error("train: --optimizer-placement expects auto, deferred "
                         "or immediate, got '" +
                         opts.optimizerPlacement + "'");
  if (opts.optimizerPlacement == "immediate" && opts.clip > 0)
    return Status::error(
        "train: --optimizer-placement immediate updates each layer before the "
        "global gradient norm is known, so it cannot clip; add --clip 0 or "
        "use --optimizer-placement deferred");
  if (!bundle::parseGradDType(gradDtype, opts.gradDtype))
    return Status::error("train: --grad-dtype expects fp32 or bf16, got '" +
                         gradDtype + "'");
  if (opts.gradDtype == bundle::GradDType::BF16 &&
      opts.optimizerPlacement == "immediate")
    return Status::error("train: " + gradDtypeImmediateConflict());
  if (opts.beta1 >= 1 || opts.beta2 >= 1)
    return Status::error("train: --beta1 and --beta2 must be below 1");
  if (opts.valFraction >= 1)
    return Status::error("train: --val-fraction must be below 1");
  return openDataParallel(opts);
}

int trainBundle(const Tool &tool, TrainCommand &cmd, std::ostream &out,
                std::ostream &err) {
  TrainOptions &opts = cmd.opts;
  auto fail = [&](const std::string &message) {
    err << tool.name << ": error: " << message << "\n";
    return 1;
  };
  // A bundle is compiled: the flags that choose how (the config, the CPU of
  // the fused kernels, the step plan's policies) cannot change it any more.
  std::vector<std::string> fixed;
  if (!cmd.sets.empty())
    fixed.push_back("--set");
  for (const char *flag :
       {"--cpu", "--recompute", "--checkpoints", "--prefetch-depth",
        "--checkpoint-every", "--selective-layers", "--precision", "--gpu"})
    if (cmd.given.count(flag))
      fixed.push_back(flag);
  if (!fixed.empty()) {
    std::string list;
    for (size_t i = 0; i < fixed.size(); ++i)
      list += (i ? (i + 1 == fixed.size() ? " and " : ", ") : "") + fixed[i];
    return fail("train: " + list + (fixed.size() == 1 ? " applies" : " apply") +
                " when a model is compiled, not to the compiled bundle '" +
                cmd.input + "'; recompile it with " +
                (fixed.size() == 1 ? "that flag" : "those flags") +
                " (mtc compile MODEL.mt ... -o " + cmd.input + ")");
  }
  if (!cmd.deviceMemory.empty()) {
    // The bundle brings its plan; --device-memory sizes the device it runs
    // on (at least the plan's peak, checked by train()).
    Expected<int64_t> bytes =
        resolveDeviceMemory(cmd.deviceMemory, opts.device, "train", out);
    if (!bytes)
      return fail(bytes.message());
    opts.deviceMemory = *bytes;
  }
  Expected<bundle::Bundle> read = bundle::readFile(cmd.input);
  if (!read)
    return fail(read.message() + (tool.compiles
                                      ? std::string()
                                      : "; " + compileHint(cmd.input)));
  const bundle::Bundle &b = *read;
  // The step plan's host budget counted its gradient dtype: train with it.
  // (The bundle reader accepts fp32 and bf16 alone.)
  bundle::GradDType planGrads;
  if (b.step && bundle::parseGradDType(b.step->gradDType, planGrads)) {
    if (cmd.given.count("--grad-dtype") && opts.gradDtype != planGrads)
      return fail(
          std::string("train: --grad-dtype ") +
          bundle::gradDTypeName(opts.gradDtype) + " conflicts with '" +
          cmd.input + "', whose step plan was compiled for --grad-dtype " +
          bundle::gradDTypeName(planGrads) +
          "; drop the flag, or recompile the bundle with --grad-dtype " +
          bundle::gradDTypeName(opts.gradDtype) +
          " (mtc compile MODEL.mt ... -o " + cmd.input + ")");
    opts.gradDtype = planGrads;
  }
  if (b.step && opts.deviceMemory > 0 &&
      opts.deviceMemory < b.step->devicePeak) {
    const bundle::StepPlan &plan = *b.step;
    return fail("the step plan needs " + std::to_string(plan.devicePeak) +
                " bytes of device memory; the device has " +
                std::to_string(opts.deviceMemory) + " (--device-memory " +
                cmd.deviceMemory +
                "): give at least that, or compile a plan for this budget "
                "(mtc compile MODEL.mt --device-memory " +
                cmd.deviceMemory + " --batch " + std::to_string(plan.batch) +
                " --seq " + std::to_string(plan.seq) + " --micro-batches " +
                std::to_string(plan.microBatches) + " ... -o " + cmd.input +
                ")");
  }
  if (!b.step && (!cmd.deviceMemory.empty() || !opts.trace.empty()))
    return fail("train: --device-memory and --trace need a step plan; '" +
                cmd.input +
                "' is a bundle without one (compile it with "
                "mtc compile --device-memory ...)");
  if (isGpu(opts.device)) {
    const std::string device = deviceKindName(opts.device);
    if (!b.step)
      return fail("train: --device " + device +
                  " runs a streaming step plan; '" + cmd.input +
                  "' is a bundle without one (compile it with mtc compile "
                  "--device-memory SIZE --batch N --seq N --device cuda ...)");
    // The CUDA backend runs fused regions as the CUDA C the compiler emits
    // for them: say how to compile a bundle built without it rather than
    // naming the first fused op.
    if (b.cudaKernels.source.empty() && hasFusedOps(b))
      return fail("train: --device " + device + ": '" + cmd.input +
                  "' has fused regions but no CUDA kernels for them (it was "
                  "compiled for the CPU); compile it for this device: mtc "
                  "compile MODEL.mt --device cuda ... -o " +
                  cmd.input);
  }
  opts.modelFiles = {cmd.input};
  opts.toolName = tool.name;
  return train(b, opts, out, err);
}

int runGenerateCommand(const Tool &tool, const std::vector<std::string> &args,
                       std::ostream &out, std::ostream &err) {
  GenerateOptions opts;
  std::vector<std::string> pos;
  std::string cache = "on", deviceMemory, device = "cpu";
  auto fail = [&](const std::string &message) {
    err << tool.name << ": error: " << message << "\n";
    return 1;
  };
  if (Status st =
          parseFlags("generate", args,
                     {{Flag::Text, "--prompt", &opts.prompt},
                      {Flag::Int, "--tokens", &opts.tokens, 1, limits::kTokens},
                      {Flag::Double, "--temperature", &opts.temperature, 0},
                      {Flag::Int, "--top-k", &opts.topK, 0, limits::kTokens},
                      {Flag::Uint, "--seed", &opts.seed, 0},
                      {Flag::Int, "--context", &opts.context, 1, limits::kSeq},
                      {Flag::String, "--kv-cache", &cache},
                      {Flag::String, "--tokenizer", &opts.tokenizer},
                      {Flag::String, "--device", &device},
                      {Flag::String, "--device-memory", &deviceMemory}},
                     pos);
      !st.ok())
    return fail(st.message());
  Expected<DeviceKind> kind = parseDeviceKind(device);
  if (!kind)
    return fail("generate: " + kind.message());
  opts.device = *kind;
  if (isGpu(opts.device)) {
    // The whole model is resident: by default, all the device has.
    Expected<int64_t> bytes =
        resolveDeviceMemory(deviceMemory.empty() ? "auto" : deviceMemory,
                            opts.device, "generate", err);
    if (!bytes)
      return fail(bytes.message());
    opts.deviceMemory = *bytes;
  } else if (!deviceMemory.empty()) {
    return fail("generate: --device-memory sizes a CUDA device "
                "(--device cuda|cuda-emu); the CPU runs the model in host "
                "memory");
  }
  Expected<std::string> dir =
      onePositional("generate", pos, generateUsage(tool));
  if (!dir)
    return fail(dir.message());
  if (cache != "on" && cache != "off")
    return fail("generate: --kv-cache expects on or off, got '" + cache + "'");
  opts.useCache = cache == "on";
  opts.toolName = tool.name;
  return generate(*dir, opts, out, err);
}

} // namespace mtc::driver
