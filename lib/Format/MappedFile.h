//===- MappedFile.h - Read-only memory-mapped files -------------*- C++ -*-===//
//
// Part of mtc. A move-only, read-only mapping of a whole file (POSIX mmap).
// Empty files are valid and map to no memory (data() == nullptr, size() == 0).
// (AtomicFileWriter, baseName and dirName are in lib/Support/Files.h.)
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_FORMAT_MAPPEDFILE_H
#define MTC_LIB_FORMAT_MAPPEDFILE_H

#include "lib/Support/Files.h"
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

} // namespace mtc

#endif // MTC_LIB_FORMAT_MAPPEDFILE_H
