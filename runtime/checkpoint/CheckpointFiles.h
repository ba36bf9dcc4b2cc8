//===- CheckpointFiles.h - What the checkpoint files share ------*- C++ -*-===//
//
// Part of mtc. Private to runtime/checkpoint: the names of a checkpoint's
// files and the small file helpers its writer, reader, resume checks and
// lock share.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CHECKPOINT_CHECKPOINTFILES_H
#define MTC_RUNTIME_CHECKPOINT_CHECKPOINTFILES_H

#include "lib/Support/Status.h"

#include <string>

namespace mtc::driver::ckpt {

constexpr const char *kFormat = "mtc-checkpoint";
constexpr int kVersion = 1;
constexpr const char *kState = "trainer_state.json";
constexpr const char *kBundle = "model.mtb";
constexpr const char *kWeights = "model.safetensors";
constexpr const char *kMoments = "optimizer.safetensors";

bool exists(const std::string &path);
bool isDirectory(const std::string &path);
/// fsync of a directory (after renames in it); filesystems that cannot
/// (EINVAL) are fine.
Status syncDirectory(const std::string &dir);
Status removeTree(const std::string &path);
Status renamePath(const std::string &from, const std::string &to);
Status writeText(const std::string &path, const std::string &text);
/// \p path made absolute (so that --resume from another directory finds the
/// data file the checkpoint records).
std::string absolutePath(const std::string &path);
/// The path without trailing slashes ("ckpt/" -> "ckpt"), so that DIR.tmp and
/// DIR.bak are siblings of DIR.
std::string trimSlashes(std::string dir);
/// The shortest decimal form of \p v that reads back as \p v (1e-3, not
/// 0.0010000000000000000208), for messages about options.
std::string showNumber(double v);

} // namespace mtc::driver::ckpt

#endif // MTC_RUNTIME_CHECKPOINT_CHECKPOINTFILES_H
