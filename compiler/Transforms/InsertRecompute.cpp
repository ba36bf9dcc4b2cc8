//===- InsertRecompute.cpp - mtc-insert-recompute ---------------*- C++ -*-===//
//
// Part of mtc. The recompute policy of the step and the checkpoint bytes of
// every layer loop; checks that the layer functions implement that policy.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/StepUtils.h"

namespace mtc {
#define GEN_PASS_DEF_MTCINSERTRECOMPUTE
#include "compiler/Transforms/Passes.h.inc"
} // namespace mtc

using namespace mlir;
using namespace mtc;

namespace {

struct InsertRecompute : mtc::impl::MtcInsertRecomputeBase<InsertRecompute> {
  using MtcInsertRecomputeBase::MtcInsertRecomputeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    stream::StepOp step = steputil::findStep(module, "mtc-insert-recompute");
    int64_t budgetBytes = 0;
    if (!step || failed(steputil::parseBudget(module, budget, budgetBytes)))
      return signalPassFailure();
    analysis::ModelCost cost;
    if (failed(steputil::analyzeStep(step, cost)))
      return signalPassFailure();
    // How the module was compiled: save=all keeps intermediates (none),
    // save=input recomputes them (full), save=selective keeps the results of
    // the expensive ops and recomputes the rest; a layer with nothing to keep
    // is any of them. Layers without mt.save are inferred from their shape.
    std::optional<RecomputePolicy> compiled;
    std::string compiledLayer, recomputing;
    bool anySelective = false;
    for (const analysis::LayerCost &l : cost.layers) {
      bool selective = policyOfSaveName(l.save) == RecomputePolicy::Selective;
      anySelective |= selective;
      if (l.keepsIntermediates && !compiled) {
        compiled =
            selective ? RecomputePolicy::Selective : RecomputePolicy::None;
        compiledLayer = l.name;
      }
      if (l.recomputes && recomputing.empty())
        recomputing = l.name;
    }
    RecomputePolicy policy = recompute;
    if (policy == RecomputePolicy::Auto)
      policy = compiled.value_or(RecomputePolicy::Full);
    StringRef asked = stream::stringifyRecomputePolicy(policy);
    if (policy == RecomputePolicy::Full && compiled) {
      step.emitOpError() << "recompute=" << asked
                         << ", but the forward of layer @" << compiledLayer
                         << " keeps intermediates for its backward: the "
                            "module was differentiated with "
                         << describeDifferentiation(*compiled);
      return signalPassFailure();
    }
    if (policy == RecomputePolicy::None &&
        compiled == RecomputePolicy::Selective) {
      step.emitOpError() << "recompute=" << asked << ", but layer @"
                         << compiledLayer
                         << " keeps only some intermediates: the module was "
                            "differentiated with "
                         << describeDifferentiation(*compiled);
      return signalPassFailure();
    }
    if (policy == RecomputePolicy::None && !recomputing.empty()) {
      step.emitOpError() << "recompute=" << asked
                         << ", but the backward of layer @" << recomputing
                         << " recomputes its forward: the module was "
                            "differentiated with "
                         << describeDifferentiation(RecomputePolicy::Full);
      return signalPassFailure();
    }
    if (policy == RecomputePolicy::Selective &&
        compiled != RecomputePolicy::Selective &&
        !(!compiled && anySelective)) {
      step.emitOpError() << "recompute=" << asked
                         << ", but the module was differentiated with "
                         << describeDifferentiation(
                                compiled.value_or(RecomputePolicy::Full))
                         << "; differentiate with mtc-autodiff save="
                         << saveName(RecomputePolicy::Selective);
      return signalPassFailure();
    }
    step.setRecompute(policy);
    if (failed(setCheckpointEvery(step, policy)) ||
        failed(setSelectiveLayers(step, policy, cost)))
      return signalPassFailure();
    Builder b(&getContext());
    int64_t deviceCkpt = 0;
    for (auto loop : step.getBody().front().getOps<stream::LayersOp>()) {
      const analysis::LayerCost *l = cost.layer(loop.getLayer());
      if (!l)
        continue;
      loop.setCheckpointBytesAttr(b.getI64IntegerAttr(l->checkpointBytes));
      if (loop.isForward())
        deviceCkpt += analysis::segmentCount(loop.getCount(), checkpointEvery) *
                      step.getMicroBatches() * l->checkpointBytes;
    }
    if (recompute == RecomputePolicy::Auto && policy == RecomputePolicy::None &&
        budgetBytes > 0 && deviceCkpt > budgetBytes) {
      step.emitOpError() << "keeping every intermediate needs "
                         << analysis::formatByteSize(deviceCkpt, true)
                         << " of checkpoints, more than the budget of "
                         << analysis::formatByteSize(budgetBytes)
                         << "; differentiate with "
                         << describeDifferentiation(RecomputePolicy::Full);
      return signalPassFailure();
    }
  }

