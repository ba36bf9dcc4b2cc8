//===- PlaceOptimizer.cpp - mtc-place-optimizer -----------------*- C++ -*-===//
//
// Part of mtc. The deferred exact AdamW: each instance's update runs just
// before its weights are first copied in the next step.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/StepUtils.h"

#include "mlir/IR/Builders.h"

namespace mtc {
#define GEN_PASS_DEF_MTCPLACEOPTIMIZER
#include "compiler/Transforms/Passes.h.inc"
} // namespace mtc

using namespace mlir;
using namespace mtc;

namespace {

struct PlaceOptimizer : mtc::impl::MtcPlaceOptimizerBase<PlaceOptimizer> {
  using MtcPlaceOptimizerBase::MtcPlaceOptimizerBase;

  void runOnOperation() override {
    stream::StepOp step =
        steputil::findStep(getOperation(), "mtc-place-optimizer");
    if (!step)
      return signalPassFailure();
    int64_t ahead = step.getPrefetchDepth() - 1;
    for (auto loop : step.getBody().front().getOps<stream::LayersOp>()) {
      if (!loop.isForward())
        continue;
      Block &body = loop.getBody().front();
      if (!body.getOps<stream::OptimizerUpdateOp>().empty()) {
        loop.emitOpError() << "already has an optimizer_update";
        return signalPassFailure();
      }
      OpBuilder b(loop.getContext());
      b.setInsertionPointToStart(&body);
      stream::OptimizerUpdateOp::create(b, loop.getLoc(), ahead);
    }
  }
};

} // namespace
