//===- TrainStep.cpp - The training run's steps and its end -----*- C++ -*-===//
//
// Part of mtc.
//
// One optimizer step:
//   1. zero the gradients;
//   2. for each micro-batch: sample B windows of S+1 tokens (deterministic in
//      (seed, step, micro-batch)), run forward_backward (gradients add up);
//   3. global gradient norm over every tensor (of the mean over micro-batches);
//      clip scale = clip / (norm + 1e-6) when norm > clip (train::clipScale);
//   4. AdamW on every tensor with gradScale = clip scale / micro-batches and
//      the scheduled learning rate (linear warmup, cosine decay);
//   5. metrics (JSONL), progress line, periodic validation and checkpoints.
//
// Under a step plan the stream executor runs steps 1-2 on the device and
// AdamW is deferred, immediate or sharded (docs/training.md). Also here: the
// stop signals and the end of the run (trace, summary, sample). The stages
// of TrainRun (TrainRun.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/TrainRun.h"

#include "lib/Support/Files.h"
#include "runtime/dist/Communicator.h"
#include "runtime/driver/Generate.h"
#include "runtime/train/Random.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <sstream>
#include <stdexcept>
#include <sys/ioctl.h>
#include <unistd.h>

namespace mtc::driver {

namespace {

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

} // namespace

StopSignals::StopSignals(const std::string &tool) {
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

StopSignals::~StopSignals() {
  ::sigaction(SIGINT, &oldInt, nullptr);
  ::sigaction(SIGTERM, &oldTerm, nullptr);
  ::sigaction(SIGUSR1, &oldUsr1, nullptr);
}

int StopSignals::received() const { return stopSignal.load(); }

namespace {

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

Status TrainRun::runSteps() {
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

Status TrainRun::runStep(int64_t step) {
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
              ? train::sumOfSquaresBf16(s.gradBf16, s.value.size(), pool.get())
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

  bool evalNow =
      (opts.evalEvery > 0 && step % opts.evalEvery == 0) || step == opts.steps;
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

Expected<double> TrainRun::forwardBackward(int64_t step) {
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

Status TrainRun::update(int64_t step, double lr, double norm) {
  const double scale = train::clipScale(norm, opts.clip);
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
  return streamer->deferUpdate(
      [&deferred, step, flr, fscale](const std::vector<exec::ParamSlot *> &ss) {
        for (exec::ParamSlot *s : ss)
          deferred.step(train::AdamWTensor{s->value.data(), s->m.data(),
                                           s->v.data(), s->grad.data(),
                                           s->value.size(), s->decay(),
                                           s->gradBf16},
                        step, flr, fscale);
      });
}

Status TrainRun::updateImmediately(int64_t step, double lr) {
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
          double s =
              train::sumOfSquares(grads[i], ss[i]->value.size(), optPool.get());
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
                                 ss[i]->v.data(), grads[i], ss[i]->value.size(),
                                 ss[i]->decay()},
              step, flr, fscale);
      });
}

Status TrainRun::writeMetrics(int64_t step, double loss, double lr, double norm,
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

Status TrainRun::save(int64_t step, double loss) {
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
  Status st =
      rank == 0 ? writeCheckpoint(outDir, b, *store, state) : Status::success();
  if (sharded)
    sharded->releaseMoments();
  if (!st.ok())
    return Status::error("saving the checkpoint: " + st.message());
  savedStep = step;
  return Status::success();
}

std::string TrainRun::untouched() const {
  if (outDir.empty() || savedStep == 0)
    return "";
  return "; the last checkpoint (" + opts.outDir + ", step " +
         std::to_string(savedStep) + ") is untouched";
}

int TrainRun::finish() {
  if (!opts.trace.empty() && streamDevice && rank == 0) {
    if (Status st = trace.write(opts.trace); !st)
      return fail(st);
    out << "trace: " << opts.trace << "\n";
  }
  double elapsed = nowSeconds() - start;
  int64_t ran = lastStep - startStep;
  out << "trained " << ran << " steps in " << std::fixed << std::setprecision(1)
      << elapsed << " s: loss " << std::setprecision(4) << firstLoss << " -> "
      << lastLoss << ", " << std::setprecision(0)
      << ran * tokensPerStep / elapsed << " tokens/s" << std::defaultfloat
      << "\n";
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
    Expected<std::vector<int32_t>> gen =
        continueTokens(*ex, *prompt, opts.sampleTokens, opts.seq, 0.8, 40, rng);
    if (!gen)
      return fail(gen.status());
    out << "sample:\n"
        << opts.samplePrompt << decodeText(tok.get(), *gen) << "\n";
  }
  return 0;
}

void TrainRun::testKillHook(int64_t step) const {
  const char *env = std::getenv("MTC_TEST_KILL_RANK");
  if (!env || ranks == 1)
    return;
  char *end = nullptr;
  long r = std::strtol(env, &end, 10);
  if (*end == '@' && r == rank && std::strtoll(end + 1, nullptr, 10) == step)
    std::raise(SIGKILL);
}

int64_t TrainRun::gradParts() const {
  return opts.microBatches * (splitMB ? 1 : ranks);
}

} // namespace mtc::driver
