//===- Pipelines.h - mtc pass pipelines -------------------------*- C++ -*-===//
//
// Part of mtc. Pipelines are library functions; tools only parse flags.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_PIPELINES_PIPELINES_H
#define MTC_COMPILER_PIPELINES_PIPELINES_H

#include "compiler/Transforms/Policies.h"
#include "lib/Bundle/Plan.h"

#include "mlir/Pass/PassManager.h"

#include <string>

namespace mtc {

struct TrainingPipelineOptions {
  /// What mtc-autodiff makes layers keep for their backward (its `save`):
  /// full (save=input: recompute layers from their input), none (save=all:
  /// keep every intermediate the backward needs) or selective (keep the
  /// matmul, attention and moe results; recompute the rest). Not auto.
  RecomputePolicy recompute = RecomputePolicy::Full;
  /// Also give every layer a @backward_full that recomputes from the input
  /// (mtc-autodiff full-backward; mixed plans, `--selective-layers`).
  bool fullBackward = false;
  /// Fuse elementwise chains into mt.fused regions (mtc-fuse). Off for
  /// bundles the CUDA backend runs until it has its own fused kernels: each
  /// op then runs its library kernel, and every value is in the plan.
  bool fuse = true;
};

/// mt dialect (as MLIRGen produces it) -> what the bundle writer takes:
/// backward functions derived, cleaned up, elementwise chains fused.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options = {});

struct StreamingPipelineOptions {
  int64_t batch = 0, seq = 0; ///< one micro-batch, required
  int64_t microBatches = 1;
  int64_t prefetchDepth = 2;
  /// Segment checkpointing (mtc-insert-recompute checkpoint-every).
  int64_t checkpointEvery = 1;
  /// Mixed recomputation (mtc-insert-recompute selective-layers): only the
  /// first S layer instances keep selective checkpoints; -1: all.
  int64_t selectiveLayers = -1;
  /// Must match how the module was differentiated (mtc-insert-recompute);
  /// auto takes the module's.
  RecomputePolicy recompute = RecomputePolicy::Auto;
  CheckpointPlacement checkpoints = CheckpointPlacement::Auto;
  int64_t budget = 0; ///< device bytes; 0: none
  /// Host bytes for the state (16 B/param) and the host buffers; 0: none.
  int64_t hostBudget = 0;
  /// AdamW as soon as each layer instance's gradient is final (a
  /// `grads.host` ring, 12 B/param) instead of after the backward.
  bool immediateOptimizer = false;
  /// The deferred placement's host gradients: bf16 counts 14 B/param.
  bundle::GradDType gradDType = bundle::GradDType::F32;
  /// How tensors are stored on the device (docs/streaming.md, "Byte rule").
  bundle::Precision precision = bundle::Precision::F32;
};

/// A differentiated model (buildTrainingPipeline) -> the same module with a
/// planned stream.step (docs/streaming.md): mtc-build-step,
/// mtc-insert-recompute, mtc-insert-prefetch, mtc-place-optimizer,
/// mtc-insert-offload, mtc-plan-memory.
void buildStreamingPipeline(mlir::OpPassManager &pm,
                            const StreamingPipelineOptions &options);

/// Registers the pipelines with the pass registry (for mtc-opt).
void registerMtcPipelines();

} // namespace mtc

#endif // MTC_COMPILER_PIPELINES_PIPELINES_H
