//===- PlanMemory.cpp - mtc-plan-memory -------------------------*- C++ -*-===//
//
// Part of mtc. The step's buffers with their sizes and arena offsets,
// checked against the device budget (docs/streaming.md).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/StepUtils.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/ErrorHandling.h"

namespace mtc {
#define GEN_PASS_DEF_MTCPLANMEMORY
#include "compiler/Transforms/Passes.h.inc"
} // namespace mtc

using namespace mlir;
using namespace mtc;

namespace {

struct PlanMemory : mtc::impl::MtcPlanMemoryBase<PlanMemory> {
  using MtcPlanMemoryBase::MtcPlanMemoryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    stream::StepOp step = steputil::findStep(module, "mtc-plan-memory");
    int64_t budgetBytes = 0;
    if (!step || failed(steputil::parseBudget(module, budget, budgetBytes)))
      return signalPassFailure();
    if (budget.empty())
      budgetBytes = step.getDeviceBudget();
    analysis::ModelCost cost;
    if (failed(steputil::analyzeStep(step, cost)))
      return signalPassFailure();
    analysis::PlanChoices choices = steputil::choicesOf(step);
    analysis::MemoryPlan plan = analysis::planMemory(cost, choices);

    // Replace the buffers.
    Block &body = step.getBody().front();
    for (auto old : llvm::make_early_inc_range(body.getOps<stream::BufferOp>()))
      old.erase();
    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&body);
    for (const bundle::PlanBuffer &buf : plan.buffers) {
      // The memory model speaks the bundle's strings, which are the
      // dialect's keywords.
      std::optional<stream::BufferKind> kind =
          stream::symbolizeBufferKind(buf.kind);
      std::optional<stream::MemorySpace> space =
          stream::symbolizeMemorySpace(buf.space);
      if (!kind || !space)
        llvm::report_fatal_error(
            "mtc-plan-memory: the memory model's buffer '" +
            llvm::Twine(buf.name) + "' has no stream dialect kind or space");
      stream::BufferOp::create(b, step.getLoc(), buf.name, *kind, *space,
                               buf.bytes,
                               *space == stream::MemorySpace::Device
                                   ? b.getI64IntegerAttr(buf.offset)
                                   : IntegerAttr());
    }
    step.setDevicePeak(plan.devicePeak);
    step.setDeviceBudget(budgetBytes);
    if (budgetBytes == 0)
      return;

    if (plan.devicePeak <= budgetBytes)
      return;
    // What every infeasible budget names: the least these options need
    // (with checkpoints on the host or on the device when left to the
    // compiler).
    int64_t smallest = plan.devicePeak;
    if (step.getCheckpointsAuto()) {
      analysis::PlanChoices frugal = choices;
      frugal.checkpointsOnHost = true;
      smallest =
          std::min(smallest, analysis::planMemory(cost, frugal).devicePeak);
      frugal.checkpointsOnHost = false;
      smallest =
          std::min(smallest, analysis::planMemory(cost, frugal).devicePeak);
    }
    if (budgetBytes < plan.largestLayerWeights)
      step.emitError() << "device budget of "
                       << analysis::formatByteSize(budgetBytes)
                       << " is smaller than the weights of one instance of "
                          "layer "
                       << plan.largestLayer << " ("
                       << analysis::formatByteSize(plan.largestLayerWeights,
                                                   true)
                       << "); the model cannot stream through it; smallest "
                          "feasible budget with these options is "
                       << analysis::formatByteSize(smallest, true);
    else
      step.emitError() << "needs "
                       << analysis::formatByteSize(plan.devicePeak, true)
                       << " of device memory, budget is "
                       << analysis::formatByteSize(budgetBytes)
                       << "; smallest feasible budget with these options is "
                       << analysis::formatByteSize(smallest, true);
    return signalPassFailure();
  }
};

} // namespace
