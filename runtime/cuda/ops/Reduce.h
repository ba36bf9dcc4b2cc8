//===- Reduce.h - Launchers of the reduce and softmax kernels ---*- C++ -*-===//
//
// Part of mtc. The host side of runtime/cuda/kernels/reduce.cu: reduce,
// reduceGrad, softmax and softmaxGrad over the middle axis of [outer, n,
// inner], one launcher per runtime/cpu function of the same name
// (runtime/cpu/Kernels.h), with `const Launch &` first, device pointers and
// the storage type last. inner == 1 takes the row form (a block per row),
// any other inner the strided form (a thread per column). None
// synchronises.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_REDUCE_H
#define MTC_RUNTIME_CUDA_OPS_REDUCE_H

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/ops/Launch.h"

#include <cstdint>

namespace mtc::cuda::ops {

/// y[outer, inner] = r over n of x[outer, n, inner] (cpu::reduce).
Status reduce(const Launch &L, cpu::Reduce r, DevPtr x, DevPtr y, int64_t outer,
              int64_t n, int64_t inner, DType type = DType::F32);
/// dx[outer, n, inner] (overwritten) from dy[outer, inner]
/// (cpu::reduceGrad; Max: to the first maximal element).
Status reduceGrad(const Launch &L, cpu::Reduce r, DevPtr x, DevPtr dy,
                  DevPtr dx, int64_t outer, int64_t n, int64_t inner,
                  DType type = DType::F32);
/// Softmax over n of x[outer, n, inner] (cpu::softmax).
Status softmax(const Launch &L, DevPtr x, DevPtr y, int64_t outer, int64_t n,
               int64_t inner, DType type = DType::F32);
/// dx = y * (dy - sum(dy * y)) over n (cpu::softmaxGrad).
Status softmaxGrad(const Launch &L, DevPtr y, DevPtr dy, DevPtr dx,
                   int64_t outer, int64_t n, int64_t inner,
                   DType type = DType::F32);

/// out[j] = (accumulate ? out[j] : 0) + the sum over c in order of
/// partial[c * n + j] (mtc_sum_partials_f32, f32): how the deterministic
/// gradients (reduceTo, the norms' dw / db) finish.
Status sumPartials(const Launch &L, DevPtr partial, DevPtr out, int64_t chunks,
                   int64_t n, bool accumulate);

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_REDUCE_H
