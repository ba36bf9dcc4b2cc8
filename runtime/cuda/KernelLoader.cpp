//===- KernelLoader.cpp - CUDA C modules onto a driver --------------------===//
//
// Part of mtc. See KernelLoader.h.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/KernelLoader.h"

#include "runtime/cuda/KernelCache.h"
#include "runtime/cuda/kernels/KernelSources.h"

#include <cstring>

namespace mtc::cuda {

Expected<std::unique_ptr<KernelLoader>>
KernelLoader::create(std::shared_ptr<const CudaDriverApi> api, int ordinal,
                     KernelCache *cache) {
  std::unique_ptr<KernelLoader> l(new KernelLoader());
  const CudaDriverApi &d = *api;
  int device = 0, major = 0, minor = 0;
  if (Status s = cudaCheck(d, d.cuDeviceGet(&device, ordinal),
                           "cuDeviceGet(" + std::to_string(ordinal) + ")");
      !s.ok())
    return s;
  if (Status s =
          cudaCheck(d,
                    d.cuDeviceGetAttribute(
                        &major, kCuDevAttrComputeCapabilityMajor, device),
                    "cuDeviceGetAttribute");
      !s.ok())
    return s;
  if (Status s =
          cudaCheck(d,
                    d.cuDeviceGetAttribute(
                        &minor, kCuDevAttrComputeCapabilityMinor, device),
                    "cuDeviceGetAttribute");
      !s.ok())
    return s;
  l->archName = "sm_" + std::to_string(major) + std::to_string(minor);
  l->api = std::move(api);
  l->cache = cache;
  if (!d.emulated) {
    Expected<std::shared_ptr<const Nvrtc>> nvrtc = Nvrtc::load();
    if (!nvrtc)
      return Status::error("cannot compile CUDA kernels: " + nvrtc.message());
    l->nvrtc = *nvrtc;
    // <cuda_bf16.h> & co.: NVRTC needs the toolkit's headers.
    if (Expected<std::string> inc = cudaToolkitIncludeDir(); inc.ok())
      l->includeDirs.push_back(*inc);
  }
  return l;
}

KernelLoader::~KernelLoader() {
  for (auto &[name, module] : modules)
    api->cuModuleUnload(module);
}

Expected<void *> KernelLoader::load(const std::string &name,
                                    const std::string &text,
                                    const std::vector<std::string> &extra) {
  std::lock_guard<std::mutex> lock(mu);
  std::string key = name;
  for (const std::string &o : extra)
    key += "\n" + o;
  if (auto it = modules.find(key); it != modules.end())
    return it->second;
  const CudaDriverApi &d = *api;
  void *module = nullptr;
  if (d.emulated) {
    if (!extra.empty())
      return Status::error(name +
                           ": the emulated driver runs the build's "
                           "compile of this file and takes no "
                           "compile options (" +
                           extra.front() + ")");
    EmulatedModuleImage image;
    image.module = name.c_str();
    image.source = text.c_str();
    std::string log;
    image.log = &log;
    if (Status s = cudaCheck(d, d.cuModuleLoadData(&module, &image),
                             "loading " + name + " on " + d.where);
        !s.ok())
      return log.empty() ? s : Status::error(log);
  } else {
    NvrtcOptions options;
    options.arch = archName;
    options.cubin = true;
    options.extra = extra;
    options.includeDirs = includeDirs;
    options.headers = libraryKernelHeaders();
    Expected<CompiledModule> compiled =
        cache ? cache->getOrCompile(*nvrtc, text, name, options)
              : nvrtc->compile(text, name, options);
    if (!compiled)
      return compiled.status();
    kernelStats.insert(kernelStats.end(), compiled->stats.begin(),
                       compiled->stats.end());
    if (Status s =
            cudaCheck(d, d.cuModuleLoadData(&module, compiled->cubin.data()),
                      "loading " + name + " (" + archName + " cubin)");
        !s.ok())
      return s;
  }
  modules[key] = module;
  moduleNames[module] = name;
  return module;
}

Expected<void *> KernelLoader::loadLibrary(const std::string &name) {
  for (const KernelSource &src : libraryKernelSources())
    if (name == src.name && !src.header)
      return load(name, src.text);
  return Status::error("no library kernel file '" + name + "'");
}

Expected<void *> KernelLoader::function(void *module,
                                        const std::string &entry) {
  const CudaDriverApi &d = *api;
  void *fn = nullptr;
  int rc = d.cuModuleGetFunction(&fn, module, entry.c_str());
  if (rc != kCudaSuccess) {
    std::string file;
    {
      std::lock_guard<std::mutex> lock(mu);
      auto it = moduleNames.find(module);
      file = it == moduleNames.end() ? "module" : it->second;
    }
    return Status::error(file + ": no kernel '" + entry + "' (" +
                         cudaErrorText(d, rc) + ")");
  }
  return fn;
}

} // namespace mtc::cuda
