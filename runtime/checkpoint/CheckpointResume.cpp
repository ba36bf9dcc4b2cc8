//===- CheckpointResume.cpp - A resume checked against its checkpoint -*- C++
//-*-===//
//
// Part of mtc. See Checkpoint.h: which options must match a checkpoint to
// continue its run exactly, which may change (with a note), and which a
// resume takes from it when they are not given.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointFiles.h"

#include "lib/Support/Hash.h"

#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace mtc::driver {

using namespace ckpt;

Status checkResume(const TrainerState &ck, const std::string &dir,
                   const TrainOptions &opts, const DataIdentity &data,
                   std::vector<std::string> &notes) {
  const TrainOptions &c = ck.options;
  std::string where = " (" + dir + "/" + kState + ")";
  auto mismatch = [&](const char *flag, const std::string &now,
                      const std::string &then) {
    return Status::error(
        std::string(flag) + " " + now + " differs from the checkpoint's " +
        then + where +
        ": --batch, --seq, --micro-batches, --seed and --val-fraction must "
        "match to continue the run exactly (leave them out to use the "
        "checkpoint's; start a new run to change them)");
  };
  // Integers compared and shown exactly (a seed takes all 64 bits).
  const std::tuple<const char *, uint64_t, uint64_t> exact[] = {
      {"--batch", uint64_t(opts.batch), uint64_t(c.batch)},
      {"--seq", uint64_t(opts.seq), uint64_t(c.seq)},
      {"--micro-batches", uint64_t(opts.microBatches),
       uint64_t(c.microBatches)},
      {"--seed", opts.seed, c.seed}};
  for (const auto &[flag, now, then] : exact)
    if (now != then)
      return mismatch(flag, std::to_string(now), std::to_string(then));
  if (opts.valFraction != c.valFraction)
    return mismatch("--val-fraction", showNumber(opts.valFraction),
                    showNumber(c.valFraction));

  if (data.bytes != ck.data.bytes || data.fingerprint != ck.data.fingerprint)
    return Status::error(
        "data file '" + data.path + "' (" + std::to_string(data.bytes) +
        " bytes, fingerprint " + hex64(data.fingerprint) +
        ") is not the one checkpoint '" + dir + "' trained on ('" +
        ck.data.path + "', " + std::to_string(ck.data.bytes) +
        " bytes, fingerprint " + hex64(ck.data.fingerprint) +
        "); resuming needs the same tokens");
  if (data.path != ck.data.path)
    notes.push_back("data file '" + data.path + "' has the bytes of '" +
                    ck.data.path + "', which the checkpoint trained on");

  if (opts.steps < ck.step)
    return Status::error("--steps " + std::to_string(opts.steps) +
                         " is below the checkpoint's step " +
                         std::to_string(ck.step) + where +
                         " (--steps is the total, not the steps to add)");
  std::string diverges =
      ": the run continues with it, no longer identical to an uninterrupted "
      "run";
  if (opts.steps != c.steps)
    notes.push_back("--steps " + std::to_string(opts.steps) +
                    " (the checkpoint's run: " + std::to_string(c.steps) +
                    "): the learning-rate schedule now ends at step " +
                    std::to_string(opts.steps));
  const std::tuple<const char *, double, double> free[] = {
      {"--lr", opts.lr, c.lr},
      {"--warmup", double(opts.warmup), double(c.warmup)},
      {"--min-lr-ratio", opts.minLrRatio, c.minLrRatio},
      {"--weight-decay", opts.weightDecay, c.weightDecay},
      {"--beta1", opts.beta1, c.beta1},
      {"--beta2", opts.beta2, c.beta2},
      {"--clip", opts.clip, c.clip}};
  for (const auto &[flag, now, then] : free)
    if (now != then)
      notes.push_back(std::string(flag) + " " + showNumber(now) +
                      " (checkpoint: " + showNumber(then) + ")" + diverges);
  if (opts.useKernels != c.useKernels)
    notes.push_back(std::string("--kernels ") +
                    (opts.useKernels ? "on" : "off") +
                    " (checkpoint: " + (c.useKernels ? "on" : "off") +
                    "): losses may differ in the last bits from an "
                    "uninterrupted run");
  if (opts.gradDtype != c.gradDtype)
    notes.push_back(
        std::string("--grad-dtype ") + bundle::gradDTypeName(opts.gradDtype) +
        " (checkpoint: " + bundle::gradDTypeName(c.gradDtype) + ")" + diverges);
  if (opts.eps != c.eps)
    notes.push_back("AdamW eps " + showNumber(opts.eps) +
                    " (checkpoint: " + showNumber(c.eps) + ")" + diverges);
  return Status::success();
}

void inheritOptions(const TrainOptions &recorded,
                    const std::set<std::string> &given, TrainOptions &opts) {
  auto take = [&](const char *flag, auto &field, const auto &value) {
    if (!given.count(flag))
      field = value;
  };
  take("--data", opts.data, recorded.data);
  take("--data-format", opts.dataFormat, recorded.dataFormat);
  take("--steps", opts.steps, recorded.steps);
  take("--batch", opts.batch, recorded.batch);
  take("--seq", opts.seq, recorded.seq);
  take("--micro-batches", opts.microBatches, recorded.microBatches);
  take("--lr", opts.lr, recorded.lr);
  take("--warmup", opts.warmup, recorded.warmup);
  take("--min-lr-ratio", opts.minLrRatio, recorded.minLrRatio);
  take("--weight-decay", opts.weightDecay, recorded.weightDecay);
  take("--beta1", opts.beta1, recorded.beta1);
  take("--beta2", opts.beta2, recorded.beta2);
  take("--clip", opts.clip, recorded.clip);
  take("--grad-dtype", opts.gradDtype, recorded.gradDtype);
  take("--seed", opts.seed, recorded.seed);
  take("--eval-every", opts.evalEvery, recorded.evalEvery);
  take("--eval-batches", opts.evalBatches, recorded.evalBatches);
  take("--val-fraction", opts.valFraction, recorded.valFraction);
  take("--save-every", opts.saveEvery, recorded.saveEvery);
  opts.eps = recorded.eps; // no flag
}

} // namespace mtc::driver
