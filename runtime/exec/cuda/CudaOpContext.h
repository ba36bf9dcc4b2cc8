//===- CudaOpContext.h - What the CUDA kernel-table entries share -*- C++ -*-=//
//
// Part of mtc. Internal to runtime/exec/cuda: the helpers of the CUDA
// kernel-table entries (CudaKernels.cpp, CudaDenseKernels.cpp,
// CudaMoeKernels.cpp), which reach
// their backend, device pointers and launch errors through an OpContext.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_CUDA_CUDAOPCONTEXT_H
#define MTC_RUNTIME_EXEC_CUDA_CUDAOPCONTEXT_H

#include "runtime/exec/OpContext.h"
#include "runtime/exec/cuda/CudaBackend.h"

namespace mtc::exec::cudaops {

using cuda::ops::DevPtr;

/// The CUDA backend the op runs on.
inline CudaBackend &backendOf(OpContext &c) {
  return static_cast<CudaBackend &>(c.backend());
}

/// A tensor's device address.
inline DevPtr ptr(const Tensor &t) {
  return t.isInt ? reinterpret_cast<DevPtr>(t.i.get())
                 : reinterpret_cast<DevPtr>(t.f.get());
}

/// A launcher's error as the op's error (its source location first).
inline void check(OpContext &c, const Status &st) {
  if (!st)
    c.fail(st.message());
}

/// The launchers' storage type of \p t (bf16 under a bf16 plan, else f32;
/// int32 tensors move as 4-byte elements).
inline cuda::ops::DType typeOf(const Tensor &t) {
  return t.dtype == DType::BF16 ? cuda::ops::DType::BF16
                                : cuda::ops::DType::F32;
}

/// \p t's elements stored as \p want: \p t itself, or a converted copy in
/// the op's scratch (\p L: the op's one launch context, whose scratch lives
/// until the op's kernels have run). Where a bf16 plan's tensors meet f32
/// ones (docs/cuda.md, "Precisions").
DevPtr as(OpContext &c, const cuda::ops::Launch &L, const Tensor &t,
          cuda::ops::DType want);

/// Scratch for \p n elements of \p type (the op's scratch, as as()).
DevPtr scratchOf(OpContext &c, const cuda::ops::Launch &L, int64_t n,
                 cuda::ops::DType type);

/// The KV cache of generation is the CPU backend's.
inline void noDecoding(OpContext &c) {
  if (c.decoding())
    c.fail("KV-cache decoding runs on the CPU backend only");
}

/// matmul, weight_grad, attention (+ grad) and the data movement ops
/// (CudaDenseKernels.cpp).
void addDenseKernels(KernelTable &t);
/// moe and moe_grad with the routing on the device (CudaMoeKernels.cpp).
void addMoeKernels(KernelTable &t);
/// fused: the bundle's CUDA C of the region (CudaFusedKernels.cpp).
void addFusedKernels(KernelTable &t);

} // namespace mtc::exec::cudaops

#endif // MTC_RUNTIME_EXEC_CUDA_CUDAOPCONTEXT_H
