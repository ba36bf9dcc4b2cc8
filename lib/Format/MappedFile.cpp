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

std::string baseName(const std::string &path) {
  size_t pos = path.find_last_of('/');
  return pos == std::string::npos ? path : path.substr(pos + 1);
}

std::string dirName(const std::string &path) {
  size_t pos = path.find_last_of('/');
  if (pos == std::string::npos)
    return ".";
  if (pos == 0)
    return "/";
  return path.substr(0, pos);
}

//===----------------------------------------------------------------------===//
// AtomicFileWriter
//===----------------------------------------------------------------------===//

static constexpr size_t kWriteBuffer = 4u << 20;

Expected<AtomicFileWriter> AtomicFileWriter::create(const std::string &path) {
  AtomicFileWriter w;
  w.target = path;
  w.tmp = path + ".tmp";
  w.fd = ::open(w.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd < 0)
    return Status::error(w.tmp + ": cannot create: " + std::strerror(errno));
  w.buffer.reserve(kWriteBuffer);
  return Expected<AtomicFileWriter>(std::move(w));
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter &&other) noexcept
    : target(std::move(other.target)), tmp(std::move(other.tmp)), fd(other.fd),
      committed(other.committed), buffer(std::move(other.buffer)) {
  other.fd = -1;
  other.committed = true; // the moved-from object owns nothing
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd >= 0)
    ::close(fd);
  if (!committed && !tmp.empty())
    ::unlink(tmp.c_str());
}

static bool writeAll(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

Status AtomicFileWriter::flushBuffer() {
  if (buffer.empty())
    return Status::success();
  if (!writeAll(fd, buffer.data(), buffer.size()))
    return Status::error(tmp + ": write failed: " + std::strerror(errno));
  buffer.clear();
  return Status::success();
}

Status AtomicFileWriter::write(const void *data, size_t n) {
  if (fd < 0)
    return Status::error(target + ": writer is closed");
  if (n == 0)
    return Status::success();
  const char *p = static_cast<const char *>(data);
  if (buffer.size() + n > kWriteBuffer) {
    Status s = flushBuffer();
    if (!s.ok())
      return s;
    if (n >= kWriteBuffer) {
      if (!writeAll(fd, p, n))
        return Status::error(tmp + ": write failed: " + std::strerror(errno));
      return Status::success();
    }
  }
  buffer.append(p, n);
  return Status::success();
}

Status AtomicFileWriter::commit() {
  if (fd < 0)
    return Status::error(target + ": writer is closed");
  Status s = flushBuffer();
  if (!s.ok())
    return s;
  if (::fsync(fd) != 0)
    return Status::error(tmp + ": fsync failed: " + std::strerror(errno));
  if (::close(fd) != 0) {
    fd = -1;
    return Status::error(tmp + ": close failed: " + std::strerror(errno));
  }
  fd = -1;
  if (::rename(tmp.c_str(), target.c_str()) != 0)
    return Status::error(target + ": cannot rename " + tmp + ": " +
                         std::strerror(errno));
  committed = true;
  std::string dir = dirName(target);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    int rc = ::fsync(dfd);
    int e = errno;
    ::close(dfd);
    if (rc != 0 && e != EINVAL)
      return Status::error(dir +
                           ": fsync of directory failed: " + std::strerror(e));
  }
  return Status::success();
}

} // namespace mtc
