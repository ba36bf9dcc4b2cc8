//===- Train.h - The training run -------------------------------*- C++ -*-===//
//
// Part of mtc. What `mtc train` runs: the resident run on the host executor,
// or the bundle's step plan on the device of --device (TrainRun.h has the
// stages and the files they are in).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_TRAIN_H
#define MTC_RUNTIME_DRIVER_TRAIN_H

#include "lib/Bundle/Bundle.h"
#include "runtime/driver/TrainOptions.h"

#include <cstdint>
#include <ostream>
#include <string>

namespace mtc::driver {

/// The refusal of `--grad-dtype bf16` with the immediate optimizer
/// placement (explicit, or auto with --clip 0), shared by train, plan and
/// compile.
std::string gradDtypeImmediateConflict();

/// An upper bound of the host memory `train` needs for \p b at [batch, seq]
/// micro-batches (plain executor): 16 B per parameter plus one step's values
/// and every layer instance's checkpoint.
double trainingHostBytes(const bundle::Bundle &b, int64_t batch, int64_t seq);
/// MemAvailable in bytes (0 if unknown).
double hostMemoryAvailable();

/// Trains \p b and returns a process exit code (errors are printed to
/// \p err with what to do about them).
int train(const bundle::Bundle &b, const TrainOptions &opts, std::ostream &out,
          std::ostream &err);

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_TRAIN_H
