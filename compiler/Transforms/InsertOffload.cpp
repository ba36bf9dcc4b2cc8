//===- InsertOffload.cpp - mtc-insert-offload -------------------*- C++ -*-===//
//
// Part of mtc. Where layer checkpoints live: device memory, or host memory
// through two device staging slots.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/StepUtils.h"

namespace mtc {
#define GEN_PASS_DEF_MTCINSERTOFFLOAD
#include "compiler/Transforms/Passes.h.inc"
} // namespace mtc

using namespace mlir;
using namespace mtc;

namespace {

struct InsertOffload : mtc::impl::MtcInsertOffloadBase<InsertOffload> {
  using MtcInsertOffloadBase::MtcInsertOffloadBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    stream::StepOp step = steputil::findStep(module, "mtc-insert-offload");
    int64_t budgetBytes = 0;
    if (!step || failed(steputil::parseBudget(module, budget, budgetBytes)))
      return signalPassFailure();
    CheckpointPlacement where = checkpoints;
    if (where == CheckpointPlacement::Auto) {
      analysis::ModelCost cost;
      if (failed(steputil::analyzeStep(step, cost)))
        return signalPassFailure();
      analysis::PlanChoices choices = steputil::choicesOf(step);
      choices.checkpointsOnHost = false;
      int64_t peak = analysis::planMemory(cost, choices).devicePeak;
      where = budgetBytes == 0 || peak <= budgetBytes
                  ? CheckpointPlacement::Device
                  : CheckpointPlacement::Host;
      step.setCheckpointsAuto(true);
    } else {
      step.setCheckpointsAuto(false);
    }
    step.setCheckpoints(where);
    stream::MemorySpace space = where == CheckpointPlacement::Host
                                    ? stream::MemorySpace::Host
                                    : stream::MemorySpace::Device;
    step.walk([&](stream::SaveOp op) { op.setTo(space); });
    step.walk([&](stream::RestoreOp op) { op.setFrom(space); });
  }
};

} // namespace
