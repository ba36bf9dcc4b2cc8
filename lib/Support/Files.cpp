//===- Files.cpp - Input files and output paths, checked ------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Files.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc {

namespace {

const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "is a directory, not a file";
  if (S_ISFIFO(mode))
    return "is a FIFO, not a regular file";
  if (S_ISCHR(mode))
    return "is a character device, not a regular file";
  if (S_ISBLK(mode))
    return "is a block device, not a regular file";
  if (S_ISSOCK(mode))
    return "is a socket, not a regular file";
  return "is not a regular file";
}

} // namespace

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  if (a.empty() || b.empty() || ::stat(a.c_str(), &sa) != 0 ||
      ::stat(b.c_str(), &sb) != 0)
    return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

namespace {

/// sameFile, or for paths that do not exist yet the same path once made
/// absolute and resolved as far as it exists.
bool samePath(const std::string &a, const std::string &b) {
  if (a.empty() || b.empty())
    return false;
  if (sameFile(a, b))
    return true;
  std::error_code ea, eb;
  std::filesystem::path pa = std::filesystem::weakly_canonical(a, ea);
  std::filesystem::path pb = std::filesystem::weakly_canonical(b, eb);
  return !ea && !eb && pa == pb;
}

} // namespace

bool isInside(const std::string &path, const std::string &dir) {
  std::error_code ec1, ec2;
  std::string p = std::filesystem::weakly_canonical(path, ec1).string();
  std::string d = std::filesystem::weakly_canonical(dir, ec2).string();
  if (ec1 || ec2 || d.empty())
    return false;
  if (d.back() != '/')
    d += '/';
  return p.compare(0, d.size(), d) == 0;
}

namespace {

/// Whether \p path exists and is neither a regular file nor a directory
/// (/dev/null, a FIFO): such outputs may be shared.
bool isSpecial(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) &&
         !S_ISDIR(st.st_mode);
}

} // namespace

Status checkOutputs(const std::vector<NamedPath> &outputs,
                    const std::vector<NamedPath> &inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath &out = outputs[i];
    if (out.path.empty() || out.path == "-")
      continue;
    if (Status st = checkOutputPath(out.what, out.path); !st.ok())
      return st;
    for (const NamedPath &in : inputs)
      if (sameFile(out.path, in.path))
        return Status::error(
            out.what + " '" + out.path + "' is the same file as " + in.what +
            " '" + in.path +
            "'; an output never overwrites an input: give another path");
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (samePath(out.path, outputs[j].path) && !isSpecial(out.path))
        return Status::error(out.what + " '" + out.path +
                             "' is the same file as " + outputs[j].what + " '" +
                             outputs[j].path + "': give them different paths");
  }
  return Status::success();
}

namespace {

/// The descriptor a path names by itself: /dev/stdout (1), /dev/stderr (2),
/// /dev/stdin (0), /dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N of this
/// process; -1 for any other path.
int namedDescriptor(const std::string &p) {
  if (p == "/dev/stdin")
    return 0;
  if (p == "/dev/stdout")
    return 1;
  if (p == "/dev/stderr")
    return 2;
  const std::string self = "/proc/" + std::to_string(::getpid()) + "/fd/";
  for (const std::string &prefix :
       {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
        std::string("/proc/thread-self/fd/"), self}) {
    if (p.size() <= prefix.size() || p.compare(0, prefix.size(), prefix) != 0)
      continue;
    const std::string digits = p.substr(prefix.size());
    if (digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return -1;
    return std::atoi(digits.c_str());
  }
  return -1;
}

} // namespace

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

Expected<OutputTarget> resolveOutput(const std::string &path) {
  if (path.empty())
    return Status::error("an output path is empty");
  if (path.back() == '/')
    return Status::error(path + ": names a directory; give a file name");
  std::string p = path;
  for (int hop = 0; hop < 40; ++hop) {
    const int fd = namedDescriptor(p);
    if (fd >= 0) {
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags < 0)
        return Status::error(path + ": descriptor " + std::to_string(fd) +
                             " is not open");
      if ((flags & O_ACCMODE) == O_RDONLY)
        return Status::error(path + ": descriptor " + std::to_string(fd) +
                             " is not open for writing");
      OutputTarget t;
      t.kind = OutputTarget::Kind::Descriptor;
      t.path = path;
      t.fd = fd;
      return t;
    }
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno != ENOENT)
        return Status::error(path + ": cannot stat: " + std::strerror(errno));
      // A new file: its directory must be there.
      const std::string dir = dirName(p);
      struct stat ds;
      if (::stat(dir.c_str(), &ds) != 0)
        return Status::error(path + ": cannot create: directory '" + dir +
                             "': " + std::strerror(errno));
      if (!S_ISDIR(ds.st_mode))
        return Status::error(path + ": cannot create: '" + dir +
                             "' is not a directory");
      OutputTarget t;
      t.path = p;
      return t;
    }
    if (S_ISLNK(st.st_mode)) {
      std::string link(4096, '\0');
      ssize_t n = ::readlink(p.c_str(), link.data(), link.size());
      if (n < 0 || static_cast<size_t>(n) >= link.size())
        return Status::error(path + ": cannot read the symbolic link '" + p +
                             "'");
      link.resize(static_cast<size_t>(n));
      p = link.front() == '/' ? link : dirName(p) + "/" + link;
      continue;
    }
    OutputTarget t;
    t.path = p;
    if (S_ISREG(st.st_mode))
      return t;
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      t.kind = OutputTarget::Kind::Stream;
      return t;
    }
    if (S_ISDIR(st.st_mode))
      return Status::error(path + ": is a directory; give a file name");
    return Status::error(path + ": " + kindOf(st.st_mode) +
                         "; outputs are written to files, character devices "
                         "and FIFOs only");
  }
  return Status::error(path + ": too many levels of symbolic links");
}

