//===- DynamicLibrary.cpp - A shared library opened with dlopen -----------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DynamicLibrary.h"

#include <cstdlib>
#include <dlfcn.h>

namespace mtc::cuda {

Expected<DynamicLibrary>
DynamicLibrary::open(const std::vector<std::string> &names,
                     const char *overrideEnv) {
  std::vector<std::string> tried = names;
  if (overrideEnv)
    if (const char *path = std::getenv(overrideEnv); path && *path)
      tried = {path};
  std::string lastError;
  for (const std::string &name : tried) {
    if (void *h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      DynamicLibrary lib;
      lib.handle = h;
      lib.opened = name;
      return Expected<DynamicLibrary>(std::move(lib));
    }
    if (const char *e = ::dlerror())
      lastError = e;
  }
  std::string list;
  for (size_t i = 0; i < tried.size(); ++i)
    list += (i ? (i + 1 == tried.size() ? " or " : ", ") : "") + tried[i];
  return Status::error(list + " not found" +
                       (lastError.empty() ? "" : " (" + lastError + ")"));
}

DynamicLibrary::DynamicLibrary(DynamicLibrary &&other) noexcept
    : handle(other.handle), opened(std::move(other.opened)) {
  other.handle = nullptr;
}

DynamicLibrary &DynamicLibrary::operator=(DynamicLibrary &&other) noexcept {
  if (this != &other) {
    if (handle)
      ::dlclose(handle);
    handle = other.handle;
    opened = std::move(other.opened);
    other.handle = nullptr;
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle)
    ::dlclose(handle);
}

void *DynamicLibrary::symbol(const char *symbol) const {
  return handle ? ::dlsym(handle, symbol) : nullptr;
}

Status resolveSymbols(const DynamicLibrary &lib,
                      const std::vector<const char *> &names,
                      const std::vector<void **> &slots) {
  for (size_t i = 0; i < names.size(); ++i) {
    void *p = lib.symbol(names[i]);
    if (!p)
      return Status::error(lib.name() + " has no " + names[i] +
                           ": the library is older than mtc needs");
    *slots[i] = p;
  }
  return Status::success();
}

} // namespace mtc::cuda
