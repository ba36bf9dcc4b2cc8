//===- Train.cpp - The training loop and generation -------------*- C++ -*-===//
//
// Part of mtc.
//
// One optimizer step:
//   1. zero the gradients;
//   2. for each micro-batch: sample B windows of S+1 tokens (deterministic in
//      (seed, step, micro-batch)), run forward_backward (gradients add up);
//   3. global gradient norm over every tensor (of the mean over micro-batches);
//      clip scale = min(1, clip / (norm + 1e-6));
//   4. AdamW on every tensor with gradScale = clip scale / micro-batches and
//      the scheduled learning rate (linear warmup, cosine decay);
//   5. metrics (JSONL), progress line, periodic validation and checkpoints.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/Train.h"

#include "lib/Bundle/Plan.h"
#include "lib/Format/Safetensors.h"
#include "lib/Support/ByteSize.h"
#include "lib/Support/Files.h"
#include "lib/Support/ThreadPool.h"
#include "lib/Tokenizer/Tokenizer.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/emu/EmulatedDriver.h"
#include "runtime/device/CpuDevice.h"
#include "runtime/device/CudaDevice.h"
#include "runtime/device/Trace.h"
#include "runtime/dist/Communicator.h"
#include "runtime/dist/LocalRank.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/driver/CommandLine.h"
#include "runtime/dataparallel/DataParallel.h"
#include "runtime/driver/DeviceModel.h"
#include "runtime/dataparallel/DeviceReduce.h"
#include "runtime/driver/DeviceSelect.h"
#include "runtime/hf/HFWeights.h"
#include "runtime/checkpoint/InitWeights.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/exec/cuda/CudaBackend.h"
#include "runtime/stream/StreamExecutor.h"
#include "runtime/train/Data.h"
#include "runtime/train/Metrics.h"
#include "runtime/train/Optimizer.h"
#include "runtime/train/Random.h"
#include "runtime/train/Schedule.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <map>
#include <optional>
#include <sstream>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

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

double nowSeconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Mean loss over up to \p batches validation batches.
Expected<double> evaluate(exec::Executor &ex, const train::TokenDataset &data,
                          int64_t B, int64_t S, int64_t batches) {
  train::ValIterator it(data, B);
  std::vector<int32_t> in(B * S), tg(B * S);
  double sum = 0, n = 0;
  for (int64_t i = 0; i < batches; ++i) {
    int64_t rows = it.next(in.data(), tg.data());
    if (rows <= 0)
      break;
    // With a loss mask, each batch's mean is weighted by its trained
    // targets (a batch without any is skipped): the mean over trained
    // targets.
    double w = 1;
    if (data.hasMask()) {
      w = static_cast<double>(
          std::count_if(tg.begin(), tg.begin() + rows * S,
                        [&](int32_t t) { return t != data.ignoreIndex(); }));
      if (w == 0)
        continue;
    }
    Expected<double> l = ex.loss(in.data(), tg.data(), rows, S);
    if (!l)
      return l.status();
    sum += w * *l;
    n += w;
  }
  return n > 0 ? sum / n : std::nan("");
}

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
          if (op.name != "cross_entropy" && op.name != "linear_cross_entropy")
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

/// Samples the next token from logits [V] with temperature and top-k.
int32_t sampleToken(const float *logits, int64_t V, double temperature,
                    int64_t topK, train::Rng &rng) {
  std::vector<std::pair<float, int32_t>> cand(V);
  for (int64_t i = 0; i < V; ++i)
    cand[i] = {logits[i], static_cast<int32_t>(i)};
  if (temperature <= 0) {
    return std::max_element(cand.begin(), cand.end())->second;
  }
  int64_t k = topK > 0 ? std::min(topK, V) : V;
  std::partial_sort(cand.begin(), cand.begin() + k, cand.end(),
                    [](auto &a, auto &b) { return a.first > b.first; });
  double maxl = cand[0].first, total = 0;
  std::vector<double> p(k);
  for (int64_t i = 0; i < k; ++i)
    total += p[i] = std::exp((cand[i].first - maxl) / temperature);
  double r = rng.uniform() * total;
  for (int64_t i = 0; i < k; ++i) {
    r -= p[i];
    if (r <= 0)
      return cand[i].second;
  }
  return cand[k - 1].second;
}

/// Continues \p tokens by \p n tokens. Decodes incrementally with the KV
/// cache; when the cache holds \p context positions it is refilled with the
/// last context/2 tokens. Models the cache cannot decode (ops mixing
/// positions other than attention) fall back to recomputing the last
/// \p context tokens for every new token.
Expected<std::vector<int32_t>> continueTokens(
    exec::Executor &ex,
    const std::function<Expected<exec::Tensor>(const int32_t *, int64_t)>
        &logitsOf,
    std::vector<int32_t> tokens, int64_t n, int64_t context, double temperature,
    int64_t topK, train::Rng &rng, bool useCache) {
  std::vector<int32_t> generated;
  ex.resetCache();
  auto prefill = [&]() {
    ex.resetCache();
    int64_t keep =
        std::min<int64_t>(tokens.size(), std::max<int64_t>(context / 2, 1));
    return ex.decode(tokens.data() + tokens.size() - keep, keep);
  };
  exec::Tensor logits;
  if (useCache) {
    int64_t len = std::min<int64_t>(tokens.size(), context);
    Expected<exec::Tensor> first =
        ex.decode(tokens.data() + tokens.size() - len, len);
    if (first)
      logits = std::move(*first);
    else
      useCache = false;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!useCache) {
      int64_t len = std::min<int64_t>(tokens.size(), context);
      Expected<exec::Tensor> full =
          logitsOf(tokens.data() + tokens.size() - len, len);
      if (!full)
        return full.status();
      logits = std::move(*full);
    }
    int64_t V = logits.shape.back(), rows = logits.numel() / V;
    int32_t next =
        sampleToken(logits.data() + (rows - 1) * V, V, temperature, topK, rng);
    tokens.push_back(next);
    generated.push_back(next);
    if (useCache && i + 1 < n) {
      Expected<exec::Tensor> next = ex.cachedTokens() >= context
                                        ? prefill()
                                        : ex.decode(&tokens.back(), 1);
      if (!next)
        return next.status();
      logits = std::move(*next);
    }
  }
  return generated;
}

