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

namespace {

/// mtc-opt's spelling of StreamingPipelineOptions.
struct StreamingPipelineCLOptions
    : public mlir::PassPipelineOptions<StreamingPipelineCLOptions> {
  Option<int64_t> batch{*this, "batch",
                        llvm::cl::desc("sequences per micro-batch")};
  Option<int64_t> seq{*this, "seq", llvm::cl::desc("sequence length")};
  Option<int64_t> microBatches{*this, "micro-batches",
                               llvm::cl::desc("micro-batches per step"),
                               llvm::cl::init(1)};
  Option<int64_t> prefetchDepth{*this, "prefetch-depth",
                                llvm::cl::desc("weight slots"),
                                llvm::cl::init(2)};
  Option<std::string> recompute{*this, "recompute",
                                llvm::cl::desc("auto | full | none"),
                                llvm::cl::init("auto")};
  Option<std::string> checkpoints{*this, "checkpoints",
                                  llvm::cl::desc("auto | device | host"),
                                  llvm::cl::init("auto")};
  Option<std::string> budget{
      *this, "budget",
      llvm::cl::desc("device memory: bytes or a size such as 64MiB")};
};

} // namespace

void registerMtcPipelines() {
  mlir::PassPipelineRegistration<StreamingPipelineCLOptions>(
      "mtc-streaming-pipeline",
      "Plan a differentiated model's training step for a device budget: "
      "mtc-build-step, mtc-insert-recompute, mtc-insert-prefetch, "
      "mtc-place-optimizer, mtc-insert-offload, mtc-plan-memory",
      [](mlir::OpPassManager &pm, const StreamingPipelineCLOptions &cl) {
        // The passes parse the budget themselves (and report bad sizes).
        MtcBuildStepOptions build;
        build.batch = cl.batch;
        build.seq = cl.seq;
        build.microBatches = cl.microBatches;
        pm.addPass(createMtcBuildStep(build));
        MtcInsertRecomputeOptions recompute;
        recompute.recompute = cl.recompute;
        recompute.budget = cl.budget;
        pm.addPass(createMtcInsertRecompute(recompute));
        MtcInsertPrefetchOptions prefetch;
        prefetch.depth = cl.prefetchDepth;
        pm.addPass(createMtcInsertPrefetch(prefetch));
        pm.addPass(createMtcPlaceOptimizer());
        MtcInsertOffloadOptions offload;
        offload.checkpoints = cl.checkpoints;
        offload.budget = cl.budget;
        pm.addPass(createMtcInsertOffload(offload));
        MtcPlanMemoryOptions plan;
        plan.budget = cl.budget;
        pm.addPass(createMtcPlanMemory(plan));
      });
  mlir::PassPipelineRegistration<>(
      "mtc-training-pipeline",
      "Derive backward functions, clean up and fuse elementwise chains: what "
      "`mtc compile -o x.mtb` runs",
      [](mlir::OpPassManager &pm) { buildTrainingPipeline(pm); });
}

} // namespace mtc
