//===- MemoryModel.h - Bytes and FLOPs of a model's training step -*- C++
//-*-===//
//
// Part of mtc. A memory and cost model over the mt dialect at concrete
// dimensions (B = batch, S = seq; an expert's T = B * S): the bytes of every
// layer instance's parameters, of what it keeps for its backward, of the
// activations between layers, of the model-level stage and of the workspace
// each function allocates; the FLOPs of a layer's forward; and the device
// buffers of the step plan with their offsets (docs/streaming.md). The small
// shared rules (align64, tensor bytes, offset alignment) are lib/Bundle/Plan.h,
// which the runtime uses too.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_ANALYSIS_MEMORYMODEL_H
#define MTC_COMPILER_ANALYSIS_MEMORYMODEL_H

#include "dialects/mt/MtDialect.h"
#include "lib/Bundle/Bundle.h"
#include "lib/Bundle/Plan.h"

#include "llvm/ADT/DenseMap.h"

#include "llvm/Support/Error.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace mtc::analysis {

/// One micro-batch: [batch, seq] tokens, stored on the device in \p
/// precision.
struct Dims {
  int64_t batch = 1, seq = 1;
  bundle::Precision precision = bundle::Precision::F32;
  /// N, the tokens of a micro-batch: what an expert's T is bound to.
  int64_t tokens() const { return bundle::mulSize(batch, seq); }
};

/// The device storage type of each value of a function (arguments and the
/// results of the ops of its body).
using StorageMap = llvm::DenseMap<mlir::Value, DType>;

/// bundle::valueStorage's rule over the body of \p fn under \p precision:
/// the runtime derives the same types from the bundle.
StorageMap valueStorage(mlir::func::FuncOp fn, bundle::Precision precision);

/// align64(element bytes * numel) of a tensor type stored as \p storage at
/// \p dims (T = \p tokens).
int64_t valueBytes(mlir::Type type, DType storage, const Dims &dims,
                   int64_t tokens = 0);

/// What one op allocates when it runs (docs/streaming.md, "Byte rule"): its
/// results (views and ops without results: 0; each as \p storage says),
/// plus an attention's log-sum-exp, plus for `moe` the largest expert
/// forward's workspace at T = N and for `moe_grad` the largest expert
/// forward + backward.
int64_t opWorkspaceBytes(mlir::Operation *op, const StorageMap &storage,
                         const Dims &dims, int64_t tokens = 0);

/// The sum of opWorkspaceBytes over the ops of \p fn.
/// The workspace a layer function needs when its values are placed by
/// liveness (bundle::planLayerFunction: packed values + the largest op's
/// scratch).
int64_t plannedWorkspaceBytes(mlir::func::FuncOp fn, const Dims &dims);

int64_t workspaceBytes(mlir::func::FuncOp fn, const Dims &dims,
                       int64_t tokens = 0);

/// Floating-point operations of one call of \p fn (matmuls 2 M N K,
/// attention 4 B Hq S^2 D, halved when causal, elementwise ops one per
/// element, moe: router plus the experts on N * top_k tokens).
int64_t flops(mlir::func::FuncOp fn, const Dims &dims, int64_t tokens = 0);

/// The costs of one layer kind (per instance, per micro-batch).
struct LayerCost {
  std::string name;
  int64_t count = 0;
  int64_t params = 0;          ///< elements, all experts included
  int64_t weightBytes = 0;     ///< their bytes on the device (precision)
  int64_t gradBytes = 0;       ///< their gradients' bytes (always f32)
  int64_t boundaryBytes = 0;   ///< align64 of the activation in and out
  int64_t checkpointBytes = 0; ///< input + the forward's extra results
  int64_t workspaceBytes = 0;  ///< max(forward, backward)
  int64_t forwardFlops = 0;
  /// The forward returns intermediates for its backward (mtc-autodiff
  /// save=all or save=selective).
  bool keepsIntermediates = false;
  /// The backward recomputes forward values from the input (save=input).
  bool recomputes = false;
  /// What mtc-autodiff kept ("input", "all", "selective"; the backward's
  /// mt.save), or empty when the backward does not say.
  std::string save;
  /// FLOPs the backward spends recomputing forward values: the whole
  /// forward when it recomputes from the input alone; with save=selective
  /// the forward's ops other than matmul, attention and moe (an upper
  /// bound: some of them are not needed); 0 when everything is kept.
  int64_t recomputeFlops = 0;
  /// The layer also has @backward_full (mtc-autodiff full-backward): an
  /// instance may keep only its input (boundaryBytes) and recompute the
  /// whole forward (forwardFlops) in a mixed plan.
  bool hasFullBackward = false;
};

