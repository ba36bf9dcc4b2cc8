//===- Checkpoint.h - Full-state checkpoints and exact resume ---*- C++ -*-===//
//
// Part of mtc. A checkpoint is a directory holding everything `mtc train`
// needs to continue a run bit-identically (docs/training.md, "Checkpoints and
// resume"):
//
//   model.mtb              the bundle (the checkpoint is self-contained)
//   model.safetensors      fp32 master weights under their instance names
//                          (`tok_emb`, `Block.3.wq`, `Block.3.FFN.5.w1`)
//   optimizer.safetensors  fp32 AdamW moments: `<param>.exp_avg` (m) and
//                          `<param>.exp_avg_sq` (v), PyTorch's names
//   trainer_state.json     format "mtc-checkpoint" version 1: the optimizer
//                          step, last losses, the run's options, the data
//                          file's identity and position, the RNG state, the
//                          model's identity and the size and xxh64 of every
//                          file above (written last)
//
// Atomic protocol of writeCheckpoint(DIR): every file is written into the
// sibling DIR.tmp (each fsync'ed, then the directory), DIR is renamed to
// DIR.bak, DIR.tmp to DIR (the parent fsync'ed after each rename), and DIR.bak
// is removed. At every instant DIR or, while DIR is missing, DIR.bak is a
// complete checkpoint; resolveCheckpoint() looks at DIR, then at DIR.bak when
// DIR is missing, never at DIR.tmp.
//
// Test hook: MTC_TEST_CRASH_IN_CHECKPOINT=STAGE[@STEP] makes the write of the
// checkpoint (of optimizer step STEP, or any) _exit(137) at STAGE: `weights`
// (weights written into DIR.tmp, moments not yet), `files` (DIR.tmp complete,
// nothing renamed), `swap` (DIR renamed to DIR.bak, DIR.tmp not yet renamed to
// DIR) or `cleanup` (new DIR in place, DIR.bak not yet removed).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CHECKPOINT_CHECKPOINT_H
#define MTC_RUNTIME_CHECKPOINT_CHECKPOINT_H

#include "lib/Bundle/Bundle.h"
#include "lib/Support/Status.h"
#include "runtime/driver/TrainOptions.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace mtc::exec {
class ParamStore;
} // namespace mtc::exec
namespace mtc::train {
class TokenDataset;
} // namespace mtc::train

