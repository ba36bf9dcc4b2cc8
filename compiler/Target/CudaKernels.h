//===- CudaKernels.h - CUDA C for mt.fused regions --------------*- C++ -*-===//
//
// Part of mtc. Emits one CUDA C kernel per distinct mt.fused region of a
// module (the regions and names of FusedRegions.h, shared with the CPU
// target), in one source that includes runtime/cuda/kernels/fused.cuh.
// Each region becomes a __device__ template over the storage types of its
// inputs and outputs, instantiated by one `extern "C" __global__` entry per
// storage signature the bundle's plan needs (`mtc_fused_3_fb_f`: inputs f32
// and bf16, output f32; bundle::fusedSignature):
//
//   void mtc_fused_N_SIG(const I0 *in0, ..., O0 *out0, ..., long long n);
//
// n is the number of elements of the iteration shape [R..., m], as for the
// CPU kernels (docs/compiler.md). Input k is read at element i (full), 0
// (scalar), i mod numel(input) (suffix) or i / m (row); element results are
// written at i, row results at i / m. Regions without reductions are
// "elements" kernels: a grid-stride loop, 256 threads, V elements per
// thread-step (16 bytes of the narrowest element-indexed storage type) with
// 16-byte loads and stores where the pointers are aligned and a scalar
// tail. Regions with reductions over the last axis are "rows" kernels: a row
// per warp (8 rows per block of 256) when m <= 1024, else a row per block
// (a power of two from 64 to 1024 threads, about 8 elements each); the
// element ops run once per element, the sums and maxima combine with warp
// shuffles (and shared memory across warps), and the ops after them run once
// per row. Arithmetic is fp32 with the CPU runtime's formulas.
// docs/cuda-kernels.md, "Fused regions as CUDA C".
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_TARGET_CUDAKERNELS_H
#define MTC_COMPILER_TARGET_CUDAKERNELS_H

#include "lib/Bundle/Bundle.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <map>
#include <set>
#include <string>

namespace mtc {

/// Storage signatures to instantiate, per kernel name ("mtc_fused_3" ->
/// {"ff_f", "bb_b"}). A kernel missing from the map gets its all-f32 entry.
using CudaSignatures = std::map<std::string, std::set<std::string>>;

/// Names every mt.fused op of \p module (as the CPU target does) and emits
/// the CUDA C of the distinct regions, one entry per signature of
/// \p signatures, with each entry's launch rule. An empty source when the
/// module has no mt.fused. Errors name the op's location (a symbolic last
/// axis under a reduction, an op the generator does not know, a signature
/// that does not fit the region).
llvm::Expected<bundle::CudaKernels>
emitCudaKernels(mlir::ModuleOp module, const CudaSignatures &signatures = {});

/// The signatures the `fused` ops of \p b need under its plan's precision.
CudaSignatures fusedSignatures(const bundle::Bundle &b);

} // namespace mtc

#endif // MTC_COMPILER_TARGET_CUDAKERNELS_H
