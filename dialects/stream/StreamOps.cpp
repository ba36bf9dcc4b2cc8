//===- StreamOps.cpp - Operations of the stream dialect ---------*- C++ -*-===//
//
// Part of mtc. Verifiers check what the runtime relies on beyond what the
// enum attributes already guarantee: decided policies, commands in the loops
// and directions they belong to, copies on their streams, a step that names a
// model of its module and layers of that model.
//
//===----------------------------------------------------------------------===//

#include "dialects/stream/StreamDialect.h"

#include "dialects/mt/MtDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mtc::stream;

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// An enum attribute as its bare keyword (`stream.save to = host`). The
/// attribute's own printer leads with a space, which its generic form
/// `#stream<space host>` needs and an op's custom form does not; its parser
/// adds a second error to the one that lists the keywords.
template <typename EnumAttrT>
static ParseResult parseEnumKeyword(OpAsmParser &parser, EnumAttrT &attr) {
  using Enum = decltype(std::declval<EnumAttrT>().getValue());
  FailureOr<Enum> value = FieldParser<Enum, Enum>::parse(parser);
  if (failed(value))
    return failure();
  attr = EnumAttrT::get(parser.getContext(), *value);
  return success();
}

template <typename EnumAttrT>
static void printEnumKeyword(OpAsmPrinter &printer, Operation *,
                             EnumAttrT attr) {
  printer << stringifyEnum(attr.getValue());
}

#define GET_OP_CLASSES
#include "dialects/stream/StreamOps.cpp.inc"

namespace {

/// Copies run on one stream each: prefetch on h2d, grad_return on d2h.
LogicalResult onStream(Operation *op, StreamName stream, StreamName expected) {
  if (stream == expected)
    return success();
  return op->emitOpError() << "runs on the " << stringifyStreamName(expected)
                           << " stream, got " << stringifyStreamName(stream);
}

LayersOp parentLayers(Operation *op) {
  return dyn_cast_or_null<LayersOp>(op->getParentOp());
}

/// Direction-specific body ops.
LogicalResult inDirection(Operation *op, Direction direction) {
  LayersOp loop = parentLayers(op);
  if (loop && loop.getDirection() != direction)
    return op->emitOpError()
           << "is only valid in a " << stringifyDirection(direction)
           << " stream.layers loop";
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
  if (getRecompute() == RecomputePolicy::Auto)
    return emitOpError() << "recompute must be decided (full, none or "
                            "selective), got auto";
  if (getCheckpoints() == CheckpointPlacement::Auto)
    return emitOpError() << "checkpoints must be placed (device or host), got "
                            "auto";
  if (std::optional<StringRef> p = getPrecision())
    if (*p != "fp32" && *p != "bf16")
      return emitOpError() << "precision must be fp32 or bf16, got '" << *p
                           << "'";
  if (std::optional<uint64_t> k = getCheckpointEvery()) {
    if (static_cast<int64_t>(*k) < 1)
      return emitOpError() << "checkpoint_every must be >= 1, got "
                           << static_cast<int64_t>(*k);
    if (*k > 1 && getRecompute() != RecomputePolicy::Full)
      return emitOpError() << "checkpoint_every " << *k
                           << " needs recompute = full, got "
                           << stringifyRecomputePolicy(getRecompute());
  }
  if (std::optional<uint64_t> s = getSelectiveLayers()) {
    if (static_cast<int64_t>(*s) < 0)
      return emitOpError() << "selective_layers must be >= 0, got "
                           << static_cast<int64_t>(*s);
    if (getRecompute() != RecomputePolicy::Selective)
      return emitOpError() << "selective_layers needs recompute = selective, "
                              "got "
                           << stringifyRecomputePolicy(getRecompute());
  }
  if (failed(nonNegative(*this, "device_budget", getDeviceBudget())) ||
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
  if (failed(nonNegative(*this, "bytes", getBytes())))
    return failure();
  bool host = getSpace() == MemorySpace::Host;
  if (host && getKind() != BufferKind::Checkpoints &&
      getKind() != BufferKind::Activations && getKind() != BufferKind::Stage &&
      getKind() != BufferKind::Grads)
    return emitOpError() << "only checkpoints, activations, the stage and "
                            "the gradient ring can live in host memory";
  if (IntegerAttr offset = getOffsetAttr()) {
    if (host)
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
  if (failed(nonNegative(*this, "first", getFirst())) ||
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
  return inDirection(*this, Direction::Forward);
}

LogicalResult PrefetchOp::verify() {
  if (failed(nonNegative(*this, "ahead", getAhead())) ||
      failed(onStream(*this, getStream(), StreamName::H2D)))
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
  return inDirection(*this, Direction::Forward);
}

LogicalResult RestoreOp::verify() {
  return inDirection(*this, Direction::Backward);
}

LogicalResult ComputeOp::verify() {
  LayersOp loop = parentLayers(*this);
  if (loop && loop.getDirection() != getFn())
    return emitOpError() << "runs '" << stringifyDirection(getFn()) << "' in a "
                         << stringifyDirection(loop.getDirection()) << " loop";
  return success();
}

LogicalResult GradReturnOp::verify() {
  if (failed(onStream(*this, getStream(), StreamName::D2H)))
    return failure();
  return inDirection(*this, Direction::Backward);
}
