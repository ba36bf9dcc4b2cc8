//===- Norm.h - Launchers of the RMSNorm / LayerNorm kernels ----*- C++ -*-===//
//
// Part of mtc. The host side of runtime/cuda/kernels/norm.cu, one launcher
// per runtime/cpu function of the same name (runtime/cpu/Kernels.h), with
// `const Launch &` first, device pointers and the storage type last. x, y,
// dy [rows, D], w, b [D]. The backward passes overwrite dx (always f32, as
// the kernels write it) and ACCUMULATE dw / db as runtime/cpu does, through
// per-chunk partials (min(rows, 64) chunks, as runtime/cpu's) summed in
// chunk order: bit-identical from run to run. They take scratch: the row
// statistics and the partials. None synchronises.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_NORM_H
#define MTC_RUNTIME_CUDA_OPS_NORM_H

#include "runtime/cuda/ops/Launch.h"

#include <cstdint>

namespace mtc::cuda::ops {

/// y = x / sqrt(mean(x^2) + eps) * (offset + w) over the last axis D.
Status rmsnorm(const Launch &L, DevPtr x, DevPtr w, DevPtr y, int64_t rows,
               int64_t D, float eps, float offset, DType type = DType::F32);
/// dx (f32, overwritten) and dwAcc [D] (f32, accumulated; 0: not wanted);
/// x, w, dy of storage type \p type.
Status rmsnormGrad(const Launch &L, DevPtr x, DevPtr w, DevPtr dy, DevPtr dx,
                   DevPtr dwAcc, int64_t rows, int64_t D, float eps,
                   float offset, DType type = DType::F32);
/// y = (x - mean) / sqrt(var + eps) * w + b over the last axis (b may be 0).
Status layernorm(const Launch &L, DevPtr x, DevPtr w, DevPtr b, DevPtr y,
                 int64_t rows, int64_t D, float eps, DType type = DType::F32);
/// dx (f32, overwritten); dwAcc, dbAcc [D] (f32, accumulated; either may be
/// 0: not wanted); x, w, dy of storage type \p type.
Status layernormGrad(const Launch &L, DevPtr x, DevPtr w, DevPtr dy, DevPtr dx,
                     DevPtr dwAcc, DevPtr dbAcc, int64_t rows, int64_t D,
                     float eps, DType type = DType::F32);

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_NORM_H