namespace mtc::driver {

/// The token file a run trains on, identified well enough to detect another
/// file: size and a fingerprint of its bytes (the whole file up to 64 MiB,
/// beyond that 16 evenly spaced 1 MiB blocks, the last one ending at the end).
struct DataIdentity {
  std::string path;
  std::string format; ///< tokenFileFormatName
  uint64_t bytes = 0;
  uint64_t fingerprint = 0; ///< xxh64 of the sampled bytes
  uint64_t tokens = 0, trainTokens = 0, valTokens = 0;
};

/// Identifies \p data's file (reads it; errors name the file).
Expected<DataIdentity> identifyData(const train::TokenDataset &data);

/// Everything a checkpoint holds besides the tensors.
struct TrainerState {
  int64_t step = 0;   ///< optimizer steps done; training resumes at step + 1
  double loss = 0;    ///< training loss of step `step`
  double valLoss = 0; ///< the last validation loss (valStep 0: none)
  int64_t valStep = 0;
  /// The run's options (data, steps, batch, seq, micro-batches, schedule,
  /// AdamW, clip, seed, evaluation and save cadence).
  TrainOptions options;
  DataIdentity data;
};

/// Writes a complete checkpoint of \p store (values and AdamW moments) and
/// \p state into \p dir with the atomic protocol above. Creates the parent
/// directories. Errors name the file.
Status writeCheckpoint(const std::string &dir, const bundle::Bundle &b,
                       const exec::ParamStore &store,
                       const TrainerState &state);

/// The directory `--resume DIR` loads: DIR when it exists (it must hold a
/// trainer_state.json), DIR.bak when DIR is missing and DIR.bak holds one (a
/// write was interrupted between its two renames; \p note then says so), an
/// error otherwise.
Expected<std::string> resolveCheckpoint(const std::string &dir,
                                        std::string *note = nullptr);

/// Reads and checks \p dir/trainer_state.json only (no tensors).
Expected<TrainerState> readTrainerState(const std::string &dir);

/// Reads the checkpoint in \p dir (already resolved) into \p store: checks
/// every file's size and checksum, that \p b is the checkpoint's model (the
/// same parameter instances and shapes and the same config), and loads the
/// values and AdamW moments. A model whose computation differs from the
/// checkpoint's (Bundle::modelHash: e.g. silu changed to gelu) is an error
/// unless \p allowModelChange, then a note. \p notes receives what differs
/// without breaking the load (another name; a bundle compiled with other
/// options). Errors name the file and the problem.
Expected<TrainerState> readCheckpoint(const std::string &dir,
                                      const bundle::Bundle &b,
                                      exec::ParamStore &store,
                                      std::vector<std::string> *notes = nullptr,
                                      bool allowModelChange = false);

/// Whether a run with \p opts on \p data can continue \p ck exactly. Errors:
/// another batch, seq, micro-batches, seed or val-fraction, another data file
/// (size or fingerprint), --steps below the checkpoint's step. Notes (the run
/// goes on, no longer identical to an uninterrupted one): another --steps
/// (the schedule's end moves), lr, warmup, min-lr-ratio, weight decay, betas
/// or clip; a data file at another path with the same bytes.
Status checkResume(const TrainerState &ck, const std::string &dir,
                   const TrainOptions &opts, const DataIdentity &data,
                   std::vector<std::string> &notes);

/// Copies the options of \p recorded into \p opts for every `mtc train` flag
/// not in \p given (flag names: "--batch", ...), and --data when not given.
void inheritOptions(const TrainOptions &recorded,
                    const std::set<std::string> &given, TrainOptions &opts);

/// Whether \p dir may be written by writeCheckpoint: missing, an empty
/// directory, or a directory holding a checkpoint (trainer_state.json);
/// anything else is refused before training starts.
Status checkCheckpointTarget(const std::string &dir);

/// One writer per checkpoint directory, for a run's whole life. acquire()
/// resolves \p outDir (a symlink is followed, so checkpoints are written
/// through it and it is never replaced by a directory), checks it with
/// checkCheckpointTarget, creates its parent directories, and takes an
/// exclusive flock on the sibling file DIR.lock holding this process's pid.
/// The lock sits beside DIR, not in it, because every checkpoint write
/// replaces DIR as a whole. Creating DIR.lock also proves, before any
/// training time is spent, that DIR's parent (where DIR.tmp is written and
/// renamed) is writable. Errors: another process holds the lock (its pid is
/// named), the parent cannot be created or written. The destructor removes
/// DIR.lock and releases the lock; a killed process's lock is released by the
/// kernel (a stale DIR.lock file is harmless).
class CheckpointLock {
public:
  static Expected<CheckpointLock> acquire(const std::string &outDir);
  CheckpointLock(CheckpointLock &&other) noexcept;
  CheckpointLock &operator=(CheckpointLock &&other) noexcept;
  CheckpointLock(const CheckpointLock &) = delete;
  CheckpointLock &operator=(const CheckpointLock &) = delete;
  ~CheckpointLock();

  /// The directory checkpoints are written to (symlinks resolved).
  const std::string &dir() const { return resolved; }

private:
  CheckpointLock() = default;
  void release();
  int fd = -1;
  std::string resolved, lockPath;
};

/// Checks every file of the checkpoint in \p dir (already resolved) against
/// the size and xxh64 that its trainer_state.json records: a truncated,
/// extended or altered file is an error naming it. What --resume, generate
/// and export-hf do before reading a checkpoint's tensors.
Status verifyCheckpointFiles(const std::string &dir);

/// Runs \p read on the checkpoint \p dir (resolved as resolveCheckpoint
/// does; \p read gets the resolved directory) so that everything it reads
/// comes from one checkpoint, while a training run may be replacing it
/// (writeCheckpoint's renames): when the resolved directory is another one
/// after \p read than before (its device, inode or change time differ, or
/// it is gone), \p read ran across a replacement and runs again on the new
/// checkpoint, up to 50 times, 20 ms apart. \p read's own errors are
/// returned when the checkpoint stayed the same. What generate, export-hf
/// and --init-from use.
Status
readStableCheckpoint(const std::string &dir,
                     const std::function<Status(const std::string &)> &read);

/// Removes the records of the JSONL metrics file \p path whose "step" is above
/// \p step (written after the checkpoint a run resumes from), and a last line
/// cut short (no newline: the disk filled up or the process was killed while
/// writing it), atomically. A missing file is fine.
Status trimMetrics(const std::string &path, int64_t step);

} // namespace mtc::driver

#endif // MTC_RUNTIME_CHECKPOINT_CHECKPOINT_H
