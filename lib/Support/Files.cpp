//===- Files.cpp - Input files and output paths, checked ------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Files.h"

#include <cerrno>
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

Status checkOutputs(const std::vector<NamedPath> &outputs,
                    const std::vector<NamedPath> &inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath &out = outputs[i];
    for (const NamedPath &in : inputs)
      if (sameFile(out.path, in.path))
        return Status::error(
            out.what + " '" + out.path + "' is the same file as " + in.what +
            " '" + in.path +
            "'; an output never overwrites an input: give another path");
    for (size_t j = i + 1; j < outputs.size(); ++j)
      if (samePath(out.path, outputs[j].path))
        return Status::error(out.what + " '" + out.path +
                             "' is the same file as " + outputs[j].what + " '" +
                             outputs[j].path + "': give them different paths");
  }
  return Status::success();
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

Expected<std::string> readRegularFile(const std::string &path) {
  Expected<int> fd = openRegularFile(path);
  if (!fd)
    return fd.status();
  std::string text;
  char buf[1 << 16];
  for (;;) {
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
