//===- Launch.cpp - Where the CUDA op launchers queue their work ----------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/ops/Launch.h"

namespace mtc::cuda::ops {

Expected<void *> KernelFunctions::get(const std::string &file,
                                      const std::string &entry) {
  auto key = std::make_pair(file, entry);
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  Expected<void *> module = loader.loadLibrary(file);
  if (!module)
    return module.status();
  Expected<void *> fn = loader.function(*module, entry);
  if (!fn)
    return fn.status();
  cache.emplace(key, *fn);
  return *fn;
}

Status Launch::kernel(const std::string &file, const std::string &entry,
                      Dim3 grid, Dim3 block, unsigned sharedBytes,
                      std::vector<void *> args) const {
  Expected<void *> fn = functions->get(file, entry);
  if (!fn)
    return fn.status();
  return launchFunction(*fn, "'" + entry + "' (" + file + ")", grid, block,
                        sharedBytes, std::move(args));
}

Status Launch::launchFunction(void *fn, const std::string &what, Dim3 grid,
                              Dim3 block, unsigned sharedBytes,
                              std::vector<void *> args) const {
  if (sharedBytes > 48 * 1024) {
    Status s = cudaCheck(
        *api,
        api->cuFuncSetAttribute(fn, kCuFuncAttrMaxDynamicSharedSizeBytes,
                                static_cast<int>(sharedBytes)),
        "cuFuncSetAttribute for " + what);
    if (!s)
      return s;
  }
  return cudaCheck(*api,
                   api->cuLaunchKernel(fn, grid.x, grid.y, grid.z, block.x,
                                       block.y, block.z, sharedBytes, stream,
                                       args.data(), nullptr),
                   "launching " + what);
}

Status Launch::zero(DevPtr p, int64_t bytes) const {
  if (bytes <= 0)
    return Status::success();
  return cudaCheck(
      *api, api->cuMemsetD8Async(p, 0, static_cast<size_t>(bytes), stream),
      "cuMemsetD8Async");
}

Status Launch::copy(DevPtr dst, DevPtr src, int64_t bytes) const {
  if (bytes <= 0 || dst == src)
    return Status::success();
  return cudaCheck(
      *api,
      api->cuMemcpyDtoDAsync_v2(dst, src, static_cast<size_t>(bytes), stream),
      "cuMemcpyDtoDAsync");
}

Status Launch::gemmOp(const GemmShape &shape, const GemmOperands &ops) const {
  if (!gemm)
    return Status::error("no GEMM engine for this launch");
  return gemm->gemm(shape, ops, stream, gemmWorkspace, gemmWorkspaceBytes);
}

} // namespace mtc::cuda::ops
