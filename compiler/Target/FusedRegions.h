//===- FusedRegions.h - The distinct mt.fused regions of a module -*- C++ -*-=//
//
// Part of mtc. What every code generator for mt.fused regions shares (the CPU
// target, CpuKernels.h, and the CUDA target, CudaKernels.h): how a kernel
// reads each input, the static row length a region with reductions or
// per-row inputs needs, and the *key* of a region (its ops, attributes and
// input access): structurally identical regions share one kernel, named
// mtc_fused_N in walk order of the distinct keys. Both targets name the
// regions through nameFusedRegions, so a `fused` op's `kernel` attribute
// names the same region in the CPU shared object and in the CUDA sources.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_TARGET_FUSEDREGIONS_H
#define MTC_COMPILER_TARGET_FUSEDREGIONS_H

#include "dialects/mt/MtDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace mtc {

using FusedAccess = mt::FusedOp::InputAccess;

/// How a kernel reads one input.
struct FusedInputPlan {
  FusedAccess access = FusedAccess::Full;
  int64_t modulus = 0; ///< Suffix: the input's number of elements
};

/// The access of every input of \p fused.
llvm::SmallVector<FusedInputPlan> planFusedInputs(mt::FusedOp fused);

/// The static length of the iteration shape's last axis when a kernel needs
/// it (reductions, Row inputs); 0 when it does not; an error naming the op's
/// location when it is symbolic.
llvm::Expected<int64_t> fusedRowLength(mt::FusedOp fused,
                                       llvm::ArrayRef<FusedInputPlan> plan);

/// Identical keys compile to identical code (on every target).
std::string fusedRegionKey(mt::FusedOp fused,
                           llvm::ArrayRef<FusedInputPlan> plan);

/// One distinct region: its kernel name and the first op that has it.
struct FusedRegion {
  std::string name; ///< "mtc_fused_N"
  mt::FusedOp op;
  llvm::SmallVector<FusedInputPlan> plan;
};

/// Sets the `kernel` attribute of every mt.fused op of \p module
/// ("mtc_fused_N", N from 0 in walk order of the distinct keys) and returns
/// the distinct regions in that order. Naming the same module twice gives
/// the same names.
std::vector<FusedRegion> nameFusedRegions(mlir::ModuleOp module);

} // namespace mtc

#endif // MTC_COMPILER_TARGET_FUSEDREGIONS_H
