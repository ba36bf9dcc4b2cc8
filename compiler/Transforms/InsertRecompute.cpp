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
    if (recompute != "auto" && recompute != "full" && recompute != "none" &&
        recompute != "selective") {
      module.emitError() << "mtc-insert-recompute: recompute must be auto, "
                            "full, none or selective, got '"
                         << recompute << "'";
      return signalPassFailure();
    }
    analysis::ModelCost cost;
    if (failed(steputil::analyzeStep(step, cost)))
      return signalPassFailure();
    // How the module was compiled: save=all keeps intermediates (none),
    // save=input recomputes them (full), save=selective keeps the results of
    // the expensive ops and recomputes the rest; a layer with nothing to keep
    // is any of them. Layers without mt.save are inferred from their shape.
    auto policyOf = [](const analysis::LayerCost &l) -> std::string {
      if (!l.keepsIntermediates)
        return "";
      if (l.save == "selective")
        return "selective";
      return "none";
    };
    std::string compiled, compiledLayer, recomputing;
    bool anySelective = false;
    for (const analysis::LayerCost &l : cost.layers) {
      anySelective |= l.save == "selective";
      std::string p = policyOf(l);
      if (!p.empty() && compiled.empty()) {
        compiled = p;
        compiledLayer = l.name;
      }
      if (l.recomputes && recomputing.empty())
        recomputing = l.name;
    }
    auto describe = [](const std::string &p) {
      return p == "none" ? "mtc-autodiff save=all (recompute none)"
                         : "mtc-autodiff save=selective (recompute selective)";
    };
    std::string policy = recompute;
    if (policy == "auto")
      policy = compiled.empty() ? "full" : compiled;
    if (policy == "full" && !compiled.empty()) {
      step.emitOpError() << "recompute=full, but the forward of layer @"
                         << compiledLayer
                         << " keeps intermediates for its backward: the "
                            "module was differentiated with "
                         << describe(compiled);
      return signalPassFailure();
    }
    if (policy == "none" && compiled == "selective") {
      step.emitOpError() << "recompute=none, but layer @" << compiledLayer
                         << " keeps only some intermediates: the module was "
                            "differentiated with "
                         << describe(compiled);
      return signalPassFailure();
    }
    if (policy == "none" && !recomputing.empty()) {
      step.emitOpError() << "recompute=none, but the backward of layer @"
                         << recomputing
                         << " recomputes its forward: the module was "
                            "differentiated with mtc-autodiff save=input "
                            "(recompute full)";
      return signalPassFailure();
    }
    if (policy == "selective" && compiled != "selective" &&
        !(compiled.empty() && anySelective)) {
      step.emitOpError()
          << "recompute=selective, but the module was differentiated with "
          << (compiled.empty() ? std::string("mtc-autodiff save=input "
                                             "(recompute full)")
                               : describe(compiled))
          << "; differentiate with mtc-autodiff save=selective";
      return signalPassFailure();
    }
    step.setRecompute(policy);
    Builder b(&getContext());
    int64_t deviceCkpt = 0;
    for (auto loop : step.getBody().front().getOps<stream::LayersOp>()) {
      const analysis::LayerCost *l = cost.layer(loop.getLayer());
      if (!l)
        continue;
      loop.setCheckpointBytesAttr(b.getI64IntegerAttr(l->checkpointBytes));
      if (loop.isForward())
        deviceCkpt +=
            loop.getCount() * step.getMicroBatches() * l->checkpointBytes;
    }
    if (recompute == "auto" && policy == "none" && budgetBytes > 0 &&
        deviceCkpt > budgetBytes) {
      step.emitOpError()
          << "keeping every intermediate needs "
          << analysis::formatByteSize(deviceCkpt, true)
          << " of checkpoints, more than the budget of "
          << analysis::formatByteSize(budgetBytes)
          << "; differentiate with mtc-autodiff save=input (recompute full)";
      return signalPassFailure();
    }
  }
};

} // namespace