struct ModelCost {
  std::string name;
  int64_t modelParams = 0;      ///< elements of the model-level params
  int64_t modelWeightBytes = 0; ///< their bytes on the device (precision)
  int64_t modelGradBytes = 0;   ///< their gradients' bytes (always f32)
  int64_t tokens = 0;           ///< of one micro-batch (Dims::tokens)
  std::vector<LayerCost> layers;
  int64_t stageBytes = 0; ///< per micro-batch
  /// The host stage (bundle::planStage): the device slot one micro-batch's
  /// stage runs in, and the bytes of its values waiting in host memory.
  int64_t stageSlotBytes = 0, stageHostBytes = 0;
  int64_t forwardBackwardOps = 0; ///< ops of @forward_backward (no return)
  /// Every apply_layers (forward) and apply_layers_grad op of
  /// @forward_backward in order: layer, first, count, op index, forward?
  struct LayersOp {
    std::string layer;
    int64_t first = 0, count = 0, opIndex = 0;
    bool forward = true;
  };
  std::vector<LayersOp> layersOps;

  const LayerCost *layer(llvm::StringRef name) const;
  int64_t totalParams() const;
  int64_t totalInstances() const;
};

/// The costs of \p model (after mtc-autodiff). An error when the model has
/// no @forward_backward or a layer lacks @backward, or when a size is too
/// large for a plan (docs/streaming.md, "Limits"): more parameters than
/// bundle::kMaxPlanBytes / 16 (their training state), a layer's weights,
/// checkpoint, workspace or the stage beyond bundle::kMaxPlanBytes, a
/// layer's FLOPs beyond bundle::kSizeCap at \p dims; the message names the
/// layer, --batch and --seq and the limit.
llvm::Expected<ModelCost> analyzeModel(mt::ModelOp model, const Dims &dims);

/// The choices a memory plan depends on besides the model.
struct PlanChoices {
  int64_t microBatches = 1;
  int64_t prefetchDepth = 2;
  bool checkpointsOnHost = false;
  /// AdamW runs as soon as each layer instance's gradient is final: the
  /// gradients pass through a host ring (`grads.host`, kGradRingSlots slots
  /// of the largest gradient group) instead of a model-sized buffer.
  bool immediateOptimizer = false;
  /// Segment checkpointing (docs/streaming.md): only every k-th instance of
  /// a forward loop keeps its checkpoint, a device `segment` buffer holds k
  /// boundary activations per micro-batch for the recomputed segment, and
  /// the device has at least k weight slots. 1: every instance keeps one.
  int64_t checkpointEvery = 1;
  /// Mixed recomputation (docs/streaming.md, "Mixed recomputation"): only
  /// the first S instances of the layer stack (over forwardLoops in order)
  /// keep their layer's checkpoint; the others keep their input alone and
  /// recompute their forward. -1: every instance keeps its checkpoint.
  int64_t selectiveLayers = -1;
  /// The forward layer loops of the step: (layer, instance count).
  std::vector<std::pair<std::string, int64_t>> forwardLoops;
};

struct MemoryPlan {
  /// In arena order: model.weights, model.grads, weights.0 .., grads.0,
  /// grads.1, activations (activations.host), checkpoints
  /// (checkpoints.host), stage (stage.host), workspace.
  std::vector<bundle::PlanBuffer> buffers;
  int64_t devicePeak = 0; ///< end of the last device buffer
  int64_t hostBytes = 0;  ///< bytes of host-space buffers
  /// The largest layer instance's weights and its layer.
  int64_t largestLayerWeights = 0;
  std::string largestLayer;
};

