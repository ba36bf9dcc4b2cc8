//===- FuseLinearCrossEntropy.cpp - LM head into cross-entropy --*- C++ -*-===//
//
// Part of mtc. Implements -mtc-fuse-linear-cross-entropy (see Passes.td).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mtc {
#define GEN_PASS_DEF_MTCFUSELINEARCROSSENTROPY
#include "compiler/Transforms/Passes.h.inc"
} // namespace mtc

using namespace mlir;
using namespace mtc::mt;

namespace {

struct MtcFuseLinearCrossEntropyPass
    : public mtc::impl::MtcFuseLinearCrossEntropyBase<
          MtcFuseLinearCrossEntropyPass> {
  using MtcFuseLinearCrossEntropyBase::MtcFuseLinearCrossEntropyBase;

  void runOnOperation() override {
    SmallVector<CrossEntropyOp> candidates;
    getOperation().walk([&](CrossEntropyOp ce) { candidates.push_back(ce); });
    for (CrossEntropyOp ce : candidates)
      if (succeeded(merge(ce)))
        ++numMerged;
  }

  LogicalResult merge(CrossEntropyOp ce) {
    Value logits = ce.getLogits();
    double cap = 0;
    SmallVector<Operation *> dead;
    if (auto sc = logits.getDefiningOp<SoftcapOp>()) {
      if (!sc->hasOneUse())
        return failure();
      cap = sc.getCap().convertToDouble();
      dead.push_back(sc);
      logits = sc.getInput();
    }
    auto mm = logits.getDefiningOp<MatMulOp>();
    if (!mm || !mm->hasOneUse() || mm.getBias())
      return failure();
    Value w = mm.getRhs();
    if (cast<MtTensorType>(w.getType()).getRank() != 2)
      return failure();
    dead.push_back(mm);
    bool transposed = false;
    if (auto t = w.getDefiningOp<TransposeOp>()) {
      if (t.getPerm() == ArrayRef<int64_t>{1, 0}) {
        transposed = true;
        w = t.getInput();
        if (t->hasOneUse())
          dead.push_back(t);
      }
    }
    OpBuilder b(ce);
    auto merged = LinearCrossEntropyOp::create(
        b, ce.getLoc(), ce.getType(), mm.getLhs(), w, ce.getTargets(),
        transposed ? b.getUnitAttr() : UnitAttr(), b.getF64FloatAttr(cap),
        ce.getIgnoreIndexAttr());
    ce.replaceAllUsesWith(merged.getResult());
    ce.erase();
    for (Operation *op : dead) // softcap, matmul, then the transpose
      op->erase();
    return success();
  }
};

} // namespace
