//===- Pipelines.h - mtc pass pipelines -------------------------*- C++ -*-===//
//
// Part of mtc. Pipelines are library functions; tools only parse flags.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_PIPELINES_PIPELINES_H
#define MTC_COMPILER_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace mtc {

/// mt dialect (as MLIRGen produces it) -> what the bundle writer takes:
/// backward functions derived, cleaned up, elementwise chains fused.
void buildTrainingPipeline(mlir::OpPassManager &pm);

/// Registers the pipelines with the pass registry (for mtc-opt).
void registerMtcPipelines();

} // namespace mtc

#endif // MTC_COMPILER_PIPELINES_PIPELINES_H
