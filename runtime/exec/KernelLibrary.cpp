//===- KernelLibrary.cpp - Compiled CPU kernels loaded with dlopen --------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//
#include "runtime/exec/KernelLibrary.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>

namespace mtc::exec {
namespace {

std::string dlError() {
  const char *e = dlerror();
  return e ? e : "unknown dlopen error";
}

/// Writes all of \p data to \p fd.
bool writeAll(int fd, const std::string &data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

} // namespace

Expected<std::unique_ptr<KernelLibrary>>
KernelLibrary::load(const std::string &sharedObject) {
  if (sharedObject.compare(0, 4, "\177ELF") != 0)
    return Status::error("cpu kernels: not an ELF shared object");
  const char *tmp = std::getenv("TMPDIR");
  std::string path =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/mtc-kernels-XXXXXX";
  int fd = ::mkstemp(path.data());
  if (fd < 0)
    return Status::error("cpu kernels: cannot create a temporary file '" +
                         path + "': " + std::strerror(errno));
  bool written = writeAll(fd, sharedObject);
  int writeErr = errno;
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());
    return Status::error("cpu kernels: cannot write '" + path +
                         "': " + std::strerror(writeErr));
  }
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string why = handle ? "" : dlError();
  ::unlink(path.c_str()); // the mapping stays valid
  if (!handle)
    return Status::error("cpu kernels: cannot load the shared object (" + why +
                         "); is the temporary directory mounted noexec? set "
                         "TMPDIR to another directory");
  return std::unique_ptr<KernelLibrary>(new KernelLibrary(handle));
}

Expected<KernelLibrary::Kernel>
KernelLibrary::lookup(const std::string &name) const {
  dlerror();
  void *sym = dlsym(handle, name.c_str());
  if (!sym)
    return Status::error("cpu kernels: no kernel '" + name +
                         "' in the library (" + dlError() + ")");
  return reinterpret_cast<Kernel>(sym);
}

KernelLibrary::~KernelLibrary() { dlclose(handle); }

} // namespace mtc::exec
