//===- Movement.h - Transpose, slice, concat, pad on the GPU ----*- C++ -*-===//
//
// Part of mtc. The launchers of movement.cu: cpu::transpose, slice, concat
// and pad (runtime/cpu/Kernels.h) with device pointers, plus broadcastRows
// (matmul's bias; no CPU counterpart). They are copies, exact and
// type-agnostic: DType::F32 moves any 4-byte element (f32, int32),
// DType::BF16 any 2-byte one. Every tensor is dense and row-major.
//
// Geometry: grid-stride kernels, 256 threads per block, min(ceil(total /
// 256), 65535) blocks over the output's elements. Launchers never
// synchronise.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_MOVEMENT_H
#define MTC_RUNTIME_CUDA_OPS_MOVEMENT_H

#include "runtime/cuda/kernels/shapes.cuh"
#include "runtime/cuda/ops/Launch.h"

#include <cstdint>
#include <vector>

namespace mtc::cuda::ops {

/// y = x transposed by perm: y dim i is x dim perm[i] (cpu::transpose); x
/// has \p shape. Dims of size 1 are dropped and x dims that stay adjacent
/// in y merged first (transposeShape). Errors: perm not a permutation of
/// shape's dims, more than 8 dims left after merging.
Status transpose(const Launch &L, DevPtr x, const std::vector<int64_t> &shape,
                 const std::vector<int64_t> &perm, DevPtr y,
                 DType dtype = DType::F32);

/// y[outer, end - start, inner] = x[outer, n, inner][:, start:end, :]
/// (cpu::slice). Errors: not 0 <= start <= end <= n.
Status slice(const Launch &L, DevPtr x, DevPtr y, int64_t outer, int64_t n,
             int64_t inner, int64_t start, int64_t end,
             DType dtype = DType::F32);

/// y[outer, sum(sizes), inner] = the parts [outer, sizes[i], inner] one
/// after another along the middle axis (cpu::concat). More than 8 parts
/// (the kernel's limit) go in groups of 8 through L.scratch, then once more.
Status concat(const Launch &L, const std::vector<DevPtr> &parts,
              const std::vector<int64_t> &sizes, DevPtr y, int64_t outer,
              int64_t inner, DType dtype = DType::F32);

/// y[outer, n, inner]: x[outer, end - start, inner] at [start, end) of the
/// middle axis, zeros elsewhere (cpu::pad, the VJP of slice).
Status pad(const Launch &L, DevPtr x, DevPtr y, int64_t outer, int64_t n,
           int64_t inner, int64_t start, int64_t end, DType dtype = DType::F32);

/// y[rows, n] = the row x[n] repeated (matmul's bias before its GEMM).
Status broadcastRows(const Launch &L, DevPtr x, DevPtr y, int64_t rows,
                     int64_t n, DType dtype = DType::F32);

/// The TransposeShape transpose() passes to transpose_*: size-1 dims
/// dropped, x dims adjacent in both x and y merged. \p what names the op in
/// errors.
Expected<mtc_cuda::TransposeShape>
transposeShape(const std::vector<int64_t> &shape,
               const std::vector<int64_t> &perm,
               const char *what = "transpose");

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_MOVEMENT_H
