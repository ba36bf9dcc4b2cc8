//===- Pipelines.cpp - mtc pass pipelines -----------------------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"

#include "compiler/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace mtc {

void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options) {
  pm.addPass(createMtcFuseLinearCrossEntropy());
  MtcAutodiffOptions autodiff;
  autodiff.save = options.save;
  pm.addPass(createMtcAutodiff(autodiff));
  pm.addPass(mlir::createCSEPass());
  pm.addPass(createMtcFuse());
}

void registerMtcPipelines() {
  mlir::PassPipelineRegistration<>(
      "mtc-training-pipeline",
      "Derive backward functions, clean up and fuse elementwise chains: what "
      "`mtc compile -o x.mtb` runs",
      [](mlir::OpPassManager &pm) { buildTrainingPipeline(pm); });
}

} // namespace mtc
