//===- Elementwise.h - Launchers of the elementwise kernels -----*- C++ -*-===//
//
// Part of mtc. The host side of runtime/cuda/kernels/elementwise.cu and of
// reduce.cu's mtc_reduce_to_f32: one launcher per runtime/cpu function of
// the same name (runtime/cpu/Kernels.h), same arguments in the same order,
// with `const Launch &` first, device pointers for host pointers and the
// storage type last. Each computes the launch geometry and the shape
// descriptor (runtime/cuda/kernels/shapes.cuh), queues the kernel on
// L.stream and returns; none synchronises.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_ELEMENTWISE_H
#define MTC_RUNTIME_CUDA_OPS_ELEMENTWISE_H

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/kernels/shapes.cuh"
#include "runtime/cuda/ops/Launch.h"

#include <cstdint>
#include <vector>

namespace mtc::cuda::ops {

/// y = f(x), n elements (cpu::unary); x, y of storage type \p type; y may
/// be x.
Status unary(const Launch &L, cpu::Unary f, DevPtr x, DevPtr y, int64_t n,
             float param = 0, DType type = DType::F32);
/// dx = dy * f'(x) (cpu::unaryGrad); dx may be dy.
Status unaryGrad(const Launch &L, cpu::Unary f, DevPtr x, DevPtr dy, DevPtr dx,
                 int64_t n, float param = 0, DType type = DType::F32);

/// out = a op b with broadcasting (cpu::binary): aShape / bShape are
/// right-aligned against outShape; missing leading dims and dims of 1
/// broadcast. out may be a or b. Errors: an operand that does not broadcast
/// to outShape, more than 8 dimensions left after merging.
Status binary(const Launch &L, cpu::Binary op, DevPtr a,
              const std::vector<int64_t> &aShape, DevPtr b,
              const std::vector<int64_t> &bShape, DevPtr out,
              const std::vector<int64_t> &outShape, DType type = DType::F32);

/// y = x (shape \p from) summed down to \p to (right-aligned; cpu::reduceTo),
/// f32 only. Deterministic: the order of every sum depends on the shapes
/// alone. May take scratch for per-chunk partials.
/// y = x converted from \p from to \p to storage, \p n elements (the same
/// type: a copy).
Status convert(const Launch &L, DevPtr x, DType from, DevPtr y, DType to,
               int64_t n);

Status reduceTo(const Launch &L, DevPtr x, const std::vector<int64_t> &from,
                DevPtr y, const std::vector<int64_t> &to);

/// The BroadcastShape binary() passes to mtc_binary_*: size-1 output dims
/// dropped and adjacent dims with the same broadcast pattern merged, as
/// runtime/cpu's collapse. \p what names the op in errors.
Expected<mtc_cuda::BroadcastShape>
broadcastShape(const std::vector<int64_t> &outShape,
               const std::vector<int64_t> &aShape,
               const std::vector<int64_t> &bShape, const char *what = "binary");

/// The ReduceToShape of summing \p from down to \p to (right-aligned), dims
/// merged as broadcastShape's.
Expected<mtc_cuda::ReduceToShape>
reduceToShape(const std::vector<int64_t> &from, const std::vector<int64_t> &to);

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_ELEMENTWISE_H
