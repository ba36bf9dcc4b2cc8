//===- CommandLine.h - Flags of the mtc commands ----------------*- C++ -*-===//
//
// Part of mtc. The one flag parser of the command-line tools (`mtc`, built
// with the compiler, and `mtc-run`, runtime only): a command declares its
// flags as a table of names and targets, and parseFlags fills them. Runtime
// side (no LLVM) so that both tools parse the same flags the same way.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_COMMANDLINE_H
#define MTC_RUNTIME_DRIVER_COMMANDLINE_H

#include "lib/Bundle/Plan.h"
#include "lib/Support/Status.h"

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace mtc::driver {

/// One command-line flag of a command: `--name VALUE` (or `--name=VALUE`).
/// String values must not be empty (a path or a choice given as "" is a
/// mistake, never "use the default"); Text values may be. A List flag may be
/// repeated: each value is appended to a std::vector<std::string>.
///
/// Numbers are read whole, in decimal, without sign tricks or blanks: an Int
/// in [min, max] of int64_t, a Uint in [min, max] of uint64_t (a seed takes
/// the whole range: kNoMax), a Double finite in [min, max]. A value past the
/// type's range is refused like any value past max, never wrapped.
struct Flag {
  enum Kind { Int, Uint, Double, String, Text, List } kind;
  const char *name;
  /// Int: int64_t, Uint: uint64_t, Double: double, String and Text:
  /// std::string, List: std::vector<std::string>.
  void *target;
  double min = 0; ///< Int/Uint/Double: smallest accepted value
  /// Int/Uint/Double: largest accepted value (kNoMax: the type's largest).
  /// Every integer flag of a command names its bound (docs/training.md,
  /// "Flag limits").
  double max = kNoMax;
  static constexpr double kNoMax = std::numeric_limits<double>::infinity();
};

/// The bounds of the commands' integer flags (docs/training.md, "Flag
/// limits"): far beyond any real run, and small enough that the products the
/// planner and the runtime form from them fit in 64 bits.
namespace limits {
/// --steps, --warmup, --eval-every, --save-every, --stop-after.
constexpr int64_t kSteps = 1'000'000'000;
constexpr int64_t kBatch = int64_t(1) << 20;        ///< --batch
constexpr int64_t kSeq = int64_t(1) << 24;          ///< --seq, --context
constexpr int64_t kMicroBatches = int64_t(1) << 16; ///< --micro-batches
/// --batch x --seq x --micro-batches: the tokens of one step.
constexpr int64_t kStepTokens = int64_t(1) << 32;
/// --threads, --optimizer-threads, --convert-threads.
constexpr int64_t kThreads = 1024;
/// --prefetch-depth, --checkpoint-every, --selective-layers; the first two
/// are also refused beyond the model's layer instances once it is known.
constexpr int64_t kLayerInstances = bundle::kMaxLayerInstances;
/// Tokens generated or sampled (--tokens, --sample-tokens), --top-k.
constexpr int64_t kTokens = int64_t(1) << 24;
constexpr int64_t kEvalBatches = int64_t(1) << 20; ///< --eval-batches
constexpr int64_t kRanks = int64_t(1) << 16;       ///< plan --ranks
constexpr int64_t kCoordinates = 1'000'000;        ///< gradcheck --coordinates
constexpr int64_t kRepeats = 1000; ///< simulate --calibrate --repeats
} // namespace limits

/// An error naming \p command's flags when \p batch x \p seq x \p
/// microBatches is more than limits::kStepTokens ("plan: --batch 65536 x
/// --seq 65536 x --micro-batches 2 = 8589934592 tokens per step, more than
/// the limit of 4294967296 (2^32)"). Each factor must be at least 1.
Status checkStepTokens(const char *command, int64_t batch, int64_t seq,
                       int64_t microBatches);

/// Parses \p args against \p flags; positional arguments go to
/// \p positional, the names of the flags given to \p given (when not null).
/// On bad input the error names \p command and the flag ("train: --steps
/// expects an integer >= 1, got 'x'").
Status parseFlags(const char *command, const std::vector<std::string> &args,
                  const std::vector<Flag> &flags,
                  std::vector<std::string> &positional,
                  std::set<std::string> *given = nullptr);

/// Exactly one positional argument (the model or checkpoint); the error
/// for none shows \p usage.
Expected<std::string> onePositional(const char *command,
                                    const std::vector<std::string> &pos,
                                    const std::string &usage);

/// Whether \p args asks for help (-h or --help).
bool wantsHelp(const std::vector<std::string> &args);

/// Whether \p path names a bundle (ends in .mtb).
bool isBundlePath(const std::string &path);

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_COMMANDLINE_H
