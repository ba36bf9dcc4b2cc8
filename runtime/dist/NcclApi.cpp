//===- NcclApi.cpp - The NCCL entry points, loaded with dlopen ------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/dist/NcclApi.h"

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

namespace mtc::dist {

std::string ncclLibraryName() {
  if (const char *env = std::getenv("MTC_NCCL_LIBRARY"); env && *env)
    return env;
  return "libnccl.so.2";
}

namespace {

/// The library handle; never closed (NCCL's threads may outlive its users).
struct Library {
  void *handle = nullptr;
};

template <typename Fn>
bool resolve(void *handle, const char *name, Fn &slot, std::string &missing) {
  slot = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (!slot && missing.empty())
    missing = name;
  return slot != nullptr;
}

} // namespace

Expected<std::shared_ptr<const NcclApi>> openNccl(const std::string &name) {
  void *handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = ::dlerror();
    return Status::error("NCCL not found: " + name + " could not be opened (" +
                         (why ? why : "unknown reason") +
                         "); install NCCL (it ships with the CUDA toolkit's "
                         "packages as libnccl2) or set MTC_NCCL_LIBRARY");
  }
  auto api = std::make_shared<NcclApi>();
  std::string missing;
  resolve(handle, "ncclGetVersion", api->ncclGetVersion, missing);
  resolve(handle, "ncclGetUniqueId", api->ncclGetUniqueId, missing);
  resolve(handle, "ncclCommInitRank", api->ncclCommInitRank, missing);
  resolve(handle, "ncclCommDestroy", api->ncclCommDestroy, missing);
  resolve(handle, "ncclCommAbort", api->ncclCommAbort, missing);
  resolve(handle, "ncclAllReduce", api->ncclAllReduce, missing);
  resolve(handle, "ncclReduceScatter", api->ncclReduceScatter, missing);
  resolve(handle, "ncclAllGather", api->ncclAllGather, missing);
  resolve(handle, "ncclGroupStart", api->ncclGroupStart, missing);
  resolve(handle, "ncclGroupEnd", api->ncclGroupEnd, missing);
  resolve(handle, "ncclGetErrorString", api->ncclGetErrorString, missing);
  resolve(handle, "ncclCommGetAsyncError", api->ncclCommGetAsyncError, missing);
  if (!missing.empty())
    return Status::error("NCCL at " + name + " has no " + missing +
                         ": it is older than NCCL 2.4, or not NCCL");
  api->where = name;
  api->owner = std::make_shared<Library>(Library{handle});
  return std::shared_ptr<const NcclApi>(std::move(api));
}

Expected<std::shared_ptr<const NcclApi>> loadNccl() {
  static std::once_flag once;
  static Expected<std::shared_ptr<const NcclApi>> *result = nullptr;
  std::call_once(once, [] {
    result = new Expected<std::shared_ptr<const NcclApi>>(
        openNccl(ncclLibraryName()));
  });
  return *result;
}

std::string ncclErrorText(const NcclApi &api, int result) {
  static const char *names[] = {"ncclSuccess",         "ncclUnhandledCudaError",
                                "ncclSystemError",     "ncclInternalError",
                                "ncclInvalidArgument", "ncclInvalidUsage",
                                "ncclRemoteError",     "ncclInProgress"};
  std::string text = result >= 0 && result < 8 ? names[result] : "ncclResult";
  text += " (" + std::to_string(result) + ")";
  if (api.ncclGetErrorString)
    if (const char *s = api.ncclGetErrorString(result); s && *s)
      text += std::string(": ") + s;
  return text;
}

std::string ncclVersionText(int version) {
  const bool newStyle = version >= 20900;
  const int major = newStyle ? version / 10000 : version / 1000;
  const int rest = newStyle ? version % 10000 : version % 1000;
  return std::to_string(major) + "." + std::to_string(rest / 100) + "." +
         std::to_string(rest % 100);
}

} // namespace mtc::dist
