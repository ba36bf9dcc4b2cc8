//===- Loss.h - Cross-entropy on the GPU ------------------------*- C++ -*-===//
//
// Part of mtc. The launchers of loss.cu for cpu::crossEntropy and
// cpu::crossEntropyGrad (runtime/cpu/Kernels.h) with device pointers. On the
// GPU the loss is the result of a kernel and the upstream dloss the result of
// another, so both stay in device memory: the loss is written as one float
// to `lossOut` (the CPU returns it as a double), the count of counted rows as
// one int32, and the gradient reads dloss from a device float. The mean is
// summed in double in a fixed order (cross_entropy_mean): deterministic.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_LOSS_H
#define MTC_RUNTIME_CUDA_OPS_LOSS_H

#include "runtime/cuda/ops/Launch.h"

namespace mtc::cuda::ops {

/// *lossOut (device float) = the mean cross-entropy of logits [n, V] (of
/// \p dtype) over the rows whose target (int32) != ignoreIndex, 0 when there
/// are none; a target outside [0, V) gives NaN, as the CPU. *count (device
/// int32; 0: not wanted) = the counted rows. Per-row losses (n floats) come
/// from L.scratch.
Status crossEntropy(const Launch &L, DevPtr logits, DevPtr targets, int64_t n,
                    int64_t V, int64_t ignoreIndex, DevPtr lossOut,
                    DevPtr count = 0, DType dtype = DType::F32);

/// dlogits [n, V] = dloss * (softmax(logits) - onehot(target)) / count, with
/// *dloss a device float and count the rows whose target != ignoreIndex;
/// ignored rows get zeros. dlogits may be logits (in place); otherwise
/// logits are copied to dlogits first. One int32 of L.scratch.
Status crossEntropyGrad(const Launch &L, DevPtr logits, DevPtr targets,
                        DevPtr dloss, DevPtr dlogits, int64_t n, int64_t V,
                        int64_t ignoreIndex, DType dtype = DType::F32);

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_LOSS_H