/// What the cost model assumes of the device a plan runs on. The defaults
/// are the CPU device on a 2-core AVX-512 machine (docs/streaming.md,
/// "Choosing what to recompute"): fused and GEMM kernels at about 150
/// GFLOP/s, and host-device copies, which there are memcpy on a core the
/// kernels would otherwise use, at about 10 GB/s.
struct DeviceRates {
  double flopsPerSecond = 150e9;
  double copyBytesPerSecond = 10e9;
};

/// Seconds one step spends on what the recompute policy costs: recomputing
/// forward values in the backward (every forward loop instance's
/// recomputeFlops, per micro-batch) plus, with checkpoints in host memory,
/// copying each instance's checkpoint out and back. Compares policies of one
/// model; it is not a step time.
double recomputeCostSeconds(const ModelCost &cost, const PlanChoices &choices,
                            const DeviceRates &rates = {});

/// How many of the \p count instances of a forward loop that starts at
/// instance \p before of the layer stack keep their layer's full checkpoint
/// under \p choices (the rest keep their input alone).
inline int64_t keptCheckpoints(const PlanChoices &choices, int64_t before,
                               int64_t count) {
  if (choices.selectiveLayers < 0)
    return count;
  return std::max<int64_t>(0,
                           std::min(count, choices.selectiveLayers - before));
}

/// Segments of at most \p k instances in a loop of \p count: the
/// checkpoints one micro-batch of the loop keeps (ceil(count / k)).
inline int64_t segmentCount(int64_t count, int64_t k) {
  return k <= 1 ? count : (count + k - 1) / k;
}
/// Forward passes of one layer instance that segment checkpointing adds per
/// micro-batch, over a loop of \p count: each segment of s instances
/// recomputes the forward of its first s - 1 (count - ceil(count / k)).
inline int64_t segmentExtraForwards(int64_t count, int64_t k) {
  return count - segmentCount(count, k);
}
/// The buffers, sizes and offsets of a step (docs/streaming.md, "Device
/// buffers"). Loops must name layers of \p cost.
MemoryPlan planMemory(const ModelCost &cost, const PlanChoices &choices);

/// An error when a buffer of \p plan, its device peak or its host total is
/// more than bundle::kMaxPlanBytes: the step's sizes at \p dims and \p
/// choices' micro-batches are too large for a plan. The message names
/// --batch, --seq and --micro-batches, their values and the limit.
llvm::Error checkPlanSizes(const MemoryPlan &plan, const Dims &dims,
                           const PlanChoices &choices);

/// The choices of \p cost's own @forward_backward structure.
std::vector<std::pair<std::string, int64_t>>
forwardLoops(const ModelCost &cost);

/// Parses a byte size: a bare number is bytes; suffixes KiB, MiB, GiB, TiB
/// (powers of 1024; also K/KB, M/MB, G/GB, T/TB, case-insensitive, as
/// powers of 1024) after an integer or decimal number ("64MiB", "1.5GiB",
/// "512KiB", "1048576"). Fractional results are rounded down to a byte.
/// Anything else, negative sizes and sizes beyond 2^62 bytes are errors that
/// quote \p text and show the accepted forms.
llvm::Expected<int64_t> parseByteSize(llvm::StringRef text);

/// A byte count for people: "412 MiB", "301.5 MiB", "2 GiB", "640 KiB",
/// "100 B". The unit is the largest of GiB, MiB, KiB that the value reaches
/// (bytes below 1 KiB); one decimal unless the value is a whole number of
/// that unit. \p roundUp rounds the decimal up (for sizes that must be
/// enough), else to the nearest.
std::string formatByteSize(int64_t bytes, bool roundUp = false);

} // namespace mtc::analysis

#endif // MTC_COMPILER_ANALYSIS_MEMORYMODEL_H
