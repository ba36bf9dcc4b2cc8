//===- Pipelines.h - mtc pass pipelines -------------------------*- C++ -*-===//
//
// Part of mtc. Pipelines are library functions; tools only parse flags.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_PIPELINES_PIPELINES_H
#define MTC_COMPILER_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

#include <string>

namespace mtc {

struct TrainingPipelineOptions {
  /// mtc-autodiff's `save`: "input" (recompute layers from their input) or
  /// "all" (keep every intermediate the backward needs).
  std::string save = "input";
};

/// mt dialect (as MLIRGen produces it) -> what the bundle writer takes:
/// backward functions derived, cleaned up, elementwise chains fused.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options = {});

/// Registers the pipelines with the pass registry (for mtc-opt).
void registerMtcPipelines();

} // namespace mtc

#endif // MTC_COMPILER_PIPELINES_PIPELINES_H
