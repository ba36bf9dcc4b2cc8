//===- StepUtils.h - Helpers shared by the streaming passes -----*- C++ -*-===//
//
// Part of mtc. Finding the step and its model, and the memory plan of a step
// as it stands (compiler/Analysis).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_TRANSFORMS_STEPUTILS_H
#define MTC_COMPILER_TRANSFORMS_STEPUTILS_H

#include "compiler/Analysis/MemoryModel.h"
#include "compiler/Transforms/Policies.h"
#include "dialects/mt/MtDialect.h"
#include "dialects/stream/StreamDialect.h"

#include "mlir/IR/BuiltinOps.h"

namespace mtc::steputil {

/// The module's single stream.step, or null after an error at the module.
inline stream::StepOp findStep(mlir::ModuleOp module, llvm::StringRef pass) {
  auto steps = module.getBody()->getOps<stream::StepOp>();
  if (steps.empty()) {
    module.emitError() << pass << ": the module has no stream.step (run "
                       << "mtc-build-step first)";
    return {};
  }
  if (std::next(steps.begin()) != steps.end()) {
    module.emitError() << pass << ": the module has more than one stream.step";
    return {};
  }
  return *steps.begin();
}

inline mt::ModelOp modelOf(stream::StepOp step) {
  auto module = step->getParentOfType<mlir::ModuleOp>();
  return module.lookupSymbol<mt::ModelOp>(step.getModel());
}

/// The step's micro-batch dims and device precision.
inline analysis::Dims dimsOf(stream::StepOp step) {
  analysis::Dims d;
  d.batch = step.getBatch();
  d.seq = step.getSeq();
  if (std::optional<llvm::StringRef> p = step.getPrecision())
    bundle::parsePrecision(p->str(), d.precision);
  return d;
}

/// The model's costs at the step's dims; null after an error at the step.
inline mlir::LogicalResult analyzeStep(stream::StepOp step,
                                       analysis::ModelCost &cost) {
  mt::ModelOp model = modelOf(step);
  if (!model)
    return step.emitOpError() << "names no mt.model";
  llvm::Expected<analysis::ModelCost> analyzed =
      analysis::analyzeModel(model, dimsOf(step));
  if (!analyzed)
    return step.emitOpError() << llvm::toString(analyzed.takeError());
  cost = std::move(*analyzed);
  return mlir::success();
}

/// The plan choices the step makes today.
inline analysis::PlanChoices choicesOf(stream::StepOp step) {
  analysis::PlanChoices c;
  c.microBatches = step.getMicroBatches();
  c.prefetchDepth = step.getPrefetchDepth();
  c.checkpointsOnHost = step.getCheckpoints() == CheckpointPlacement::Host;
  c.checkpointEvery = step.getCheckpointEvery().value_or(1);
  if (std::optional<uint64_t> s = step.getSelectiveLayers())
    c.selectiveLayers = static_cast<int64_t>(*s);
  for (auto loop : step.getBody().front().getOps<stream::LayersOp>())
    if (loop.isForward())
      c.forwardLoops.emplace_back(loop.getLayer().str(),
                                  (int64_t)loop.getCount());
  return c;
}

/// Parses a pass's `budget` option (empty: 0, none).
inline mlir::LogicalResult parseBudget(mlir::Operation *at,
                                       const std::string &text, int64_t &out) {
  out = 0;
  if (text.empty())
    return mlir::success();
  llvm::Expected<int64_t> bytes = analysis::parseByteSize(text);
  if (!bytes)
    return at->emitError() << "budget: " << llvm::toString(bytes.takeError());
  out = *bytes;
  return mlir::success();
}

} // namespace mtc::steputil

#endif // MTC_COMPILER_TRANSFORMS_STEPUTILS_H
