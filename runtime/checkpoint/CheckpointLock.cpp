//===- CheckpointLock.cpp - The --out directory and its one writer -*- C++
//-*-===//
//
// Part of mtc. See Checkpoint.h: what --out may be, the lock that keeps a
// second run from writing the same checkpoint, and the metrics file trimmed
// back to a checkpoint's step on resume.
//
//===----------------------------------------------------------------------===//

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointFiles.h"

#include "lib/Support/JsonParse.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mtc::driver {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace ckpt;

Status checkCheckpointTarget(const std::string &dirArg) {
  std::string dir = trimSlashes(dirArg);
  if (!exists(dir))
    return Status::success();
  if (!isDirectory(dir))
    return Status::error("--out '" + dir + "' exists and is not a directory");
  if (exists(dir + "/" + kState))
    return Status::success();
  std::error_code ec;
  if (fs::is_empty(dir, ec) && !ec)
    return Status::success();
  return Status::error("--out '" + dir +
                       "' is a directory that holds no checkpoint (no " +
                       kState +
                       "); a checkpoint replaces its whole directory, so "
                       "give a new or empty one");
}

namespace {

/// \p dir with a symlink at its end followed (repeatedly): checkpoints are
/// written into the directory a symlink names, never over the link.
Expected<std::string> followSymlinks(std::string dir) {
  for (int depth = 0; depth < 40; ++depth) {
    struct stat st;
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISLNK(st.st_mode))
      return dir;
    std::error_code ec;
    fs::path target = fs::read_symlink(dir, ec);
    if (ec)
      return Status::error("--out '" + dir +
                           "': cannot read the symlink: " + ec.message());
    if (target.is_relative())
      target = fs::path(dir).parent_path() / target;
    dir = trimSlashes(target.lexically_normal().string());
  }
  return Status::error("--out '" + dir + "': too many levels of symlinks");
}

/// The pid written in lock file \p fd ("" if none).
std::string lockHolder(int fd) {
  char buf[32] = {0};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' '))
    pid.pop_back();
  return pid;
}

/// \p outDir spelled one way, so that every spelling of a directory takes
/// the same lock ("ck/.", "./ck/" and "ck" are "ck"); an error for a path
/// that names the current directory or one above it, which a checkpoint
/// cannot replace ("." would be renamed away under the process).
Expected<std::string> normalizeOutDir(const std::string &outDir) {
  std::string dir = trimSlashes(fs::path(outDir).lexically_normal().string());
  fs::path last = fs::path(dir).filename();
  std::error_code ec;
  fs::path here = fs::current_path(ec);
  fs::path full = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  bool aboveHere = false;
  if (!ec && !here.empty()) {
    // Whether `full` is the current directory or one of its ancestors.
    auto h = here.begin();
    aboveHere = true;
    for (auto f = full.begin(); f != full.end(); ++f, ++h)
      if (*f != "" && (h == here.end() || *f != *h)) {
        aboveHere = false;
        break;
      }
  }
  if (dir == "." || dir == ".." || dir == "/" || last == ".." || aboveHere)
    return Status::error("--out '" + outDir +
                         "' is the current directory or one above it; every "
                         "checkpoint replaces its whole directory, so give "
                         "one of its own (e.g. --out ./checkpoint)");
  return dir;
}

} // namespace

Expected<CheckpointLock> CheckpointLock::acquire(const std::string &outDir) {
  Expected<std::string> normal = normalizeOutDir(outDir);
  if (!normal)
    return normal.status();
  Expected<std::string> dir = followSymlinks(*normal);
  if (!dir)
    return dir.status();
  if (Status s = checkCheckpointTarget(*dir); !s.ok())
    return s;
  std::string shown = "--out '" + outDir + "'";
  std::string parent = fs::path(*dir).parent_path().string();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec)
      return Status::error(shown + ": cannot create directory '" + parent +
                           "': " + ec.message());
  }
  CheckpointLock lock;
  lock.resolved = *dir;
  lock.lockPath = *dir + ".lock";
  // The lock file may be removed by its holder between our open() and
  // flock(): then the lock is on a file nobody else will find; retry.
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::open(lock.lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return Status::error(shown + ": cannot create the lock file '" +
                           lock.lockPath + "': " + std::strerror(errno) +
                           " (checkpoints are written beside it, so its "
                           "directory must be writable)");
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int e = errno;
      std::string pid = lockHolder(fd);
      ::close(fd);
      if (e == EWOULDBLOCK)
        return Status::error(
            shown + " is being written by another mtc train (" +
            (pid.empty() ? std::string("pid unknown") : "pid " + pid) +
            ", holding '" + lock.lockPath +
            "'); wait for it to finish or give another --out");
      return Status::error(shown + ": cannot lock '" + lock.lockPath +
                           "': " + std::strerror(e));
    }
    struct stat held, now;
    if (::fstat(fd, &held) == 0 && ::stat(lock.lockPath.c_str(), &now) == 0 &&
        held.st_dev == now.st_dev && held.st_ino == now.st_ino) {
      std::string pid = std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) !=
                                         static_cast<ssize_t>(pid.size())) {
        int e = errno;
        ::close(fd);
        return Status::error(shown + ": cannot write the lock file '" +
                             lock.lockPath + "': " + std::strerror(e));
      }
      lock.fd = fd;
      return Expected<CheckpointLock>(std::move(lock));
    }
    ::close(fd);
  }
  return Status::error(shown + ": cannot lock '" + lock.lockPath +
                       "': it keeps being replaced");
}

CheckpointLock::CheckpointLock(CheckpointLock &&other) noexcept
    : fd(other.fd), resolved(std::move(other.resolved)),
      lockPath(std::move(other.lockPath)) {
  other.fd = -1;
}

CheckpointLock &CheckpointLock::operator=(CheckpointLock &&other) noexcept {
  if (this != &other) {
    release();
    fd = other.fd;
    resolved = std::move(other.resolved);
    lockPath = std::move(other.lockPath);
    other.fd = -1;
  }
  return *this;
}

CheckpointLock::~CheckpointLock() { release(); }

void CheckpointLock::release() {
  if (fd < 0)
    return;
  // Removed while still held, so that no other process can take a lock on
  // this file and then lose it to a fresh one.
  ::unlink(lockPath.c_str());
  ::close(fd);
  fd = -1;
}

Status trimMetrics(const std::string &path, int64_t step) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::success();
  std::string line, kept;
  bool dropped = false;
  while (std::getline(in, line)) {
    if (in.eof()) {
      // The last line has no newline: it was cut short while being written.
      dropped = true;
      break;
    }
    // A line that is not JSON (or holds a number past a double) is kept.
    Expected<json> parsed = parseJson(line, path);
    const json r = parsed ? std::move(*parsed) : json();
    if (r.is_object() && r.contains("step") && r["step"].is_number_integer() &&
        r["step"].get<int64_t>() > step) {
      dropped = true;
      continue;
    }
    kept += line + "\n";
  }
  if (!dropped)
    return Status::success();
  return writeText(path, kept);
}

} // namespace mtc::driver