  /// Mixed recomputation: `selective_layers` on the step when 0 <= S is
  /// below the stack's instances; errors for a policy other than selective,
  /// S past the stack, and a layer without @backward_full.
  LogicalResult setSelectiveLayers(stream::StepOp step, RecomputePolicy policy,
                                   const analysis::ModelCost &cost) {
    const int64_t s = selectiveLayers;
    step.removeSelectiveLayersAttr();
    if (s < 0)
      return success();
    if (policy != RecomputePolicy::Selective)
      return step.emitOpError()
             << "selective-layers=" << s
             << " needs recompute=selective (the first instances keep "
                "selective checkpoints, the rest only their input), got "
                "recompute="
             << stream::stringifyRecomputePolicy(policy);
    int64_t total = 0;
    for (const auto &[name, count] : steputil::choicesOf(step).forwardLoops)
      total += count;
    if (s > total)
      return step.emitOpError() << "selective-layers=" << s << " exceeds the "
                                << total << " layer instances of the step";
    if (s == total)
      return success(); // every instance is selective
    for (const analysis::LayerCost &l : cost.layers)
      if (!l.hasFullBackward)
        return step.emitOpError()
               << "selective-layers=" << s << ", but layer @" << l.name
               << " has no @backward_full for the instances that keep only "
                  "their input; differentiate with mtc-autodiff "
                  "save=selective full-backward=true";
    step.setSelectiveLayersAttr(
        Builder(step.getContext()).getI64IntegerAttr(s));
    return success();
  }

  /// Segment checkpointing: `checkpoint_every` on the step when k > 1;
  /// errors for k < 1, k longer than every layer loop, k > 1 without full
  /// recomputation.
  LogicalResult setCheckpointEvery(stream::StepOp step,
                                   RecomputePolicy policy) {
    const int64_t k = checkpointEvery;
    if (k < 1)
      return step.emitOpError()
             << "checkpoint-every must be >= 1 (1: every layer instance "
                "keeps its input), got "
             << k;
    if (k == 1) {
      step.removeCheckpointEveryAttr();
      return success();
    }
    if (policy != RecomputePolicy::Full)
      return step.emitOpError()
             << "checkpoint-every=" << k
             << " needs recompute=full (a segment's backward recomputes whole "
                "layers), got recompute="
             << stream::stringifyRecomputePolicy(policy);
    int64_t longest = 0;
    std::string longestLayer;
    for (auto loop : step.getBody().front().getOps<stream::LayersOp>())
      if (loop.isForward() && (int64_t)loop.getCount() > longest) {
        longest = loop.getCount();
        longestLayer = loop.getLayer().str();
      }
    if (k > longest)
      return step.emitOpError()
             << "checkpoint-every=" << k << " exceeds the " << longest
             << " instances of the longest layer loop (@" << longestLayer
             << "): a segment is at most one loop";
    step.setCheckpointEveryAttr(
        Builder(step.getContext()).getI64IntegerAttr(k));
    return success();
  }
};

} // namespace
