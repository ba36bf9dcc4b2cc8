//===- StreamOps.cpp - Operations of the stream dialect ---------*- C++ -*-===//
//
// Part of mtc. Verifiers check what the runtime relies on: known kinds and
// directions, commands in the loops and directions they belong to, a step
// that names a model of its module and layers of that model.
//
//===----------------------------------------------------------------------===//

#include "dialects/stream/StreamDialect.h"

#include "dialects/mt/MtDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mtc::stream;

#define GET_OP_CLASSES
#include "dialects/stream/StreamOps.cpp.inc"

namespace {

LogicalResult oneOf(Operation *op, StringRef attr, StringRef value,
                    ArrayRef<StringRef> allowed) {
  if (llvm::is_contained(allowed, value))
    return success();
  InFlightDiagnostic d = op->emitOpError() << attr << " must be one of ";
  llvm::interleave(
      allowed, [&](StringRef s) { d << "'" << s << "'"; }, [&] { d << ", "; });
  return d << "; got '" << value << "'";
}

LayersOp parentLayers(Operation *op) {
  return dyn_cast_or_null<LayersOp>(op->getParentOp());
}

/// Direction-specific body ops: \p direction is "forward" or "backward".
LogicalResult inDirection(Operation *op, StringRef direction) {
  LayersOp loop = parentLayers(op);
  if (loop && loop.getDirection() != direction)
    return op->emitOpError()
           << "is only valid in a " << direction << " stream.layers loop";
  return success();
}

LogicalResult nonNegative(Operation *op, StringRef name, int64_t v) {
  if (v < 0)
    return op->emitOpError() << name << " must be >= 0, got " << v;
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// StepOp
//===----------------------------------------------------------------------===//

LogicalResult StepOp::verify() {
  for (auto [name, v] : {std::pair<StringRef, int64_t>{"batch", getBatch()},
                         {"seq", getSeq()},
                         {"micro_batches", getMicroBatches()},
                         {"prefetch_depth", getPrefetchDepth()}})
    if (v < 1)
      return emitOpError() << name << " must be >= 1, got " << v;
  if (failed(oneOf(*this, "recompute", getRecompute(),
                   {"full", "none", "selective"})) ||
      failed(
          oneOf(*this, "checkpoints", getCheckpoints(), {"device", "host"})) ||
      failed(nonNegative(*this, "device_budget", getDeviceBudget())) ||
      failed(nonNegative(*this, "device_peak", getDevicePeak())))
    return failure();
  return success();
}

LogicalResult StepOp::verifyRegions() {
  auto module = (*this)->getParentOfType<ModuleOp>();
  auto model = module ? module.lookupSymbol<mtc::mt::ModelOp>(getModel())
                      : mtc::mt::ModelOp();
  if (!model)
    return emitOpError() << "names no mt.model of its module: "
                         << getModelAttr();
  int64_t peak = getDevicePeak();
  for (Operation &op : getBody().front()) {
    if (!isa<BufferOp, LoadModelWeightsOp, StageOp, LayersOp,
             ReturnModelGradsOp>(op))
      return op.emitOpError() << "is not a command of a stream.step";
    if (auto layers = dyn_cast<LayersOp>(op)) {
      auto layer = model.lookupLayer(layers.getLayer());
      if (!layer)
        return layers.emitOpError()
               << "names no layer of model @" << model.getSymName() << ": "
               << layers.getLayerAttr();
      if (layers.getFirst() + layers.getCount() > layer.getCount())
        return layers.emitOpError()
               << "instances [" << layers.getFirst() << ", "
               << layers.getFirst() + layers.getCount() << ") exceed the "
               << layer.getCount() << " instances of @" << layer.getSymName();
    }
    if (auto buffer = dyn_cast<BufferOp>(op)) {
      IntegerAttr offset = buffer.getOffsetAttr();
      if (peak > 0 && offset && offset.getInt() + buffer.getBytes() > peak)
        return buffer.emitOpError()
               << "ends at byte " << offset.getInt() + buffer.getBytes()
               << ", beyond the step's device_peak " << peak;
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// BufferOp
//===----------------------------------------------------------------------===//

LogicalResult BufferOp::verify() {
  if (failed(oneOf(*this, "kind", getKind(),
                   {"model_weights", "model_grads", "weights", "grads",
                    "activations", "checkpoints", "stage", "workspace"})) ||
      failed(oneOf(*this, "space", getSpace(), {"device", "host"})) ||
      failed(nonNegative(*this, "bytes", getBytes())))
    return failure();
  if (getSpace() == "host" && getKind() != "checkpoints" &&
      getKind() != "activations")
    return emitOpError()
           << "only checkpoints and activations can live in host memory";
  if (IntegerAttr offset = getOffsetAttr()) {
    if (getSpace() == "host")
      return emitOpError() << "a host buffer has no arena offset";
    if (offset.getInt() < 0 || offset.getInt() % 256 != 0)
      return emitOpError() << "offset must be a non-negative multiple of 256, "
                              "got "
                           << offset.getInt();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// StageOp, LayersOp
//===----------------------------------------------------------------------===//

LogicalResult StageOp::verify() {
  if (getBegin() < 0 || getEnd() < getBegin())
    return emitOpError() << "expects 0 <= begin <= end, got [" << getBegin()
                         << ", " << getEnd() << ")";
  return success();
}

LogicalResult LayersOp::verify() {
  if (failed(
          oneOf(*this, "direction", getDirection(), {"forward", "backward"})) ||
      failed(nonNegative(*this, "first", getFirst())) ||
      failed(nonNegative(*this, "op_index", getOpIndex())))
    return failure();
  if (getCount() < 1)
    return emitOpError() << "count must be >= 1, got " << getCount();
  if (IntegerAttr c = getCheckpointBytesAttr())
    return nonNegative(*this, "checkpoint_bytes", c.getInt());
  return success();
}

LogicalResult LayersOp::verifyRegions() {
  int computes = 0, prefetches = 0, waits = 0;
  for (Operation &op : getBody().front()) {
    if (isa<ComputeOp>(op)) {
      ++computes;
      if (prefetches + waits > 0 && waits == 0)
        return op.emitOpError() << "runs before its weights are waited for "
                                   "(stream.wait_weights must come first)";
    } else if (isa<PrefetchOp>(op)) {
      ++prefetches;
    } else if (isa<WaitWeightsOp>(op)) {
      ++waits;
      if (computes)
        return op.emitOpError() << "must come before stream.compute";
    } else if (!isa<OptimizerUpdateOp, SaveOp, RestoreOp, GradReturnOp>(op)) {
      return op.emitOpError() << "is not a command of a stream.layers body";
    }
  }
  if (computes != 1)
    return emitOpError() << "body must hold exactly one stream.compute, has "
                         << computes;
  if (prefetches > 1 || waits > 1)
    return emitOpError() << "body holds at most one stream.prefetch and one "
                            "stream.wait_weights";
  return success();
}

//===----------------------------------------------------------------------===//
// Body commands
//===----------------------------------------------------------------------===//

LogicalResult OptimizerUpdateOp::verify() {
  if (failed(nonNegative(*this, "ahead", getAhead())))
    return failure();
  return inDirection(*this, "forward");
}

LogicalResult PrefetchOp::verify() {
  if (failed(nonNegative(*this, "ahead", getAhead())) ||
      failed(oneOf(*this, "stream", getStream(), {"h2d"})))
    return failure();
  if (getEvent().empty())
    return emitOpError() << "needs a non-empty event name";
  return success();
}

LogicalResult WaitWeightsOp::verify() {
  if (getEvent().empty())
    return emitOpError() << "needs a non-empty event name";
  return success();
}

LogicalResult SaveOp::verify() {
  if (failed(oneOf(*this, "to", getTo(), {"device", "host"})))
    return failure();
  return inDirection(*this, "forward");
}

LogicalResult RestoreOp::verify() {
  if (failed(oneOf(*this, "from", getFrom(), {"device", "host"})))
    return failure();
  return inDirection(*this, "backward");
}

LogicalResult ComputeOp::verify() {
  if (failed(oneOf(*this, "fn", getFn(), {"forward", "backward"})))
    return failure();
  LayersOp loop = parentLayers(*this);
  if (loop && loop.getDirection() != getFn())
    return emitOpError() << "runs '" << getFn() << "' in a "
                         << loop.getDirection() << " loop";
  return success();
}

LogicalResult GradReturnOp::verify() {
  if (failed(oneOf(*this, "stream", getStream(), {"d2h"})))
    return failure();
  return inDirection(*this, "backward");
}
