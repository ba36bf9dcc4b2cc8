//===- Files.h - Input files and output paths, checked ----------*- C++ -*-===//
//
// Part of mtc. What every command does with the paths it is given before it
// reads or writes anything:
//
//   - an input must be a regular file (a FIFO, a device or a directory would
//     block in open() or read garbage): checkRegularFile / openRegularFile;
//   - an output must never be one of the command's inputs, however it is
//     reached (another spelling, a symlink, a hard link): checkOutputs
//     compares device and inode numbers.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_FILES_H
#define MTC_LIB_SUPPORT_FILES_H

#include "lib/Support/Status.h"

#include <string>
#include <vector>

namespace mtc {

/// A path the command was given, with the flag (or role) that named it:
/// {"--data", "corpus.txt"}, {"the model", "model.mt"}.
struct NamedPath {
  std::string what;
  std::string path;
};

/// Whether \p a and \p b are the same existing file (same device and inode,
/// symlinks followed). False when either does not exist.
bool sameFile(const std::string &a, const std::string &b);

/// An error when an output of \p outputs is the same file as an input of
/// \p inputs ("--metrics 'x' is the same file as --data 'y'"), or when two
/// outputs are the same file or, not existing yet, the same path. Empty
/// paths are skipped.
Status checkOutputs(const std::vector<NamedPath> &outputs,
                    const std::vector<NamedPath> &inputs);

/// Ok when \p path names a regular file (symlinks followed); else an error
/// naming it and what it is ("is a directory", "is a FIFO, not a regular
/// file", "cannot open: No such file or directory"). Never opens the file.
Status checkRegularFile(const std::string &path);

/// Opens \p path for reading when it is a regular file, without blocking on
/// a FIFO: returns the file descriptor (the caller closes it).
Expected<int> openRegularFile(const std::string &path);

/// Reads the whole regular file \p path.
Expected<std::string> readRegularFile(const std::string &path);

} // namespace mtc

#endif // MTC_LIB_SUPPORT_FILES_H
