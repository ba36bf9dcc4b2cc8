//===- MappedFile.cpp - Read-only memory-mapped files ---------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Format/MappedFile.h"

#include "lib/Support/Files.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc {

MappedFile::MappedFile(MappedFile &&other) noexcept
    : ptr(other.ptr), len(other.len), file(std::move(other.file)) {
  other.ptr = nullptr;
  other.len = 0;
}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    reset();
    ptr = other.ptr;
    len = other.len;
    file = std::move(other.file);
    other.ptr = nullptr;
    other.len = 0;
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (ptr && len)
    ::munmap(const_cast<uint8_t *>(ptr), len);
  ptr = nullptr;
  len = 0;
}

Expected<MappedFile> MappedFile::open(const std::string &path) {
  // Regular files only: a FIFO would block in open(), a device map garbage.
  Expected<int> opened = openRegularFile(path);
  if (!opened)
    return opened.status();
  int fd = *opened;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::error(path + ": cannot stat: " + std::strerror(e));
  }
  MappedFile mf;
  mf.file = path;
  mf.len = static_cast<size_t>(st.st_size);
  if (mf.len > 0) {
    void *p = ::mmap(nullptr, mf.len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      mf.len = 0;
      return Status::error(path + ": cannot map: " + std::strerror(e));
    }
    mf.ptr = static_cast<const uint8_t *>(p);
  }
  ::close(fd);
  return Expected<MappedFile>(std::move(mf));
}

} // namespace mtc
