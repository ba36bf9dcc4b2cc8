//===- Embedding.h - Embedding lookup and its gradient ----------*- C++ -*-===//
//
// Part of mtc. The launchers of embedding.cu: cpu::embedding and
// cpu::embeddingGradAcc (runtime/cpu/Kernels.h) with device pointers.
//
// Out-of-range ids. The CPU returns false for an id outside [0, V); a kernel
// cannot tell the host without a synchronisation, and the data loader checks
// token ids only for files up to a size (runtime/train/Data.h), so ids are
// checked on the device: a bad id is never read, its row of y becomes zeros,
// and the smallest bad position is left in a device int32 (`badIndex`) that
// the caller reads at its next synchronisation (the executor: when it reads
// the step's loss) and turns into the CPU's error. The gradient skips bad
// ids, as the CPU does.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_EMBEDDING_H
#define MTC_RUNTIME_CUDA_OPS_EMBEDDING_H

#include "runtime/cuda/ops/Launch.h"

namespace mtc::cuda::ops {

/// What embedding() leaves in *badIndex when every id is in range (a value
/// above every position: the launcher sets it with a byte memset, 0x7f per
/// byte, so it needs no host-to-device copy).
constexpr int32_t kEmbeddingNoBadIndex = 0x7f7f7f7f;

/// y[n, D] = table[ids[n], :]; ids int32, table [V, D] and y of \p dtype.
/// \p badIndex: a device int32, set by the launch to kEmbeddingNoBadIndex and
/// then to the smallest position whose id is outside [0, V) (whose row of y
/// is zeros); read it after the stream's work has run. 0: not reported (the
/// caller has validated the ids on the host). Errors: sizes that do not fit
/// the kernel (n, V, D below 2^31; n < kEmbeddingNoBadIndex).
Status embedding(const Launch &L, DevPtr ids, DevPtr table, DevPtr y, int64_t n,
                 int64_t V, int64_t D, DevPtr badIndex,
                 DType dtype = DType::F32);

/// dtable[V, D] += the rows of dy[n, D] scattered by ids (ids outside [0, V)
/// skipped). Deterministic, bit-identical to the CPU in fp32: a radix sort
/// of the positions by id, then each dtable element adds its rows in
/// position order. \p dyType / \p tableType: f32/f32, bf16/bf16 or
/// bf16/f32 (bf16 gradients into an f32 table). Scratch: 4 * n + 256 *
/// ceil(n / 1024) int32 words from L.scratch.
Status embeddingGradAcc(const Launch &L, DevPtr ids, DevPtr dy, DevPtr dtable,
                        int64_t n, int64_t V, int64_t D,
                        DType dyType = DType::F32,
                        DType tableType = DType::F32);

/// The scratch bytes embeddingGradAcc takes for \p n positions.
int64_t embeddingGradScratchBytes(int64_t n);

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_EMBEDDING_H