Status checkOutputPath(const std::string &what, const std::string &path) {
  if (path.empty() || path == "-")
    return Status::success();
  Expected<OutputTarget> t = resolveOutput(path);
  if (!t)
    return t.status().withPrefix(what);
  switch (t->kind) {
  case OutputTarget::Kind::Descriptor:
    return Status::success();
  case OutputTarget::Kind::Stream:
    if (::access(t->path.c_str(), W_OK) != 0)
      return Status::error(what + ": " + path +
                           ": cannot write: " + std::strerror(errno));
    return Status::success();
  case OutputTarget::Kind::Replace: {
    const std::string dir = dirName(t->path);
    if (::access(dir.c_str(), W_OK) != 0)
      return Status::error(what + ": " + path + ": cannot write in '" + dir +
                           "': " + std::strerror(errno));
    if (::access(t->path.c_str(), F_OK) == 0 &&
        ::access(t->path.c_str(), W_OK) != 0)
      return Status::error(what + ": " + path +
                           ": cannot write: " + std::strerror(errno));
    return Status::success();
  }
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// AtomicFileWriter
//===----------------------------------------------------------------------===//

namespace {

constexpr size_t kWriteBuffer = 4u << 20;

bool writeAll(int fd, const char *p, size_t n) {
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

/// Clears O_NONBLOCK, set for an open() that must not wait for a FIFO's
/// reader.
void blocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

} // namespace

namespace {

/// Opens the special file \p t for writing without waiting for a FIFO's
/// reader.
Expected<int> openStream(const std::string &shown, const std::string &path) {
  // O_NONBLOCK: a FIFO nobody reads fails (ENXIO) instead of waiting.
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return Status::error(shown + ": cannot open: " +
                         (errno == ENXIO
                              ? std::string("a FIFO no process reads")
                              : std::string(std::strerror(errno))));
  blocking(fd);
  return fd;
}

/// A duplicate of the inherited descriptor \p fd, after what this process
/// printed so far.
Expected<int> duplicate(const std::string &shown, int fd) {
  std::fflush(nullptr);
  int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (dup < 0)
    return Status::error(shown + ": cannot use descriptor " +
                         std::to_string(fd) + ": " + std::strerror(errno));
  return dup;
}

} // namespace

Expected<int> openOutputStream(const std::string &path, bool append) {
  Expected<OutputTarget> t = resolveOutput(path);
  if (!t)
    return t.status();
  switch (t->kind) {
  case OutputTarget::Kind::Descriptor:
    return duplicate(path, t->fd);
  case OutputTarget::Kind::Stream:
    return openStream(path, t->path);
  case OutputTarget::Kind::Replace:
    break;
  }
  int fd = ::open(t->path.c_str(),
                  O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK |
                      (append ? O_APPEND : O_TRUNC),
                  0644);
  if (fd < 0)
    return Status::error(path +
                         ": cannot open for writing: " + std::strerror(errno));
  blocking(fd);
  return fd;
}

Expected<AtomicFileWriter> AtomicFileWriter::create(const std::string &path) {
  Expected<OutputTarget> t = resolveOutput(path);
  if (!t)
    return t.status();
  AtomicFileWriter w;
  w.shown = path;
  switch (t->kind) {
  case OutputTarget::Kind::Descriptor:
  case OutputTarget::Kind::Stream: {
    Expected<int> fd = t->kind == OutputTarget::Kind::Stream
                           ? openStream(path, t->path)
                           : duplicate(path, t->fd);
    if (!fd)
      return fd.status();
    w.fd = *fd;
    break;
  }
  case OutputTarget::Kind::Replace: {
    w.target = t->path;
    w.tmp = t->path + ".tmp";
    // O_NOFOLLOW and a regular-file check: the temporary file is never a
    // link or a special file left there by someone else.
    w.fd = ::open(w.tmp.c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW |
                      O_NONBLOCK,
                  0644);
    if (w.fd < 0) {
      Status st =
          Status::error(w.tmp + ": cannot create: " + std::strerror(errno));
      w.tmp.clear(); // not ours to remove
      return st;
    }
    struct stat st;
    if (::fstat(w.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      Status bad = Status::error(w.tmp + ": exists and is not a regular file");
      w.tmp.clear();
      return bad;
    }
    blocking(w.fd);
    break;
  }
  }
  w.buffer.reserve(kWriteBuffer);
  return Expected<AtomicFileWriter>(std::move(w));
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter &&other) noexcept
    : shown(std::move(other.shown)), target(std::move(other.target)),
      tmp(std::move(other.tmp)), fd(other.fd), committed(other.committed),
      buffer(std::move(other.buffer)) {
  other.fd = -1;
  other.committed = true; // the moved-from object owns nothing
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd >= 0)
    ::close(fd);
  if (!committed && !tmp.empty())
    ::unlink(tmp.c_str());
}

Status AtomicFileWriter::flushBuffer() {
  if (buffer.empty())
    return Status::success();
  if (!writeAll(fd, buffer.data(), buffer.size()))
    return Status::error((tmp.empty() ? shown : tmp) +
                         ": write failed: " + std::strerror(errno));
  buffer.clear();
  return Status::success();
}

Status AtomicFileWriter::write(const void *data, size_t n) {
  if (fd < 0)
    return Status::error(shown + ": writer is closed");
  if (n == 0)
    return Status::success();
  const char *p = static_cast<const char *>(data);
  if (buffer.size() + n > kWriteBuffer) {
    Status s = flushBuffer();
    if (!s.ok())
      return s;
    if (n >= kWriteBuffer) {
      if (!writeAll(fd, p, n))
        return Status::error((tmp.empty() ? shown : tmp) +
                             ": write failed: " + std::strerror(errno));
      return Status::success();
    }
  }
  buffer.append(p, n);
  return Status::success();
}

Status AtomicFileWriter::commit() {
  if (fd < 0)
    return Status::error(shown + ": writer is closed");
  Status s = flushBuffer();
  if (!s.ok())
    return s;
  if (tmp.empty()) {
    // Written through a special file or a descriptor: nothing to rename.
    int rc = ::close(fd);
    fd = -1;
    committed = true;
    if (rc != 0 && errno != EINTR)
      return Status::error(shown + ": close failed: " + std::strerror(errno));
    return Status::success();
  }
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

Status writeFileAtomically(const std::string &path, std::string_view bytes) {
  Expected<AtomicFileWriter> w = AtomicFileWriter::create(path);
  if (!w)
    return w.status();
  if (Status st = w->write(bytes.data(), bytes.size()); !st.ok())
    return st;
  return w->commit();
}

Status checkRegularFile(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::error(path + ": cannot open: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Status::error(path + ": " + kindOf(st.st_mode));
  return Status::success();
}

Expected<int> openRegularFile(const std::string &path) {
  // O_NONBLOCK: open() of a FIFO without a writer would wait forever.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return Status::error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::error(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": " + kindOf(st.st_mode));
  }
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

Expected<std::string> readRegularFile(const std::string &path,
                                      uint64_t maxBytes) {
  Expected<int> fd = openRegularFile(path);
  if (!fd)
    return fd.status();
  auto tooLarge = [&](const std::string &size) {
    ::close(*fd);
    return Status::error(path + ": " + size +
                         " bytes, more than the limit of " +
                         std::to_string(maxBytes));
  };
  struct stat st;
  if (::fstat(*fd, &st) == 0 && static_cast<uint64_t>(st.st_size) > maxBytes)
    return tooLarge(std::to_string(st.st_size));
  std::string text;
  char buf[1 << 16];
  for (;;) {
    if (text.size() > maxBytes)
      return tooLarge("more than " + std::to_string(maxBytes));
    ssize_t n = ::read(*fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      int e = errno;
      ::close(*fd);
      return Status::error(path + ": cannot read: " + std::strerror(e));
    }
    if (n == 0)
      break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(*fd);
  return text;
}

} // namespace mtc
