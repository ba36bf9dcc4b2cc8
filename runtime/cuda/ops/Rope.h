//===- Rope.h - Launcher of the rotary embedding kernel ---------*- C++ -*-===//
//
// Part of mtc. The host side of runtime/cuda/kernels/rope.cu, mirroring
// cpu::rope (runtime/cpu/Kernels.h) with `const Launch &` first, device
// pointers and the storage type last. The frequency table is computed on
// the host by cpu::ropeInvFreq (one definition for both backends) and
// written to scratch by a kernel that takes it by value, so nothing waits
// for the host. Never synchronises.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_ROPE_H
#define MTC_RUNTIME_CUDA_OPS_ROPE_H

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/ops/Launch.h"

#include <cstdint>

namespace mtc::cuda::ops {

/// x, y [B, S, H, D] of storage type \p type; rotate-half over the first
/// cpu::ropeRotaryDims(p, D) dims, position s + posOffset; inverse: by
/// -angle (the VJP). y may be x.
Status rope(const Launch &L, DevPtr x, DevPtr y, int64_t B, int64_t S,
            int64_t H, int64_t D, const cpu::RopeParams &p, bool inverse,
            int64_t posOffset = 0, DType type = DType::F32);

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_ROPE_H
