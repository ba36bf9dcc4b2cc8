//===- TrainChecks.cpp - What a training run checks first -------*- C++ -*-===//
//
// Part of mtc. The stages of TrainRun (TrainRun.h) that check the model, the
// ranks, the outputs, the data, the checkpoint to resume and the host memory
// before anything is allocated, and the host-memory estimates the commands
// share (Train.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/TrainRun.h"

#include "lib/Bundle/OpKind.h"
#include "lib/Bundle/Plan.h"
#include "lib/Support/ByteSize.h"
#include "lib/Support/Files.h"
#include "runtime/driver/Generate.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sys/stat.h>

namespace mtc::driver {

namespace {

/// The ignore_index of the model's loss (cross_entropy or
/// linear_cross_entropy in its forward): masked targets are set to it. Errors
/// when the forward has no such op or two with different values.
Expected<int32_t> lossIgnoreIndex(const bundle::Bundle &b) {
  std::optional<int64_t> found;
  std::string clash;
  std::function<void(const bundle::Function &)> scan =
      [&](const bundle::Function &fn) {
        for (const bundle::Op &op : fn.ops) {
          if (op.region)
            scan(*op.region);
          const std::optional<bundle::OpKind> kind = bundle::opKindOf(op.name);
          if (kind != bundle::OpKind::CrossEntropy &&
              kind != bundle::OpKind::LinearCrossEntropy)
            continue;
          int64_t v = op.intAttr("ignore_index", -100);
          if (found && *found != v)
            clash = std::to_string(*found) + " and " + std::to_string(v);
          found = v;
        }
      };
  auto it = b.functions.find("forward");
  if (it != b.functions.end())
    scan(it->second);
  if (!clash.empty())
    return Status::error("the model's losses ignore different targets (" +
                         clash + "), so a loss mask cannot be applied");
  if (!found)
    return Status::error("the model's forward computes no cross_entropy, so a "
                         "loss mask cannot be applied");
  if (*found < INT32_MIN || *found > INT32_MAX)
    return Status::error("the model's ignore_index " + std::to_string(*found) +
                         " does not fit an int32 target");
  return static_cast<int32_t>(*found);
}

/// Bytes of the values of \p fn with B and S bound (the executor keeps every
/// value of a function alive while it runs, so this bounds its working set).
/// T (tokens per expert) is bounded by B * S.
double functionBytes(const bundle::Function &fn, int64_t B, int64_t S) {
  double bytes = 0;
  for (const bundle::ValueType &t : fn.values) {
    double n = 4;
    for (Dim d : t.shape)
      n *= d == kDimB ? B : d == kDimS ? S : d == kDimT ? B * S : d;
    bytes += n;
  }
  return bytes;
}

/// MemAvailable from /proc/meminfo in bytes, or 0 if unknown. Test hook:
/// MTC_TEST_MEM_AVAILABLE=BYTES replaces it (docs/testing.md).
double availableHostBytes() {
  if (const char *forced = std::getenv("MTC_TEST_MEM_AVAILABLE"))
    return std::strtod(forced, nullptr);
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:")
      return kb * 1024;
  return 0;
}

/// Outputs never overwrite inputs: --metrics, --trace and --host-state-file
/// against --data (and its mask), --tokenizer and the model's files; nothing
/// of either kind inside --out, which every checkpoint replaces as a whole
/// (but the model.mtb of the checkpoint being resumed, read before).
Status checkTrainPaths(const TrainOptions &opts, const std::string &outDir) {
  std::vector<NamedPath> inputs = {{"--data", opts.data},
                                   {"the loss mask", opts.data + ".mask"}};
  if (!opts.tokenizer.empty())
    inputs.push_back({"--tokenizer", tok::tokenizerJsonPath(opts.tokenizer)});
  for (const std::string &f : opts.modelFiles)
    inputs.push_back({"the model", f});
  // A directory is read through its model.safetensors (or index): that is
  // the input a checkpoint in --out would replace.
  if (!opts.initFrom.empty())
    inputs.push_back(
        {"--init-from", std::filesystem::is_directory(opts.initFrom)
                            ? opts.initFrom + "/model.safetensors"
                            : opts.initFrom});
  std::vector<NamedPath> outputs = {{"--metrics", opts.metrics},
                                    {"--trace", opts.trace},
                                    {"--host-state-file", opts.hostStateFile}};
  // Inside --out first: its directory may not exist yet, which the
  // writability check of checkOutputs would report less helpfully.
  for (const std::vector<NamedPath> *list : {&inputs, &outputs})
    for (const NamedPath &p : *list) {
      if (outDir.empty() || p.path.empty() || !isInside(p.path, outDir))
        continue;
      if (list == &inputs && p.what == "the model" &&
          sameFile(p.path, outDir + "/model.mtb"))
        continue;
      return Status::error(p.what + " '" + p.path + "' is inside --out '" +
                           opts.outDir +
                           "', which every checkpoint replaces as a whole; "
                           "keep it outside");
    }
  return checkOutputs(outputs, inputs);
}

/// An upper bound of the host memory one training step needs besides the
/// parameter store: the model's forward_backward, the largest layer
/// backward running inside it, and every layer instance's checkpoint.
double stepBytes(const bundle::Bundle &b, int64_t B, int64_t S) {
  double bytes = 0;
  if (auto it = b.functions.find("forward_backward"); it != b.functions.end())
    bytes += functionBytes(it->second, B, S);
  double layerMax = 0;
  for (const bundle::Layer &l : b.layers) {
    double checkpoint = 0;
    for (const auto &[name, fn] : l.functions) {
      layerMax = std::max(layerMax, functionBytes(fn, B, S));
      if (name == "forward" && !fn.args.empty()) {
        // What an instance keeps: its input, and with save=all the extra
        // results of its forward (the intermediates its backward reads).
        std::vector<int> kept = {fn.args[0]};
        for (size_t r = 1; r < fn.results.size(); ++r)
          kept.push_back(fn.results[r]);
        checkpoint = 0;
        for (int v : kept)
          checkpoint += 4.0 * static_cast<double>(bundle::concreteNumel(
                                  fn.values.at(v).shape, B, S, B * S));
      }
    }
    bytes += checkpoint * static_cast<double>(l.count);
  }
  return bytes + layerMax;
}

/// Every parameter of the model: model-level, and each layer instance's with
/// all its experts.
double parameterCount(const bundle::Bundle &b) {
  double params = 0;
  for (const bundle::Param &p : b.params)
    params += static_cast<double>(p.numel());
  for (const bundle::Layer &l : b.layers) {
    double per = 0;
    for (const bundle::Param &p : l.params)
      per += static_cast<double>(p.numel());
    for (const bundle::Expert &e : l.experts)
      for (const bundle::Param &p : e.params)
        per += static_cast<double>(p.numel()) * static_cast<double>(e.count);
    params += per * static_cast<double>(l.count);
  }
  return params;
}

} // namespace

double trainingHostBytes(const bundle::Bundle &b, int64_t batch, int64_t seq) {
  return parameterCount(b) * exec::ParamStore::kBytesPerParam +
         stepBytes(b, batch, seq);
}

double hostMemoryAvailable() { return availableHostBytes(); }

std::string gradDtypeImmediateConflict() {
  return "--grad-dtype bf16 rounds the model-sized gradient buffer of the "
         "deferred optimizer placement, and the immediate placement (--clip 0) "
         "has none (12 B/param: its gradients pass through the grads.host "
         "ring in fp32); drop --grad-dtype bf16, or keep it with "
         "--optimizer-placement deferred";
}

Status TrainRun::checkModel() {
  const bool ring = b.step && b.step->buffer("grads.host");
  if (opts.optimizerPlacement == "immediate") {
    if (opts.clip > 0)
      return Status::error(
          "--optimizer-placement immediate updates each layer before the "
          "global gradient norm is known, so it cannot clip; add --clip 0 "
          "or use --optimizer-placement deferred");
    if (!ring)
      return Status::error(
          b.step ? "--optimizer-placement immediate: the bundle's step plan "
                   "has no gradient ring ('grads.host'); compile it with "
                   "--optimizer-placement immediate (or --clip 0)"
                 : "--optimizer-placement immediate needs a step plan "
                   "(--device-memory SIZE)");
  }
  immediate = ring && opts.clip == 0 && opts.optimizerPlacement != "deferred";
  bf16Grads = opts.gradDtype == bundle::GradDType::BF16;
  if (bf16Grads && immediate)
    return Status::error(gradDtypeImmediateConflict());
  // Under a step plan the device accumulates and the store keeps bf16; the
  // plain executor accumulates in the store's fp32 block and rounds it.
  bf16Store = bf16Grads && b.step;
  vocab = b.vocabulary();
  if (vocab <= 0)
    return Status::error(
        "model '" + b.model +
        "' embeds no token ids, so it cannot be trained on token data");
  auto maxSeq = b.config.find("max_seq");
  if (maxSeq != b.config.end() && opts.seq > maxSeq->second)
    return Status::error("--seq " + std::to_string(opts.seq) +
                         " exceeds the model's max_seq " +
                         std::to_string(static_cast<int64_t>(maxSeq->second)));
  return bundle::checkTokenShapes(b, rankBatch(opts), opts.seq);
}

Status TrainRun::checkRanks() {
  if (!opts.world || opts.world->size() == 1)
    return Status::success();
  rank = opts.world->rank();
  ranks = opts.world->size();
  localBatch = rankBatch(opts);
  splitMB = splitsMicroBatches(opts);
  localMicroBatches = rankMicroBatches(opts);
  if (splitMB)
    if (Status st = checkSplitMicroBatches(); !st)
      return st;
  if (opts.gradDtype == bundle::GradDType::BF16)
    return Status::error(
        "--grad-dtype bf16 is not supported with several ranks yet (the "
        "gradients are summed over the ranks in fp32); leave it out");
  if (shardsOptimizer(opts)) {
    if (opts.optimizerPlacement == "immediate")
      return Status::error(
          "--optimizer-placement immediate updates whole tensors on every "
          "rank; the sharded optimizer (the default with several ranks) "
          "updates each rank's part after the backward: add "
          "--shard-optimizer off, or leave out --optimizer-placement");
    // The update waits for the backward; gradients still leave the device
    // through the plan's ring when it has one (no model-sized buffer).
    shard = true;
    ringGrads = immediate || (b.step && b.step->buffer("grads.host"));
    immediate = false;
  }
  return DataParallel::checkConsistent(*opts.world, b, opts);
}

Status TrainRun::checkSplitMicroBatches() {
  if (b.step && localMicroBatches > 1)
    return Status::error(
        "--deterministic-reduce under a step plan (--device-memory) runs one "
        "micro-batch per rank (a plan accumulates its micro-batches' "
        "gradients in one device buffer): pass --micro-batches " +
        std::to_string(ranks) + " with " + std::to_string(ranks) +
        " ranks, not " + std::to_string(opts.microBatches) +
        ", or train without --device-memory");
  std::string twice;
  std::function<void(const bundle::Function &)> scan =
      [&](const bundle::Function &fn) {
        std::map<std::string, int> count;
        for (const bundle::Op &op : fn.ops) {
          if (op.region)
            scan(*op.region);
          if (bundle::opKindOf(op.name) == bundle::OpKind::ParamGrad &&
              ++count[op.symbol] == 2 && twice.empty())
            twice = op.symbol;
        }
      };
  for (const auto &[name, fn] : b.functions)
    scan(fn);
  for (const bundle::Layer &l : b.layers) {
    for (const auto &[name, fn] : l.functions)
      scan(fn);
    for (const bundle::Expert &x : l.experts)
      for (const auto &[name, fn] : x.functions)
        scan(fn);
  }
  if (!twice.empty())
    return Status::error(
        "--deterministic-reduce: parameter '" + twice +
        "' receives several gradient terms per micro-batch (param_grad "
        "ops), which one process adds to its running sum one by one; the "
        "ranks cannot reproduce that order: leave out "
        "--deterministic-reduce");
  return Status::success();
}

Status TrainRun::claimOutputs() {
  if (Status st = checkTrainPaths(opts, opts.outDir); !st.ok())
    return st;
  // Rank 0 alone writes checkpoints (the ranks hold the same state).
  if (!opts.outDir.empty() && rank == 0) {
    Expected<CheckpointLock> l = CheckpointLock::acquire(opts.outDir);
    if (!l)
      return l.status();
    outLock.emplace(std::move(*l));
  }
  outDir = outLock ? outLock->dir() : "";
  return Status::success();
}

Status TrainRun::openData() {
  Expected<std::shared_ptr<tok::Tokenizer>> tokenizer =
      modelTokenizer(b, opts.tokenizer);
  if (!tokenizer)
    return tokenizer.status();
  tok = *tokenizer;
  if (tok && tok->vocabSize() > static_cast<uint32_t>(vocab))
    return Status::error(tok->name() + " has " +
                         std::to_string(tok->vocabSize()) +
                         " tokens, more than the model's vocabulary of " +
                         std::to_string(vocab));
  train::TokenDatasetOptions dopts;
  dopts.vocabSize = static_cast<uint32_t>(vocab);
  dopts.seqLen = opts.seq;
  dopts.valFraction = opts.valFraction;
  dopts.format = opts.dataFormat;
  if (tok)
    dopts.tokenize = [t = tok](std::string_view text) {
      return t->encode(text);
    };
  // A loss mask beside the data (instruction data, docs/hf.md) writes the
  // model's own ignore_index into masked targets.
  struct stat st;
  if (::stat((opts.data + ".mask").c_str(), &st) == 0) {
    Expected<int32_t> ignore = lossIgnoreIndex(b);
    if (!ignore)
      return Status::error(opts.data + ".mask: " + ignore.message());
    dopts.ignoreIndex = *ignore;
  }
  Expected<train::TokenDataset> opened =
      train::TokenDataset::open(opts.data, dopts);
  if (!opened)
    return opened.status();
  data.emplace(std::move(*opened));
  return Status::success();
}

Status TrainRun::checkResume() {
  if (opts.outDir.empty() && opts.resume.empty())
    return Status::success();
  Expected<DataIdentity> id = identifyData(*data);
  Status st = id ? Status::success() : id.status();
  if (st.ok() && !opts.resume.empty()) {
    std::string note;
    Expected<std::string> dir = resolveCheckpoint(opts.resume, &note);
    Expected<TrainerState> state =
        dir ? readTrainerState(*dir) : Expected<TrainerState>(dir.status());
    if (!note.empty())
      notes.push_back(note);
    st = state ? driver::checkResume(*state, *dir, opts, *id, notes)
               : state.status();
    if (st.ok() && opts.stopAfter > 0 && opts.stopAfter <= state->step)
      st = Status::error("--stop-after " + std::to_string(opts.stopAfter) +
                         " is not after the checkpoint's step " +
                         std::to_string(state->step));
    if (st.ok()) {
      ckDir = *dir;
      ck = *state;
    }
  }
  if (!st.ok())
    return st;
  dataId = *id;
  return Status::success();
}

Status TrainRun::checkHostMemory() {
  double params = parameterCount(b);
  std::string mb = "values of one " + std::to_string(opts.batch) + " x " +
                   std::to_string(opts.seq) + " micro-batch";
  std::vector<std::pair<std::string, double>> parts;
  // A file-backed state is paged to its file, not held in RAM.
  if (opts.hostStateFile.empty() && shard)
    parts.push_back({"parameters and this rank's shard of the AdamW state",
                     params * (4.0 + (ringGrads ? 0 : 4) + 12.0 / ranks)});
  else if (opts.hostStateFile.empty())
    parts.push_back(
        {immediate   ? "parameters and AdamW state"
         : bf16Store ? "parameters, bf16 gradients and AdamW state"
                     : "parameters, gradients and AdamW state",
         params * bundle::stateBytesPerParam(
                      immediate, bf16Store ? bundle::GradDType::BF16
                                           : bundle::GradDType::F32)});
  parts.push_back({mb, stepBytes(b, opts.batch, opts.seq)});
  if (b.step) {
    parts.push_back(
        {"the CPU device's memory (--device-memory)",
         static_cast<double>(opts.deviceMemory > 0 ? opts.deviceMemory
                                                   : b.step->deviceBudget)});
    double hostBuffers = 0;
    for (const bundle::PlanBuffer &buf : b.step->buffers)
      if (buf.space == "host")
        hostBuffers += static_cast<double>(buf.bytes);
    if (hostBuffers > 0)
      parts.push_back(
          {"host checkpoints and activations of the plan", hostBuffers});
  }
  double need = 0;
  const std::pair<std::string, double> *largest = &parts.front();
  for (const auto &part : parts) {
    need += part.second;
    if (part.second > largest->second)
      largest = &part;
  }
  double avail = availableHostBytes();
  if (avail <= 0 || need <= avail)
    return Status::success();
  auto bytes = [](double n) {
    return formatBytes(static_cast<int64_t>(n), ByteFormat::approx());
  };
  std::string msg =
      "training may need up to " + bytes(need) + " of host memory (";
  for (size_t i = 0; i < parts.size(); ++i)
    msg += (i ? "; " : "") + parts[i].first + ": " + bytes(parts[i].second);
  msg += "), but " + bytes(avail) + " are available; ";
  if (largest->first.find("--device-memory") != std::string::npos)
    msg += "lower --device-memory";
  else if (largest->first.find("AdamW") != std::string::npos)
    msg += "map the state from disk with --host-state-file PATH, or "
           "train a smaller model";
  else
    msg += "lower --batch or --seq (use --micro-batches to keep the step "
           "size)";
  return Status::error(msg);
}

} // namespace mtc::driver
