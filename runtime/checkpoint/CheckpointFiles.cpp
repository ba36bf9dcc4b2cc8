//===- CheckpointFiles.cpp - What the checkpoint files share ----*- C++ -*-===//
//
// Part of mtc. See CheckpointFiles.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/CheckpointFiles.h"

#include "lib/Support/Files.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc::driver::ckpt {

namespace fs = std::filesystem;

bool exists(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Status syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(dir + ": cannot open: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0 && e != EINVAL)
    return Status::error(dir + ": fsync failed: " + std::strerror(e));
  return Status::success();
}

Status removeTree(const std::string &path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec)
    return Status::error(path + ": cannot remove: " + ec.message());
  return Status::success();
}

Status renamePath(const std::string &from, const std::string &to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    return Status::error("cannot rename '" + from + "' to '" + to +
                         "': " + std::strerror(errno));
  return Status::success();
}

Status writeText(const std::string &path, const std::string &text) {
  Expected<AtomicFileWriter> w = AtomicFileWriter::create(path);
  if (!w)
    return w.status();
  Status s = w->write(text.data(), text.size());
  if (s.ok())
    s = w->commit();
  return s;
}

std::string absolutePath(const std::string &path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

std::string trimSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  return dir;
}

std::string showNumber(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  // Shortest form that reads back (1e-3, not 0.0010000000000000000208).
  for (int p = 1; p <= 17; ++p) {
    std::ostringstream t;
    t.precision(p);
    t << v;
    if (std::strtod(t.str().c_str(), nullptr) == v)
      return t.str();
  }
  return os.str();
}

} // namespace mtc::driver::ckpt
