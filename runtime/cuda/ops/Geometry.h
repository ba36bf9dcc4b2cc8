//===- Geometry.h - Launch geometry rules of the op launchers ---*- C++ -*-===//
//
// Part of mtc. The block and grid sizes the launchers of this directory
// share (internal to runtime/cuda/ops). Every library kernel is correct for
// any geometry its banner allows; these rules only choose a fast one.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_GEOMETRY_H
#define MTC_RUNTIME_CUDA_OPS_GEOMETRY_H

#include "runtime/cuda/ops/Launch.h"

#include <algorithm>
#include <cstdint>

namespace mtc::cuda::ops::geometry {

/// Threads of a block that walks a row of \p n elements of \p type in 16-byte
/// packs (the norm, reduce and softmax row kernels): about two packs per
/// thread, a power of two in [64, 512]. On an H100 (docs/benchmarks.md) 512
/// threads suit f32 rows of 4096 (1024 packs) and 256 bf16 ones (512 packs);
/// rows of 32k and more want 512.
inline unsigned rowBlock(int64_t n, DType type) {
  const int64_t perPack = 16 / dtypeBytes(type);
  const int64_t half = ((n + perPack - 1) / perPack + 1) / 2;
  unsigned block = 64;
  while (block < 512 && block < half)
    block *= 2;
  return block;
}

/// Threads per block of the grid-stride loops (elementwise.cu).
constexpr unsigned kStrideBlock = 256;
/// At most this many blocks for a grid-stride loop: a few waves on any
/// current GPU (132 SMs x 16), after which each thread loops.
constexpr int64_t kMaxStrideBlocks = 2048;

/// Blocks of kStrideBlock threads for a grid-stride loop over \p n
/// elements of \p type, one 16-byte pack per thread.
inline unsigned strideBlocks(int64_t n, DType type) {
  const int64_t perPack = 16 / dtypeBytes(type);
  const int64_t threads = (n + perPack - 1) / perPack;
  return static_cast<unsigned>(std::min<int64_t>(
      (threads + kStrideBlock - 1) / kStrideBlock, kMaxStrideBlocks));
}

} // namespace mtc::cuda::ops::geometry

#endif // MTC_RUNTIME_CUDA_OPS_GEOMETRY_H
