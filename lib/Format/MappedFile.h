//===- MappedFile.h - Read-only memory-mapped files -------------*- C++ -*-===//
//
// Part of mtc. A move-only, read-only mapping of a whole file (POSIX mmap).
// Empty files are valid and map to no memory (data() == nullptr, size() == 0).
// Also: writing a file atomically (path.tmp, fsync, rename, fsync directory).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_FORMAT_MAPPEDFILE_H
#define MTC_LIB_FORMAT_MAPPEDFILE_H

#include "lib/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace mtc {

class MappedFile {
public:
  MappedFile() = default;
  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

  /// Errors: "PATH: cannot open: <strerror>", "PATH: is a directory", ...
  static Expected<MappedFile> open(const std::string &path);

  const uint8_t *data() const { return ptr; }
  size_t size() const { return len; }
  const std::string &path() const { return file; }

private:
  void reset();
  const uint8_t *ptr = nullptr;
  size_t len = 0;
  std::string file;
};

/// The file name without its directories ("a/b/model.safetensors" ->
/// "model.safetensors"); used in messages.
std::string baseName(const std::string &path);
/// The directory part ("a/b/c" -> "a/b", "c" -> ".").
std::string dirName(const std::string &path);

/// Writes a file atomically: the bytes go to "path.tmp", which is fsync'ed and
/// renamed over \p path; then the directory is fsync'ed. \p writeBody is called
/// once with a writer `bool(const void*, size_t)` (false on an I/O error) and
/// returns a Status of its own. On any failure the .tmp file is removed and
/// \p path is left untouched.
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
  /// Flushes, fsyncs, renames over the target, fsyncs the directory.
  Status commit();

private:
  AtomicFileWriter() = default;
  Status flushBuffer();
  std::string target, tmp;
  int fd = -1;
  bool committed = false;
  std::string buffer;
};

} // namespace mtc

#endif // MTC_LIB_FORMAT_MAPPEDFILE_H
