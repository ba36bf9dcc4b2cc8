//===- HostStore.cpp - Page-aligned host memory for persistent state ------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/HostStore.h"

#include "lib/Support/ByteSize.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc::device {

namespace {

std::string quoted(const std::string &what) {
  return what.empty() ? std::string() : " for '" + what + "'";
}

} // namespace

HostBuffer::HostBuffer(HostBuffer &&other) noexcept
    : ptr(other.ptr), bytes(other.bytes), mapped(other.mapped),
      isPinned(other.isPinned), isFile(other.isFile),
      name(std::move(other.name)), counters(std::move(other.counters)) {
  other.ptr = nullptr;
  other.bytes = 0;
  other.mapped = 0;
  other.isPinned = other.isFile = false;
}

HostBuffer &HostBuffer::operator=(HostBuffer &&other) noexcept {
  if (this != &other) {
    release();
    ptr = other.ptr;
    bytes = other.bytes;
    mapped = other.mapped;
    isPinned = other.isPinned;
    isFile = other.isFile;
    name = std::move(other.name);
    counters = std::move(other.counters);
    other.ptr = nullptr;
    other.bytes = 0;
    other.mapped = 0;
    other.isPinned = other.isFile = false;
  }
  return *this;
}

HostBuffer::~HostBuffer() { release(); }

void HostBuffer::release() {
  if (ptr) {
    if (isPinned)
      ::munlock(ptr, mapped);
    ::munmap(ptr, mapped);
  }
  if (counters) {
    (isFile ? counters->file : counters->host) -= bytes;
    if (isPinned)
      counters->pinned -= bytes;
  }
  ptr = nullptr;
  bytes = 0;
  mapped = 0;
  isPinned = isFile = false;
  counters.reset();
}

Status HostBuffer::sync() {
  if (!isFile || !ptr)
    return Status::success();
  if (::msync(ptr, mapped, MS_SYNC) != 0)
    return Status::error("host store: msync of '" + name +
                         "' failed: " + std::strerror(errno));
  return Status::success();
}

HostStore::HostStore() : counters(std::make_shared<HostBuffer::Counters>()) {}

Expected<HostBuffer> HostStore::allocate(int64_t bytes,
                                         const std::string &what) {
  if (bytes < 0)
    return Status::error("host store: negative size " + std::to_string(bytes) +
                         quoted(what));
  HostBuffer b;
  b.name = what;
  if (bytes == 0)
    return b;
  void *p = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return Status::error("host store: cannot allocate " + formatBytes(bytes) +
                         quoted(what) + ": " + std::strerror(errno));
  // Transparent huge pages where offered (best effort): the weights and
  // optimizer state are streamed through every step.
  if (bytes >= (int64_t(2) << 20))
    ::madvise(p, static_cast<size_t>(bytes), MADV_HUGEPAGE);
  b.ptr = p;
  b.bytes = bytes;
  b.mapped = static_cast<size_t>(bytes);
  b.counters = counters;
  counters->host += bytes;
  return b;
}

Expected<HostBuffer> HostStore::allocateFileBacked(const std::string &path,
                                                   int64_t bytes,
                                                   const std::string &what) {
  std::string where = "host store: " + path + quoted(what);
  if (bytes < 0)
    return Status::error(where + ": negative size " + std::to_string(bytes));
  // A file this call creates is removed again when the call fails.
  bool created = true;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    created = false;
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd < 0)
    return Status::error(where + ": cannot open: " + std::strerror(errno));
  auto fail = [&](const std::string &msg) {
    int saved = errno;
    ::close(fd);
    if (created)
      ::unlink(path.c_str());
    return Status::error(where + ": " + msg + ": " + std::strerror(saved));
  };
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return fail("cannot stat");
  if (st.st_size != bytes && ::ftruncate(fd, bytes) != 0)
    return fail("cannot resize to " + formatBytes(bytes));
  if (bytes > 0) {
    int rc = ::posix_fallocate(fd, 0, bytes);
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
      errno = rc;
      return fail("cannot reserve " + formatBytes(bytes) + " of disk");
    }
  }
  HostBuffer b;
  b.name = what.empty() ? path : what;
  b.isFile = true;
  if (bytes > 0) {
    void *p = ::mmap(nullptr, static_cast<size_t>(bytes),
                     PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      return fail("cannot map " + formatBytes(bytes));
    b.ptr = p;
    b.bytes = bytes;
    b.mapped = static_cast<size_t>(bytes);
    b.counters = counters;
    counters->file += bytes;
  }
  ::close(fd);
  return b;
}

Status HostStore::pin(HostBuffer &buf) {
  if (buf.isPinned || !buf.ptr)
    return Status::success();
  if (::mlock(buf.ptr, buf.mapped) != 0)
    return Status::error("cannot pin " + formatBytes(buf.bytes) +
                         quoted(buf.name) + ": " + std::strerror(errno) +
                         " (the locked-memory limit, ulimit -l, may be too "
                         "low)");
  buf.isPinned = true;
  if (buf.counters)
    buf.counters->pinned += buf.bytes;
  return Status::success();
}

int64_t HostStore::hostBytes() const { return counters->host; }
int64_t HostStore::fileBytes() const { return counters->file; }
int64_t HostStore::pinnedBytes() const { return counters->pinned; }

} // namespace mtc::device
