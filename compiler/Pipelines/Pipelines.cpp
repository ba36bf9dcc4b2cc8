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

void buildStreamingPipeline(mlir::OpPassManager &pm,
                            const StreamingPipelineOptions &options) {
  std::string budget =
      options.budget > 0 ? std::to_string(options.budget) : std::string();
  MtcBuildStepOptions build;
  build.batch = options.batch;
  build.seq = options.seq;
  build.microBatches = options.microBatches;
  pm.addPass(createMtcBuildStep(build));
  MtcInsertRecomputeOptions recompute;
  recompute.recompute = options.recompute;
  recompute.budget = budget;
  pm.addPass(createMtcInsertRecompute(recompute));
  MtcInsertPrefetchOptions prefetch;
  prefetch.depth = options.prefetchDepth;
  pm.addPass(createMtcInsertPrefetch(prefetch));
  pm.addPass(createMtcPlaceOptimizer());
  MtcInsertOffloadOptions offload;
  offload.checkpoints = options.checkpoints;
  offload.budget = budget;
  pm.addPass(createMtcInsertOffload(offload));
  MtcPlanMemoryOptions plan;
  plan.budget = budget;
  pm.addPass(createMtcPlanMemory(plan));
}

void registerMtcPipelines() {
  mlir::PassPipelineRegistration<>(
      "mtc-training-pipeline",
      "Derive backward functions, clean up and fuse elementwise chains: what "
      "`mtc compile -o x.mtb` runs",
      [](mlir::OpPassManager &pm) { buildTrainingPipeline(pm); });
}

} // namespace mtc