/// continueTokens on the host executor \p ex (the training run's sample).
Expected<std::vector<int32_t>>
continueTokens(exec::Executor &ex, std::vector<int32_t> tokens, int64_t n,
               int64_t context, double temperature, int64_t topK,
               train::Rng &rng, bool useCache = true) {
  auto logitsOf = [&](const int32_t *t, int64_t len) {
    return ex.logits(t, 1, len);
  };
  return continueTokens(ex, logitsOf, std::move(tokens), n, context,
                        temperature, topK, rng, useCache);
}

/// continueTokens on \p dm's device; KV-cache decoding is the host
/// executor's only (DeviceModel.h).
Expected<std::vector<int32_t>> continueTokens(DeviceModel &dm,
                                              std::vector<int32_t> tokens,
                                              int64_t n, int64_t context,
                                              double temperature, int64_t topK,
                                              train::Rng &rng, bool useCache) {
  auto logitsOf = [&](const int32_t *t, int64_t len) {
    return dm.logits(t, 1, len);
  };
  return continueTokens(dm.executor(), logitsOf, std::move(tokens), n, context,
                        temperature, topK, rng, useCache && dm.host());
}

std::string bytesToText(const std::vector<int32_t> &tokens) {
  std::string s;
  for (int32_t t : tokens)
    s.push_back(static_cast<char>(t));
  return s;
}

/// The tokenizer text is turned into ids with: \p path (a tokenizer.json or
/// a directory holding one) if given, else the one the bundle carries (models
/// imported from HuggingFace), else none (bytes are tokens).
Expected<std::shared_ptr<tok::Tokenizer>>
modelTokenizer(const bundle::Bundle &b, const std::string &path) {
  if (!path.empty()) {
    Expected<tok::Tokenizer> t = tok::Tokenizer::load(path);
    if (!t)
      return t.status();
    return std::make_shared<tok::Tokenizer>(std::move(*t));
  }
  if (b.hfTokenizer.empty())
    return std::shared_ptr<tok::Tokenizer>();
  Expected<tok::Tokenizer> t =
      tok::Tokenizer::fromJson(b.hfTokenizer, "the model's tokenizer.json");
  if (!t)
    return t.status();
  return std::make_shared<tok::Tokenizer>(std::move(*t));
}

/// \p text as token ids: with the tokenizer, or its bytes.
Expected<std::vector<int32_t>> encodeText(const tok::Tokenizer *tok,
                                          const std::string &text) {
  std::vector<int32_t> ids;
  if (!tok) {
    for (unsigned char c : text)
      ids.push_back(c);
    return ids;
  }
  Expected<std::vector<uint32_t>> e = tok->encode(text);
  if (!e)
    return e.status();
  for (uint32_t id : *e)
    ids.push_back(static_cast<int32_t>(id));
  return ids;
}

std::string decodeText(const tok::Tokenizer *tok,
                       const std::vector<int32_t> &ids) {
  if (!tok)
    return bytesToText(ids);
  std::vector<uint32_t> u(ids.begin(), ids.end());
  return tok->decode(u);
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

/// The first SIGINT, SIGTERM or SIGUSR1 asks the training loop to stop after
/// the current step (with a checkpoint); the handler then restores the
/// default actions, so a second one ends the process at once. SIGUSR1 is
/// the one Open MPI's mpirun forwards to the ranks (a SIGINT or SIGTERM
/// makes mpirun end them itself, docs/distributed.md, "Faults").
std::atomic<int> stopSignal{0};

/// What onStopSignal prints, composed (with the tool's name) before it is
/// installed: a handler only writes what is ready.
char stopMessage[256];
size_t stopMessageLength = 0;

extern "C" void onStopSignal(int sig) {
  stopSignal.store(sig);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGUSR1, SIG_DFL);
  ssize_t ignored = ::write(2, stopMessage, stopMessageLength);
  (void)ignored;
}

/// Installs onStopSignal for SIGINT, SIGTERM and SIGUSR1 while alive.
class StopSignals {
public:
  /// \p tool names the program in the message.
  explicit StopSignals(const std::string &tool) {
    int n = std::snprintf(stopMessage, sizeof stopMessage,
                          "\n%s: stopping after this step (and saving a "
                          "checkpoint with --out); send the signal again to "
                          "stop at once\n",
                          tool.c_str());
    stopMessageLength =
        std::min(sizeof stopMessage - 1, static_cast<size_t>(std::max(n, 0)));
    stopSignal.store(0);
    struct sigaction sa {};
    sa.sa_handler = onStopSignal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &oldInt);
    ::sigaction(SIGTERM, &sa, &oldTerm);
    ::sigaction(SIGUSR1, &sa, &oldUsr1);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &oldInt, nullptr);
    ::sigaction(SIGTERM, &oldTerm, nullptr);
    ::sigaction(SIGUSR1, &oldUsr1, nullptr);
  }
  /// The signal received (0: none).
  int received() const { return stopSignal.load(); }

