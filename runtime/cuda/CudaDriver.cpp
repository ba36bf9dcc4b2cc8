//===- CudaDriver.cpp - The CUDA driver API, loaded with dlopen -----------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaDriver.h"

#include "runtime/cuda/DynamicLibrary.h"

#include <mutex>
#include <vector>

namespace mtc::cuda {

std::string cudaErrorText(const CudaDriverApi &api, int rc) {
  const char *name = nullptr, *text = nullptr;
  if (api.cuGetErrorName)
    api.cuGetErrorName(rc, &name);
  if (api.cuGetErrorString)
    api.cuGetErrorString(rc, &text);
  std::string out = name ? name : "CUDA error";
  out += " (" + std::to_string(rc) + ")";
  if (text)
    out += std::string(": ") + text;
  return out;
}

Status cudaCheck(const CudaDriverApi &api, int rc, const std::string &what) {
  if (rc == kCudaSuccess)
    return Status::success();
  return Status::error(what + ": " + cudaErrorText(api, rc));
}

Status resolveDriverSymbols(const DynamicLibrary &lib, CudaDriverApi &api) {
  api.where = lib.name();
  std::vector<const char *> names;
  std::vector<void **> slots;
#define MTC_CUDA_SYMBOL(name, params)                                          \
  names.push_back(#name);                                                      \
  slots.push_back(reinterpret_cast<void **>(&api.name));
#include "runtime/cuda/CudaDriverSymbols.def"
  return resolveSymbols(lib, names, slots);
}

Expected<std::shared_ptr<const CudaDriverApi>> loadCudaDriver() {
  static std::mutex mu;
  static std::shared_ptr<const CudaDriverApi> loaded;
  static DynamicLibrary library;
  static Status failure;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded)
    return loaded;
  if (!failure.ok())
    return failure;
  Expected<DynamicLibrary> lib = DynamicLibrary::open({"libcuda.so.1"});
  if (!lib) {
    failure = Status::error("no CUDA driver: " + lib.message());
    return failure;
  }
  auto api = std::make_shared<CudaDriverApi>();
  if (Status st = resolveDriverSymbols(*lib, *api); !st.ok()) {
    failure = Status::error("no usable CUDA driver: " + st.message());
    return failure;
  }
  if (int rc = api->cuInit(0)) {
    failure = Status::error(rc == kCudaErrorNoDevice
                                ? "no CUDA device: " + cudaErrorText(*api, rc)
                                : "no CUDA driver: cuInit failed: " +
                                      cudaErrorText(*api, rc));
    return failure;
  }
  library = std::move(*lib);
  loaded = std::move(api);
  return loaded;
}

} // namespace mtc::cuda
