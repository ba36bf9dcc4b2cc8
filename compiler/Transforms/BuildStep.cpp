//===- BuildStep.cpp - mtc-build-step ---------------------------*- C++ -*-===//
//
// Part of mtc. Cuts @forward_backward at its layer ops into the stream.step
// program (docs/streaming.md).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/StepUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

namespace mtc {
#define GEN_PASS_DEF_MTCBUILDSTEP
#include "compiler/Transforms/Passes.h.inc"
} // namespace mtc

using namespace mlir;
using namespace mtc;

namespace {

/// Moves each model-level parameter's `mt.param_grad` right after the op
/// that computes its gradient, so that the gradient is accumulated in the
/// stage that computes it and never waits across a layer loop (in host
/// memory with a host stage: docs/streaming.md, "Host stage"). A parameter
/// with several param_grads (tied weights) keeps them where they are, in
/// their order, so that its sums are the same; the others are accumulated
/// into their own gradient buffers, micro-batch by micro-batch as before:
/// the results are bit-identical.
void hoistParamGrads(func::FuncOp fb) {
  Block &body = fb.getBody().front();
  llvm::StringMap<int> count;
  for (auto g : body.getOps<mt::ParamGradOp>())
    ++count[g.getName()];
  for (auto g : llvm::make_early_inc_range(body.getOps<mt::ParamGradOp>()))
    if (count[g.getName()] == 1)
      if (Operation *def = g.getGrad().getDefiningOp())
        g->moveAfter(def);
}

struct BuildStep : mtc::impl::MtcBuildStepBase<BuildStep> {
  using MtcBuildStepBase::MtcBuildStepBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto models = module.getBody()->getOps<mt::ModelOp>();
    if (models.empty() || std::next(models.begin()) != models.end()) {
      module.emitError() << "mtc-build-step: expected exactly one mt.model";
      return signalPassFailure();
    }
    mt::ModelOp model = *models.begin();
    if (batch < 1 || seq < 1 || microBatches < 1) {
      module.emitError() << "mtc-build-step: batch, seq and micro-batches "
                            "must be >= 1 (got batch="
                         << (int64_t)batch << ", seq=" << (int64_t)seq
                         << ", micro-batches=" << (int64_t)microBatches << ")";
      return signalPassFailure();
    }
    if (precision != "fp32" && precision != "bf16") {
      module.emitError() << "mtc-build-step: precision must be fp32 or bf16, "
                            "got '"
                         << precision << "'";
      return signalPassFailure();
    }
    if (!module.getBody()->getOps<stream::StepOp>().empty()) {
      module.emitError() << "mtc-build-step: the module already has a "
                            "stream.step";
      return signalPassFailure();
    }
    auto fb = dyn_cast_or_null<func::FuncOp>(
        SymbolTable::lookupSymbolIn(model, "forward_backward"));
    if (!fb) {
      model.emitError() << "model @" << model.getSymName()
                        << " has no forward_backward function (run "
                           "mtc-autodiff first)";
      return signalPassFailure();
    }
    // Every layer needs its backward.
    bool keepsAll = false, selective = false;
    for (auto layer : model.getBody().front().getOps<mt::LayerOp>()) {
      Operation *bwd = SymbolTable::lookupSymbolIn(layer, "backward");
      if (auto save =
              bwd ? bwd->getAttrOfType<StringAttr>("mt.save") : StringAttr())
        selective |=
            policyOfSaveName(save.getValue()) == RecomputePolicy::Selective;
      if (!bwd) {
        layer.emitError() << "layer @" << layer.getSymName()
                          << " has no backward function (run mtc-autodiff "
                             "first)";
        return signalPassFailure();
      }
      if (func::FuncOp fwd = layer.getForward())
        keepsAll |= fwd.getNumResults() > 1;
    }

    hoistParamGrads(fb);

    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    Location loc = NameLoc::get(StringAttr::get(ctx, "stream.step"));
    auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
    RecomputePolicy policy = selective  ? RecomputePolicy::Selective
                             : keepsAll ? RecomputePolicy::None
                                        : RecomputePolicy::Full;
    auto step = stream::StepOp::create(
        b, loc, FlatSymbolRefAttr::get(model.getSymNameAttr()), i64(batch),
        i64(seq), i64(microBatches), /*prefetch_depth=*/i64(1),
        stream::RecomputePolicyAttr::get(ctx, policy),
        stream::CheckpointPlacementAttr::get(ctx, CheckpointPlacement::Device),
        /*checkpoints_auto=*/UnitAttr(),
        /*device_budget=*/i64(0), /*device_peak=*/i64(0),
        precision == "fp32" ? StringAttr() : b.getStringAttr(precision),
        /*checkpoint_every=*/IntegerAttr(), /*selective_layers=*/IntegerAttr());
    Block *body = new Block();
    step.getBody().push_back(body);
    b.setInsertionPointToEnd(body);
    stream::LoadModelWeightsOp::create(b, loc);
    int64_t index = 0, stageBegin = 0;
    auto flushStage = [&](int64_t end) {
      if (end > stageBegin)
        stream::StageOp::create(b, loc, stageBegin, end);
      stageBegin = end + 1;
    };
    for (Operation &op : fb.getBody().front()) {
      if (isa<func::ReturnOp>(op))
        continue;
      StringRef layer;
      int64_t first = 0, count = 0;
      bool forward = true;
      if (auto a = dyn_cast<mt::ApplyLayersOp>(op)) {
        layer = a.getLayer();
        first = a.getFirst();
        count = a.getCount();
      } else if (auto g = dyn_cast<mt::ApplyLayersGradOp>(op)) {
        layer = g.getLayer();
        first = g.getFirst();
        count = g.getCount();
        forward = false;
      } else {
        ++index;
        continue;
      }
      flushStage(index);
      auto loop = stream::LayersOp::create(
          b, loc, FlatSymbolRefAttr::get(ctx, layer), i64(first), i64(count),
          stream::DirectionAttr::get(ctx, forward
                                              ? stream::Direction::Forward
                                              : stream::Direction::Backward),
          i64(index),
          /*checkpoint_bytes=*/IntegerAttr());
      Block *lb = new Block();
      loop.getBody().push_back(lb);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToEnd(lb);
      if (forward) {
        stream::SaveOp::create(b, loc, stream::MemorySpace::Device);
        stream::ComputeOp::create(b, loc, stream::Direction::Forward);
      } else {
        stream::RestoreOp::create(b, loc, stream::MemorySpace::Device);
        stream::ComputeOp::create(b, loc, stream::Direction::Backward);
        stream::GradReturnOp::create(b, loc, stream::StreamName::D2H);
      }
      ++index;
    }
    flushStage(index);
    stream::ReturnModelGradsOp::create(b, loc);
    if (failed(mlir::verify(step)))
      return signalPassFailure();
  }
};

} // namespace