private:
  struct sigaction oldInt {
  }, oldTerm{}, oldUsr1{};
};

/// Waits (at most 2 s) until whoever reads this process's stdout and
/// stderr through a pipe -- mpirun forwarding a rank's output -- has read
/// everything written so far: mpirun ends the job as soon as a rank exits
/// non-zero, and what it has not read then is lost.
void drainPipedOutput() {
  for (int fd : {1, 2})
    for (int wait = 0; wait < 200; ++wait) {
      int unread = 0;
      if (::ioctl(fd, FIONREAD, &unread) != 0 || unread <= 0)
        break;
      ::usleep(10000);
    }
}

/// "SIGINT", "SIGTERM" or "SIGUSR1".
const char *stopSignalName(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGUSR1";
}

/// Test hook MTC_TEST_SIGNAL_AT_STEP=N[xK]: raises SIGINT K times (default 1)
/// at the start of step N, as a user pressing Ctrl-C K times would.
void testSignalHook(int64_t step) {
  const char *env = std::getenv("MTC_TEST_SIGNAL_AT_STEP");
  if (!env || !*env)
    return;
  char *end = nullptr;
  long long at = std::strtoll(env, &end, 10);
  long long times = *end == 'x' ? std::strtoll(end + 1, nullptr, 10) : 1;
  if (at != step)
    return;
  for (long long i = 0; i < times; ++i)
    std::raise(SIGINT);
}

