//===- InsertPrefetch.cpp - mtc-insert-prefetch -----------------*- C++ -*-===//
//
// Part of mtc. Weight slots and the copies that run ahead of the compute.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/StepUtils.h"

#include "mlir/IR/Builders.h"

namespace mtc {
#define GEN_PASS_DEF_MTCINSERTPREFETCH
#include "compiler/Transforms/Passes.h.inc"
} // namespace mtc

using namespace mlir;
using namespace mtc;

namespace {

struct InsertPrefetch : mtc::impl::MtcInsertPrefetchBase<InsertPrefetch> {
  using MtcInsertPrefetchBase::MtcInsertPrefetchBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    stream::StepOp step = steputil::findStep(module, "mtc-insert-prefetch");
    if (!step)
      return signalPassFailure();
    if (depth < 1) {
      module.emitError() << "mtc-insert-prefetch: depth must be >= 1, got "
                         << (int64_t)depth;
      return signalPassFailure();
    }
    // Segment checkpointing keeps a segment's instances resident from their
    // recomputed forward to their backward: one slot each.
    const int64_t slots =
        std::max<int64_t>(depth, step.getCheckpointEvery().value_or(1));
    step.setPrefetchDepth(slots);
    for (auto loop : step.getBody().front().getOps<stream::LayersOp>()) {
      Block &body = loop.getBody().front();
      if (!body.getOps<stream::PrefetchOp>().empty() ||
          !body.getOps<stream::WaitWeightsOp>().empty()) {
        loop.emitOpError() << "already has a prefetch or wait_weights";
        return signalPassFailure();
      }
      std::string event =
          (loop.getLayer() + "." +
           stream::stringifyDirection(loop.getDirection()) + ".weights")
              .str();
      OpBuilder b(loop.getContext());
      // After a leading optimizer_update, else first.
      auto it = body.begin();
      while (it != body.end() && isa<stream::OptimizerUpdateOp>(*it))
        ++it;
      b.setInsertionPoint(&body, it);
      stream::PrefetchOp::create(b, loop.getLoc(), slots - 1,
                                 stream::StreamName::H2D, event);
      for (auto compute : body.getOps<stream::ComputeOp>()) {
        b.setInsertionPoint(compute);
        stream::WaitWeightsOp::create(b, loop.getLoc(), event);
        break;
      }
    }
  }
};

} // namespace
