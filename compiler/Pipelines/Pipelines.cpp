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
  autodiff.save = options.recompute;
  autodiff.fullBackward = options.fullBackward;
  pm.addPass(createMtcAutodiff(autodiff));
  pm.addPass(mlir::createCSEPass());
  if (options.fuse)
    pm.addPass(createMtcFuse());
}

namespace {

/// The streaming passes with their options; \p budget as the passes parse
/// it (bytes or a size such as 64MiB; empty: none).
void addStreamingPasses(mlir::OpPassManager &pm, int64_t batch, int64_t seq,
                        int64_t microBatches, int64_t prefetchDepth,
                        int64_t checkpointEvery, int64_t selectiveLayers,
                        RecomputePolicy recomputePolicy,
                        CheckpointPlacement checkpoints,
                        const std::string &budget, const std::string &precision,
                        const std::string &hostBudget,
                        const std::string &optimizerPlacement,
                        const std::string &gradDType) {
  MtcBuildStepOptions build;
  build.batch = batch;
  build.seq = seq;
  build.microBatches = microBatches;
  build.precision = precision;
  pm.addPass(createMtcBuildStep(build));
  MtcInsertRecomputeOptions recompute;
  recompute.recompute = recomputePolicy;
  recompute.budget = budget;
  recompute.checkpointEvery = checkpointEvery;
  recompute.selectiveLayers = selectiveLayers;
  pm.addPass(createMtcInsertRecompute(recompute));
  MtcInsertPrefetchOptions prefetch;
  prefetch.depth = prefetchDepth;
  pm.addPass(createMtcInsertPrefetch(prefetch));
  pm.addPass(createMtcPlaceOptimizer());
  MtcInsertOffloadOptions offload;
  offload.checkpoints = checkpoints;
  offload.budget = budget;
  pm.addPass(createMtcInsertOffload(offload));
  MtcPlanMemoryOptions plan;
  plan.budget = budget;
  plan.hostBudget = hostBudget;
  plan.optimizerPlacement = optimizerPlacement;
  plan.gradDType = gradDType;
  pm.addPass(createMtcPlanMemory(plan));
}

} // namespace

void buildStreamingPipeline(mlir::OpPassManager &pm,
                            const StreamingPipelineOptions &options) {
  addStreamingPasses(
      pm, options.batch, options.seq, options.microBatches,
      options.prefetchDepth, options.checkpointEvery, options.selectiveLayers,
      options.recompute, options.checkpoints,
      options.budget > 0 ? std::to_string(options.budget) : std::string(),
      bundle::precisionName(options.precision),
      options.hostBudget > 0 ? std::to_string(options.hostBudget)
                             : std::string(),
      options.immediateOptimizer ? "immediate" : "deferred",
      bundle::gradDTypeName(options.gradDType));
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
  Option<int64_t> checkpointEvery{
      *this, "checkpoint-every",
      llvm::cl::desc("segment checkpointing: keep every k-th layer input"),
      llvm::cl::init(1)};
  Option<int64_t> selectiveLayers{
      *this, "selective-layers",
      llvm::cl::desc("mixed recomputation: the first S layer instances keep "
                     "selective checkpoints, the rest their input; -1: all"),
      llvm::cl::init(-1)};
  Option<RecomputePolicy> recompute{
      *this, "recompute", llvm::cl::desc("what a layer keeps for its backward"),
      llvm::cl::init(RecomputePolicy::Auto), recomputeOptionValues()};
  Option<CheckpointPlacement> checkpoints{
      *this, "checkpoints", llvm::cl::desc("where layer checkpoints live"),
      llvm::cl::init(CheckpointPlacement::Auto), checkpointsOptionValues()};
  Option<std::string> budget{
      *this, "budget",
      llvm::cl::desc("device memory: bytes or a size such as 64MiB")};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("device storage of tensors: fp32 or bf16"),
      llvm::cl::init("fp32")};
  Option<std::string> optimizerPlacement{
      *this, "optimizer-placement",
      llvm::cl::desc("deferred (16 B/param) or immediate (12 B/param and a "
                     "grads.host ring)"),
      llvm::cl::init("deferred")};
  Option<std::string> hostBudget{
      *this, "host-budget",
      llvm::cl::desc("host memory: bytes or a size such as 2048GiB")};
  Option<std::string> gradDType{
      *this, "grad-dtype",
      llvm::cl::desc("the deferred optimizer's host gradients: fp32 "
                     "(16 B/param) or bf16 (14 B/param)"),
      llvm::cl::init("fp32")};
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
        addStreamingPasses(pm, cl.batch, cl.seq, cl.microBatches,
                           cl.prefetchDepth, cl.checkpointEvery,
                           cl.selectiveLayers, cl.recompute, cl.checkpoints,
                           cl.budget, cl.precision, cl.hostBudget,
                           cl.optimizerPlacement, cl.gradDType);
      });
  mlir::PassPipelineRegistration<>(
      "mtc-training-pipeline",
      "Derive backward functions, clean up and fuse elementwise chains: what "
      "`mtc compile -o x.mtb` runs",
      [](mlir::OpPassManager &pm) { buildTrainingPipeline(pm); });
}

} // namespace mtc
