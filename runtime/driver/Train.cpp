//===- Train.cpp - The training run's entry point and stages ----*- C++ -*-===//
//
// Part of mtc. train() runs a TrainRun (TrainRun.h) through its stages in
// order; each returns a Status and the first error ends the run.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/Train.h"

#include "runtime/cpu/Kernels.h"
#include "runtime/dist/Communicator.h"
#include "runtime/driver/TrainRun.h"

#include <exception>
#include <new>
#include <ostream>
#include <string>

namespace mtc::driver {

int TrainRun::run() {
  if (opts.threads > 0)
    cpu::setThreads(opts.threads);
  for (Status (TrainRun::*stage)() :
       {&TrainRun::checkModel, &TrainRun::checkRanks, &TrainRun::claimOutputs,
        &TrainRun::openData, &TrainRun::checkResume, &TrainRun::checkHostMemory,
        &TrainRun::createState}) {
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

int TrainRun::fail(const Status &st) {
  // One write: the ranks' lines do not interleave.
  err << (opts.toolName + ": error: " + rankTag() + st.message() + "\n");
  err.flush();
  return 1;
}

std::string TrainRun::rankTag() const {
  if (ranks == 1)
    return "";
  return "rank " + std::to_string(rank) + " of " + std::to_string(ranks) + ": ";
}

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

} // namespace mtc::driver
