//===- Files.h - Input files and output paths, checked ----------*- C++ -*-===//
//
// Part of mtc. What every command does with the paths it is given before it
// reads or writes anything:
//
//   - an input must be a regular file (a FIFO, a device or a directory would
//     block in open() or read garbage): checkRegularFile / openRegularFile;
//   - an output must never be one of the command's inputs, however it is
//     reached (another spelling, a symlink, a hard link): checkOutputs
//     compares device and inode numbers, and checks before any work that
//     each output can be written;
//   - an output is written so that a reader sees the old file or the new
//     one, never half of either (AtomicFileWriter: a temporary file renamed
//     over the target), and a special file is never replaced: a character
//     device or a FIFO (/dev/null, a named pipe) is written through, an
//     inherited descriptor (/dev/stdout, /dev/fd/N) is written to as it is
//     (resolveOutput).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_FILES_H
#define MTC_LIB_SUPPORT_FILES_H

#include "lib/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
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

/// Whether \p path lies inside directory \p dir (symlinks resolved as far
/// as the paths exist); false for \p dir itself.
bool isInside(const std::string &path, const std::string &dir);

/// An error when an output of \p outputs is the same file as an input of
/// \p inputs ("--metrics 'x' is the same file as --data 'y'"), when two
/// outputs are the same file or, not existing yet, the same path (special
/// files such as /dev/null may be shared), or when an output cannot be
/// written (checkOutputPath). Empty paths and "-" (stdout) are skipped.
Status checkOutputs(const std::vector<NamedPath> &outputs,
                    const std::vector<NamedPath> &inputs);

/// Where and how an output file is written.
struct OutputTarget {
  enum class Kind {
    /// A regular file, new or existing: written to "PATH.tmp" beside it and
    /// renamed over it. Symlinks are resolved first, so a link to a file
    /// keeps pointing at the new file.
    Replace,
    /// An existing character device or FIFO (/dev/null, a named pipe):
    /// opened and written through, never replaced.
    Stream,
    /// A descriptor this process inherited (/dev/stdout, /dev/stderr,
    /// /dev/fd/N, /proc/self/fd/N): written to as it is, where the shell
    /// pointed it.
    Descriptor,
  };
  Kind kind = Kind::Replace;
  /// Replace: the file replaced (symlinks resolved); Stream: the special
  /// file; Descriptor: the path as given.
  std::string path;
  /// Descriptor: the descriptor's number.
  int fd = -1;
};

/// How \p path is written as an output. Errors name the path and what it
/// is: a directory, a block device or a socket, a descriptor not open for
/// writing, a directory part that does not exist, a symlink loop.
Expected<OutputTarget> resolveOutput(const std::string &path);

/// Checks, before a command does its work, that \p path (named by \p what,
/// e.g. "--trace") can be written: resolveOutput, and for a file to
/// replace, a writable directory and, when the file exists, a writable
/// file. Never creates or opens anything.
Status checkOutputPath(const std::string &what, const std::string &path);

/// Writes a file so that readers see the old or the new file, never a part
/// (resolveOutput's Replace: bytes to "PATH.tmp", fsync, rename over PATH,
/// fsync of the directory), or writes through a special file or descriptor.
/// On failure the .tmp file is removed and PATH is left untouched.
class AtomicFileWriter {
public:
  static Expected<AtomicFileWriter> create(const std::string &path);
  AtomicFileWriter(AtomicFileWriter &&other) noexcept;
  AtomicFileWriter &operator=(AtomicFileWriter &&) = delete;
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  /// Removes the .tmp file unless commit() succeeded.
  ~AtomicFileWriter();

  /// Buffered append.
  Status write(const void *data, size_t n);
  /// Flushes; for a replaced file fsyncs, renames over the target and
  /// fsyncs the directory.
  Status commit();

private:
  AtomicFileWriter() = default;
  Status flushBuffer();
  /// The path in messages (as given), the file renamed over (Replace) and
  /// the temporary file (empty when written through).
  std::string shown, target, tmp;
  int fd = -1;
  bool committed = false;
  std::string buffer;
};

/// Opens \p path for writing as it goes (a log, metrics lines), not
/// atomically: a regular file created or truncated (appended to with
/// \p append), a character device or FIFO written through (a FIFO no
/// process reads is an error, not a wait), a descriptor (/dev/stdout)
/// duplicated. Returns the descriptor; the caller closes it.
Expected<int> openOutputStream(const std::string &path, bool append);

/// AtomicFileWriter of the whole of \p bytes.
Status writeFileAtomically(const std::string &path, std::string_view bytes);

/// The file name without its directories ("a/b/model.safetensors" ->
/// "model.safetensors"); used in messages.
std::string baseName(const std::string &path);
/// The directory part ("a/b/c" -> "a/b", "c" -> ".").
std::string dirName(const std::string &path);

/// Ok when \p path names a regular file (symlinks followed); else an error
/// naming it and what it is ("is a directory", "is a FIFO, not a regular
/// file", "cannot open: No such file or directory"). Never opens the file.
Status checkRegularFile(const std::string &path);

/// Opens \p path for reading when it is a regular file, without blocking on
/// a FIFO: returns the file descriptor (the caller closes it).
Expected<int> openRegularFile(const std::string &path);

/// Reads the whole regular file \p path. A file of more than \p maxBytes
/// bytes is an error ("PATH: 5000000 bytes, more than the limit of 4194304")
/// found before reading, and never read past the limit if it grows.
Expected<std::string>
readRegularFile(const std::string &path,
                uint64_t maxBytes = std::numeric_limits<uint64_t>::max());

} // namespace mtc

#endif // MTC_LIB_SUPPORT_FILES_H