/// The name of a parameter tensor holding a NaN or an infinity ("" : none).
std::string firstNonFinite(const exec::ParamStore &store) {
  for (const exec::ParamSlot &s : store.slots()) {
    const float *v = s.value.data();
    for (size_t i = 0; i < s.value.size(); ++i)
      if (!std::isfinite(v[i]))
        return s.name;
  }
  return "";
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

namespace {

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

  /// Runs every step; returns the process exit code.
  int run() {
    if (opts.threads > 0)
      cpu::setThreads(opts.threads);
    for (Status (TrainRun::*stage)() :
         {&TrainRun::checkModel, &TrainRun::checkRanks, &TrainRun::claimOutputs,
          &TrainRun::openData, &TrainRun::checkResume,
          &TrainRun::checkHostMemory, &TrainRun::createState}) {
      if (Status st = (this->*stage)(); !st.ok())
        return fail(st);
      if (nothingToTrain)
        return 0;
    }
    for (Status (TrainRun::*stage)() :
         {&TrainRun::initializeWeights, &TrainRun::createExecutors,
          &TrainRun::createDataParallel, &TrainRun::createOptimizer,
          &TrainRun::openMetrics})
      if (Status st = (this->*stage)(); !st.ok())
        return fail(st);
    if (Status st = printHeader(); !st.ok())
      return fail(st);
    if (Status st = runSteps(); !st.ok())
      return fail(st);
    return finish();
  }

private:
  /// Prints "TOOL: error: MESSAGE" and returns 1.
  int fail(const Status &st) {
    // One write: the ranks' lines do not interleave.
    err << (opts.toolName + ": error: " + rankTag() + st.message() + "\n");
    err.flush();
    return 1;
  }

  /// Test hook MTC_TEST_KILL_RANK=R@N: rank R of a data-parallel run is
  /// killed (SIGKILL, no cleanup) at the start of step N, as a crashed node
  /// would stop (docs/distributed.md, "Faults").
  void testKillHook(int64_t step) const {
    const char *env = std::getenv("MTC_TEST_KILL_RANK");
    if (!env || ranks == 1)
      return;
    char *end = nullptr;
    long r = std::strtol(env, &end, 10);
    if (*end == '@' && r == rank && std::strtoll(end + 1, nullptr, 10) == step)
      std::raise(SIGKILL);
  }

  /// "rank R of N: " in a data-parallel run ("" otherwise).
  std::string rankTag() const {
    if (ranks == 1)
      return "";
    return "rank " + std::to_string(rank) + " of " + std::to_string(ranks) +
           ": ";
  }

  /// Data parallelism (docs/distributed.md): this rank and the ranks, and
  /// before anything is allocated, every rank's binary, model and options
  /// against rank 0's.
  Status checkRanks() {
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
    if (opts.gradDtype == "bf16")
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

  /// --deterministic-reduce with several ranks: what the bit-identical sums
  /// need. A step plan accumulates a rank's micro-batches in one device
  /// buffer, so it must run one micro-batch per rank; a parameter with
  /// several param_grads in one function (several gradient terms per
  /// micro-batch) is added to the running sum term by term in one process.
  Status checkSplitMicroBatches() {
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
            if (op.name == "param_grad" && ++count[op.symbol] == 2 &&
                twice.empty())
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

  /// The gradient sums over the ranks, started as each layer instance's
  /// gradients are final: by the host executor after each instance's
  /// backward (in the last micro-batch), by the stream executor after each
  /// group's gradients reach host memory.
  Status createDataParallel() {
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

  /// The model can be trained at --batch and --seq; the optimizer
  /// placement (immediate needs clip 0 and the plan's gradient ring).
  Status checkModel() {
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
    bf16Grads = opts.gradDtype == "bf16";
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
      return Status::error(
          "--seq " + std::to_string(opts.seq) +
          " exceeds the model's max_seq " +
          std::to_string(static_cast<int64_t>(maxSeq->second)));
    return bundle::checkTokenShapes(b, rankBatch(opts), opts.seq);
  }

  /// Outputs against inputs first (nothing is touched yet), then the one
  /// writer of --out, before any training time is spent.
  Status claimOutputs() {
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

  /// The tokenizer, the loss mask and the token data.
  Status openData() {
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

  /// Checkpoints (checkpoint/Checkpoint.h): the data file's identity, the --out
  /// directory, and with --resume the checkpoint's state against these
  /// options, all checked before anything is allocated.
  Status checkResume() {
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

  /// Checked before allocating: parameters, gradients and AdamW moments
  /// (16 bytes per parameter), the step's working set, and under streaming
  /// the CPU device's memory and the plan's host buffers, each named.
  Status checkHostMemory() {
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

  /// The parameter state, pinned under streaming, read from the checkpoint
  /// with --resume or initialised from the seed.
  Status createState() {
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

  /// --init-from and --hf weights over the initialised state.
  Status initializeWeights() {
    if (!opts.initFrom.empty()) {
      if (!ckDir.empty() || !opts.hfWeights.empty())
        return Status::error(
            "--init-from starts a new run from given weights; " +
            (ckDir.empty() ? "the --hf directory '" + opts.hfWeights +
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
      const bool checkpoint =
          fs::exists(from + "/trainer_state.json", ec) ||
          (!fs::exists(from, ec) &&
           fs::exists(from + ".bak/trainer_state.json", ec));
      size_t n = 0;
      auto load = [&](const std::string &path) {
        Expected<size_t> read = loadInitWeights(*store, path);
        n = read ? *read : 0;
        return read.status();
      };
      if (Status st = checkpoint ? readStableCheckpoint(from, load)
                                 : load(opts.initFrom);
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

  /// The host executor (validation, sampling, and steps without a plan) and
  /// under streaming the device of --device with its own executor.
  Status createExecutors() {
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

  /// Streaming: the bundle's step plan runs on the device of --device (the
  /// CPU device, or a CudaDevice with the CUDA backend).
  Status createStreaming() {
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
      return Status::error("the bundle's step plan is for --batch " +
                           std::to_string(plan.batch) + " --seq " +
                           std::to_string(plan.seq) + " --micro-batches " +
                           std::to_string(plan.microBatches) + ", not " + ours +
                           hint);
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
      return onDevice.status().withPrefix("--device " + opts.device);
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

  /// The device of --device with \p budget bytes of memory (and for CUDA its
  /// backend).
  Status createDevice(int64_t budget) {
    if (opts.device == "cpu") {
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
      return Status::error("--device " + opts.device + ": " + driver.message());
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
      return Status::error("--device " + opts.device + ": " + be.message());
    backend = std::move(*be);
    streamDevice = std::move(gpu);
    return Status::success();
  }

  /// AdamW on the kernels' thread count, and under streaming the deferred
  /// AdamW on a pool of its own; the schedule and the batch sampler.
  Status createOptimizer() {
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

  /// --metrics: resuming appends, after dropping the records of steps after
  /// the checkpoint (an interrupted run may have logged them).
  Status openMetrics() {
    if (opts.metrics.empty() || rank != 0)
      return Status::success();
    Status trimmed = startStep > 0 ? trimMetrics(opts.metrics, startStep)
                                   : Status::success();
    Expected<train::JsonlWriter> w =
        trimmed.ok() ? train::JsonlWriter::open(opts.metrics, startStep > 0)
                     : Expected<train::JsonlWriter>(trimmed);
    if (!w)
      return w.status();
    metrics = std::move(*w);
    haveMetrics = true;
    return Status::success();
  }

  /// The model, the data, the step and the device, before the first step;
  /// the device's error if it cannot say how much memory is in use.
  Status printHeader() {
    tokensPerStep = opts.batch * opts.seq * opts.microBatches;
    out << "model " << b.model << ": " << store->totalParams()
        << " parameters, " << b.totalLayerInstances() << " layer instances\n"
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
                  ? " (checkpoint every " +
                        std::to_string(plan.checkpointEvery) + " instances)"
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
            << " bytes; in use on the device " << total - free << " of "
            << total << "\n";
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

  /// "; the last checkpoint (DIR, step N) is untouched" when there is one.
  std::string untouched() const {
    if (outDir.empty() || savedStep == 0)
      return "";
    return "; the last checkpoint (" + opts.outDir + ", step " +
           std::to_string(savedStep) + ") is untouched";
  }

  /// The step loop, to --steps, --stop-after or a stop signal.
  Status runSteps() {
    // Rank 0 alone prints progress.
    if (rank != 0)
      quiet.reset(std::fopen("/dev/null", "w"));
    progress.emplace(opts.steps, quiet ? quiet.get() : stdout, 10);
    start = nowSeconds();
    lastStep =
        opts.stopAfter > 0 ? std::min(opts.stopAfter, opts.steps) : opts.steps;
    lastVal = ck.valLoss;
    lastValStep = ck.valStep;
    // The step of the last checkpoint in --out (the one resumed from, if it
    // is there).
    savedStep = !ckDir.empty() && sameFile(ckDir, outDir) ? startStep : 0;
    signals.emplace(opts.toolName);
    for (int64_t step = startStep + 1; step <= lastStep; ++step) {
      testSignalHook(step);
      if (Status st = runStep(step); !st.ok())
        return st;
      if (stoppedBy) {
        lastStep = step;
        break;
      }
    }
    progress->finish();
    if (streamer)
      return streamer->flush();
    return Status::success();
  }

  /// One step: forward and backward over every micro-batch, the update,
  /// then metrics, evaluation and saving as due.
  Status runStep(int64_t step) {
    testKillHook(step);
    double t0 = nowSeconds();
    double lr = sched.at(step);
    if (immediate)
      if (Status st = updateImmediately(step, lr); !st.ok())
        return st;
    Expected<double> stepLoss = forwardBackward(step);
    if (!stepLoss)
      return stepLoss.status();
    double loss = *stepLoss;
    // Summed in the store's order whichever placement computed the parts.
    double sumsq = 0;
    if (sharded) {
      // Each rank's parts, summed over the ranks.
      Expected<double> all = dp->sum(sharded->sumOfSquares());
      if (!all)
        return all.status();
      sumsq = *all;
    } else if (immediate)
      for (double s : slotSumsq)
        sumsq += s;
    else
      for (const exec::ParamSlot &s : store->slots())
        sumsq +=
            s.gradBf16
                ? train::sumOfSquaresBf16(s.gradBf16, s.value.size(),
                                          pool.get())
                : train::sumOfSquares(s.grad.data(), s.grad.size(), pool.get());
    // The gradients hold the sum over micro-batches (and ranks) of each
    // one's mean.
    double norm = std::sqrt(sumsq) / gradParts();
    // A diverged step is never applied: the weights (and every checkpoint)
    // stay those of the last good step.
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      progress->finish();
      bool badLoss = !std::isfinite(loss);
      std::ostringstream msg;
      msg << "the " << (badLoss ? "loss" : "gradient norm") << " became "
          << (badLoss ? loss : norm) << " at step " << step
          << (immediate ? "; the layers whose gradients were final before it "
                          "was seen were updated (immediate optimizer "
                          "placement), the others not"
                        : "; the step was not applied")
          << untouched() << "; lower --lr or enable --clip";
      return Status::error(msg.str());
    }
    if (!immediate)
      if (Status st = update(step, lr, norm); !st.ok())
        return st;
    double dt = nowSeconds() - t0;
    if (std::isnan(firstLoss))
      firstLoss = loss;
    lastLoss = loss;
    progress->update(step, loss, lr, static_cast<double>(tokensPerStep));

    bool evalNow = (opts.evalEvery > 0 && step % opts.evalEvery == 0) ||
                   step == opts.steps;
    // SIGINT/SIGTERM: this step is the last; it is saved like the end.
    stoppedBy = signals->received();
    if (dp) {
      // Every rank stops after the same step, and names the same signal
      // (exit 128 + it: mpirun reports the first rank's).
      Expected<bool> any = dp->any(stoppedBy != 0);
      if (!any)
        return any.status();
      for (int sig : {SIGUSR1, SIGTERM, SIGINT}) {
        if (!*any)
          break;
        Expected<bool> named = dp->any(stoppedBy == sig);
        if (!named)
          return named.status();
        if (*named) {
          stoppedBy = sig;
          break;
        }
      }
    }
    // Every rank takes part in a save (a sharded optimizer gathers the
    // moments); rank 0 writes it.
    bool saveNow = !opts.outDir.empty() &&
                   ((opts.saveEvery > 0 && step % opts.saveEvery == 0) ||
                    step == lastStep || stoppedBy != 0);
    // The host executor and checkpoints read updated weights.
    if (streamer && (evalNow || saveNow || step == lastStep || stoppedBy))
      if (Status st = streamer->flush(); !st.ok())
        return st;
    double valLoss = std::nan("");
    if (evalNow && rank == 0) {
      Expected<double> v =
          evaluate(*ex, *data, opts.batch, opts.seq, opts.evalBatches);
      if (!v)
        return v.status();
      valLoss = *v;
    }
    if (haveMetrics)
      if (Status st = writeMetrics(step, loss, lr, norm, dt, evalNow, valLoss);
          !st.ok())
        return st;
    if (evalNow && std::isfinite(valLoss)) {
      lastVal = valLoss;
      lastValStep = step;
      progress->finish();
      out << "step " << step << ": train loss " << std::fixed
          << std::setprecision(4) << loss << ", val loss " << valLoss
          << std::defaultfloat << "\n";
      out.flush();
    }
    return saveNow ? save(step, loss) : Status::success();
  }

  /// The mean loss of step \p step's micro-batches; the gradients hold
  /// their sum.
  Expected<double> forwardBackward(int64_t step) {
    // Data parallel: the windows one process would draw; this rank's rows
    // of each micro-batch, or (--deterministic-reduce) its micro-batches.
    const int64_t rows = splitMB ? 0 : rank * localBatch * opts.seq;
    const int64_t firstMB = splitMB ? rank * localMicroBatches : 0;
    std::vector<double> losses;
    if (dp)
      dp->beginStep();
    else if (deviceReduce)
      deviceReduce->beginStep();
    if (streamer) {
      // Layer-major: every micro-batch's tokens at once.
      std::vector<const int32_t *> ins, tgs;
      for (int64_t m = 0; m < localMicroBatches; ++m) {
        sampler->sample(step - 1, firstMB + m, streamIn[m].data(),
                        streamTg[m].data());
        ins.push_back(streamIn[m].data() + rows);
        tgs.push_back(streamTg[m].data() + rows);
      }
      Expected<std::vector<double>> ls = streamer->step(ins, tgs);
      if (!ls)
        return ls.status();
      losses = std::move(*ls);
    } else {
      // Split micro-batches, more than one per rank: each micro-batch's
      // gradients apart (all but the last copied out), so that the ranks
      // can add them in one process's order.
      const bool apart = splitMB && localMicroBatches > 1;
      std::vector<std::vector<std::vector<float>>> earlier;
      store->zeroGrads();
      for (int64_t m = 0; m < localMicroBatches; ++m) {
        sampler->sample(step - 1, firstMB + m, in.data(), tg.data());
        if (apart && m > 0) {
          std::vector<std::vector<float>> &g = earlier.emplace_back();
          for (exec::ParamSlot &s : store->slots())
            g.emplace_back(s.grad.begin(), s.grad.end());
          store->zeroGrads();
        }
        // In the last micro-batch each instance's gradient is final after
        // its backward: its sum over the ranks starts then.
        if (dp && !apart && m + 1 == localMicroBatches)
          ex->setInstanceGradHook([this](const std::string &l, int64_t i) {
            dp->instanceDone(l, i);
          });
        Expected<double> l = ex->forwardBackward(
            in.data() + rows, tg.data() + rows, localBatch, opts.seq);
        ex->setInstanceGradHook(nullptr);
        if (!l) {
          if (dp)
            (void)dp->finishGradients();
          return l.status();
        }
        losses.push_back(*l);
      }
      if (apart)
        if (Status st = dp->sumGradientsInOrder(earlier); !st)
          return st;
      // --grad-dtype bf16: the sums, rounded as a device's copy rounds them.
      if (bf16Grads)
        for (exec::ParamSlot &s : store->slots())
          train::roundToBf16(s.grad.data(), s.grad.size(), pool.get());
    }
    double loss = 0;
    if (!dp) {
      if (deviceReduce)
        if (Status st = deviceReduce->check(); !st)
          return st;
      for (double l : losses)
        loss += l;
      return loss / opts.microBatches;
    }
    if (!immediate)
      if (Status st = dp->finishGradients(); !st)
        return st;
    if (splitMB) {
      // Every micro-batch's loss, added in one process's order.
      Expected<double> all = dp->sumInOrder(losses);
      if (!all)
        return all.status();
      return *all / opts.microBatches;
    }
    for (double l : losses)
      loss += l;
    return dp->mean(loss / opts.microBatches);
  }

  /// AdamW at \p lr with the gradients clipped to --clip by their global
  /// \p norm: now, or under streaming deferred to just before each layer
  /// instance's weights are next loaded (bit-identical to updating here).
  Status update(int64_t step, double lr, double norm) {
    double scale = 1.0;
    if (opts.clip > 0 && norm > opts.clip)
      scale = opts.clip / (norm + 1e-6);
    const double n = static_cast<double>(gradParts());
    if (sharded)
      return dp->shardedUpdate(*adamw, step, static_cast<float>(lr),
                               static_cast<float>(scale / n));
    if (!streamer) {
      adamw->step(tensors, step, static_cast<float>(lr),
                  static_cast<float>(scale / n));
      return Status::success();
    }
    float flr = static_cast<float>(lr);
    float fscale = static_cast<float>(scale / n);
    train::AdamW &deferred = *deferredAdamW;
    return streamer->deferUpdate([&deferred, step, flr, fscale](
                                     const std::vector<exec::ParamSlot *> &ss) {
      for (exec::ParamSlot *s : ss)
        deferred.step(train::AdamWTensor{s->value.data(), s->m.data(),
                                         s->v.data(), s->grad.data(),
                                         s->value.size(), s->decay(),
                                         s->gradBf16},
                      step, flr, fscale);
    });
  }

  /// The immediate placement (clip 0): from this step's backward on, each
  /// group's update runs on the optimizer stream as soon as its gradients
  /// are in the plan's ring. Each tensor's sum of squares is kept for the
  /// gradient norm; a group with a non-finite one, and every group after
  /// it, is left unchanged. The error of flushing a pending update.
  Status updateImmediately(int64_t step, double lr) {
    if (slotIndex.empty())
      for (size_t i = 0; i < store->slots().size(); ++i)
        slotIndex[&store->slots()[i]] = i;
    slotSumsq.assign(store->slots().size(), 0.0);
    nonFinite = false;
    float flr = static_cast<float>(lr);
    float fscale = static_cast<float>(1.0 / static_cast<double>(gradParts()));
    return streamer->updateImmediately(
        [this, step, flr, fscale](const std::vector<exec::ParamSlot *> &ss,
                                  const std::vector<const float *> &grads) {
          // Data parallel: the ring slot's gradients summed over the ranks
          // first, on this (the optimizer stream's) thread.
          if (dp)
            if (Status st = dp->reduceNow(ss, grads); !st)
              throw std::runtime_error(st.message());
          bool finite = true;
          for (size_t i = 0; i < ss.size(); ++i) {
            double s = train::sumOfSquares(grads[i], ss[i]->value.size(),
                                           optPool.get());
            slotSumsq[slotIndex.at(ss[i])] = s;
            finite = finite && std::isfinite(s);
          }
          if (!finite)
            nonFinite = true;
          if (nonFinite)
            return;
          for (size_t i = 0; i < ss.size(); ++i)
            deferredAdamW->step(
                train::AdamWTensor{ss[i]->value.data(), ss[i]->m.data(),
                                   ss[i]->v.data(), grads[i],
                                   ss[i]->value.size(), ss[i]->decay()},
                step, flr, fscale);
        });
  }

  /// One JSONL record of step \p step (with the streaming counters under
  /// streaming).
  Status writeMetrics(int64_t step, double loss, double lr, double norm,
                      double dt, bool evalNow, double valLoss) {
    std::vector<std::pair<std::string, train::JsonValue>> f = {
        {"step", step},
        {"loss", loss},
        {"lr", lr},
        {"grad_norm", norm},
        {"tokens_per_s", tokensPerStep / dt},
        {"step_time_s", dt}};
    if (evalNow && std::isfinite(valLoss))
      f.push_back({"val_loss", valLoss});
    if (dp || deviceReduce)
      f.push_back({"dist_backend", deviceReduce ? "nccl" : "mpi"});
    if (!dp && deviceReduce)
      f.push_back({"allreduce_bytes", deviceReduce->bytes()});
    if (dp) {
      f.push_back({"ranks", static_cast<int64_t>(ranks)});
      f.push_back({"allreduce_bytes", dp->allreduceBytes()});
      f.push_back({"allreduce_exposed_s", dp->exposedSeconds()});
      f.push_back({"host_state_bytes",
                   store->hostBytes() + (sharded ? sharded->hostBytes() : 0)});
      if (!streamer)
        f.push_back({"host_bytes", hostBytes});
    }
    if (streamer) {
      const stream::StepStats &ss = streamer->lastStats();
      f.push_back({"h2d_bytes", ss.h2dBytes});
      f.push_back({"d2h_bytes", ss.d2hBytes});
      f.push_back({"weight_loads", ss.weightLoads});
      f.push_back({"device_peak_bytes", ss.devicePeakBytes});
      f.push_back({"device_budget_bytes", ss.deviceBudgetBytes});
      f.push_back({"host_bytes", hostBytes});
      f.push_back({"overlap", ss.overlap});
    }
    return metrics.write(f);
  }

  /// A checkpoint of step \p step in --out (never of non-finite weights).
  Status save(int64_t step, double loss) {
    if (std::string bad = firstNonFinite(*store); !bad.empty()) {
      progress->finish();
      return Status::error(
          "parameter '" + bad + "' holds a NaN or an infinity after step " +
          std::to_string(step) + "; not saving it" + untouched());
    }
    if (sharded)
      if (Status st = dp->gatherMoments(/*gather=*/true); !st)
        return st;
    TrainerState state{step, loss, lastVal, lastValStep, opts, dataId};
    Status st = rank == 0 ? writeCheckpoint(outDir, b, *store, state)
                          : Status::success();
    if (sharded)
      sharded->releaseMoments();
    if (!st.ok())
      return Status::error("saving the checkpoint: " + st.message());
    savedStep = step;
    return Status::success();
  }

  /// The trace, the summary, how the run stopped and the sample; returns
  /// the exit code.
  int finish() {
    if (!opts.trace.empty() && streamDevice && rank == 0) {
      if (Status st = trace.write(opts.trace); !st)
        return fail(st);
      out << "trace: " << opts.trace << "\n";
    }
    double elapsed = nowSeconds() - start;
    int64_t ran = lastStep - startStep;
    out << "trained " << ran << " steps in " << std::fixed
        << std::setprecision(1) << elapsed << " s: loss "
        << std::setprecision(4) << firstLoss << " -> " << lastLoss << ", "
        << std::setprecision(0) << ran * tokensPerStep / elapsed << " tokens/s"
        << std::defaultfloat << "\n";
    if (!opts.outDir.empty())
      out << "checkpoint: " << opts.outDir << " (step " << lastStep << ")\n";
    if (stoppedBy) {
      if (rank == 0) {
        out.flush();
        // One write: mpirun forwards a rank's output in the pieces written.
        err << (opts.toolName + ": stopped by " + stopSignalName(stoppedBy) +
                " after step " + std::to_string(lastStep) + " of " +
                std::to_string(opts.steps) +
                (outDir.empty() ? std::string("; no checkpoint (no --out)")
                                : "; continue with --resume " + opts.outDir) +
                "\n");
        err.flush();
      }
      // Data parallel: mpirun ends the job as soon as a rank exits
      // non-zero, and output it has not printed by then is lost. So the
      // other ranks wait until rank 0 has saved and said so, and end with 0;
      // rank 0 ends last with 128 + the signal, the status mpirun reports.
      if (dp) {
        std::fflush(nullptr);
        drainPipedOutput();
        (void)dp->sum(0);
        if (rank != 0)
          return 0;
        ::usleep(300000);
      }
      return 128 + stoppedBy;
    }
    if (lastStep < opts.steps)
      out << "stopped after step " << lastStep << " of " << opts.steps
          << " (--stop-after); continue with --resume\n";
    if (opts.sampleTokens > 0 && rank == 0) {
      train::Rng rng(opts.seed, 99);
      Expected<std::vector<int32_t>> prompt =
          encodeText(tok.get(), opts.samplePrompt);
      if (!prompt)
        return fail(Status::error("--sample-prompt: " + prompt.message()));
      if (prompt->empty())
        prompt->push_back(tok ? 0 : '\n');
      Expected<std::vector<int32_t>> gen = continueTokens(
          *ex, *prompt, opts.sampleTokens, opts.seq, 0.8, 40, rng);
      if (!gen)
        return fail(gen.status());
      out << "sample:\n"
          << opts.samplePrompt << decodeText(tok.get(), *gen) << "\n";
    }
    return 0;
  }

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

  /// The means the summed gradients add up: one per micro-batch and rank
  /// (one per micro-batch when the ranks split the micro-batches).
  int64_t gradParts() const {
    return opts.microBatches * (splitMB ? 1 : ranks);
  }
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

int generateImpl(const std::string &ckpt, const GenerateOptions &opts,
                 std::ostream &out, std::ostream &err) {
  // The checkpoint resume would accept, checked as resume checks it, read
  // whole from one checkpoint while a run may be replacing it.
  bundle::Bundle b;
  std::unique_ptr<exec::ParamStore> stored;
  int64_t recordedSeq = 256;
  Status loaded = readStableCheckpoint(ckpt, [&](const std::string &dir) {
    if (Status st = verifyCheckpointFiles(dir); !st.ok())
      return st;
    Expected<bundle::Bundle> read = bundle::readFile(dir + "/model.mtb");
    if (!read)
      return Status::error(read.message() + " (is '" + dir +
                           "' a checkpoint written by mtc train --out?)");
    b = std::move(read).value();
    if (Status st = bundle::checkTokenShapes(b, 1, -1); !st.ok())
      return st;
    Expected<SafetensorsFile> weights =
        SafetensorsFile::open(dir + "/model.safetensors");
    if (!weights)
      return weights.status();
    Expected<std::unique_ptr<exec::ParamStore>> created =
        exec::ParamStore::create(b);
    if (!created)
      return created.status();
    stored = std::move(*created);
    for (exec::ParamSlot &s : stored->slots())
      if (Status st =
              weights->readAsF32(s.name, s.value.data(), s.value.size());
          !st.ok())
        return st;
    // options.seq (checkpoint/Checkpoint.h); older checkpoints: seq.
    Expected<TrainerState> state = readTrainerState(dir);
    if (state && state->options.seq > limits::kSeq)
      return Status::error(dir + "/trainer_state.json: options.seq " +
                           std::to_string(state->options.seq) +
                           " is more than the limit of --seq and --context, " +
                           std::to_string(limits::kSeq));
    if (state && state->options.seq > 0)
      recordedSeq = state->options.seq;
    return Status::success();
  });
  if (!loaded.ok()) {
    err << opts.toolName << ": error: " << loaded.message() << "\n";
    return 1;
  }
  exec::ParamStore &store = *stored;
  int64_t context = opts.context > 0 ? opts.context : recordedSeq;
  // A learned position table bounds the context: the KV cache takes the
  // rows at the tokens' absolute positions.
  if (Status st = bundle::checkSequenceFits(b, context, "--context");
      !st.ok()) {
    err << opts.toolName << ": error: " << st.message() << "\n";
    return 1;
  }
  int64_t vocab = b.vocabulary();
  Expected<std::shared_ptr<tok::Tokenizer>> tokenizer =
      modelTokenizer(b, opts.tokenizer);
  if (!tokenizer) {
    err << opts.toolName << ": error: " << tokenizer.message() << "\n";
    return 1;
  }
  std::shared_ptr<tok::Tokenizer> tok = *tokenizer;
  if (!tok && vocab != 256) {
    err << opts.toolName << ": error: model '" << b.model
        << "' has a vocabulary of " << vocab
        << " and no tokenizer: give --tokenizer tokenizer.json (models "
           "imported with --hf DIR carry DIR/tokenizer.json)\n";
    return 1;
  }
  if (tok && tok->vocabSize() > static_cast<uint32_t>(vocab)) {
    err << opts.toolName << ": error: " << tok->name() << " has "
        << tok->vocabSize() << " tokens, more than the model's vocabulary of "
        << vocab << "\n";
    return 1;
  }
  Expected<std::unique_ptr<DeviceModel>> dm =
      DeviceModel::open(b, store, opts.device, opts.deviceMemory);
  if (!dm) {
    err << opts.toolName << ": error: generate: " << dm.message() << "\n";
    return 1;
  }
  if (!(*dm)->host())
    err << "device " << (*dm)->describe() << "\n";
  train::Rng rng(opts.seed, 99);
  Expected<std::vector<int32_t>> prompt = encodeText(tok.get(), opts.prompt);
  if (!prompt) {
    err << opts.toolName << ": error: --prompt: " << prompt.message() << "\n";
    return 1;
  }
  if (prompt->empty())
    prompt->push_back(tok ? 0 : '\n');
  Expected<std::vector<int32_t>> gen =
      continueTokens(**dm, *prompt, opts.tokens, context, opts.temperature,
                     opts.topK, rng, opts.useCache);
  if (!gen) {
    err << opts.toolName << ": error: " << gen.message() << "\n";
    return 1;
  }
  out << opts.prompt << decodeText(tok.get(), *gen) << "\n";
  return 0;
}

} // namespace

int train(const bundle::Bundle &b, const TrainOptions &opts, std::ostream &out,
          std::ostream &err) {
  // Data parallel: rank 0 alone prints; every rank's errors are printed, and
  // a rank that fails ends every rank (the others would wait for it in
  // their next collective).
  dist::Communicator *world =
      opts.world && opts.world->size() > 1 ? opts.world.get() : nullptr;
  std::ostream discard(nullptr);
  std::ostream &o = world && world->rank() != 0 ? discard : out;
  std::string tag = world ? "rank " + std::to_string(world->rank()) + " of " +
                                std::to_string(world->size()) + ": "
                          : "";
  int code = 1;
  try {
    code = TrainRun(b, opts, o, err).run();
  } catch (const std::bad_alloc &) {
    err << opts.toolName << ": error: " << tag << "out of host memory (batch "
        << opts.batch << " x seq " << opts.seq << "); lower --batch or --seq\n";
  } catch (const std::exception &e) {
    err << opts.toolName << ": error: " << tag << e.what() << "\n";
  }
  if (world && code != 0 && code < 128) {
    err.flush();
    out.flush();
    world->abort(code);
  }
  return code;
}

int generate(const std::string &dir, const GenerateOptions &opts,
             std::ostream &out, std::ostream &err) {
  try {
    return generateImpl(dir, opts, out, err);
  } catch (const std::exception &e) {
    err << opts.toolName << ": error: " << e.what() << "\n";
  }
  return 1;
}

} // namespace mtc::driver
