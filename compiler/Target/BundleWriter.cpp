//===- BundleWriter.cpp - mt dialect to a runtime bundle --------*- C++ -*-===//
//
// Part of mtc. Numbers every value of a function (arguments first, then op
// results in order) and records each op by its mnemonic with its attributes;
// symbol references become the op's `symbol`.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/BundleWriter.h"

#include "dialects/mt/MtDialect.h"
#include "dialects/stream/StreamDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace mtc {
namespace {

DType dtypeOf(Type t) {
  if (t.isBF16())
    return DType::BF16;
  if (t.isInteger(32))
    return DType::I32;
  return DType::F32;
}

bundle::ValueType typeOf(Type t) {
  auto tt = cast<mt::MtTensorType>(t);
  return {tt.getShapeVector(), dtypeOf(tt.getElementType())};
}

std::string locString(Location loc) {
  if (auto fl = dyn_cast<FileLineColLoc>(loc))
    return (fl.getFilename().getValue() + ":" + Twine(fl.getLine()) + ":" +
            Twine(fl.getColumn()))
        .str();
  return "";
}

LogicalResult translateBlock(Block &body, bundle::Function &out) {
  llvm::DenseMap<Value, int> ids;
  auto number = [&](Value v) {
    int id = static_cast<int>(out.values.size());
    ids[v] = id;
    out.values.push_back(typeOf(v.getType()));
    return id;
  };
  for (BlockArgument a : body.getArguments())
    out.args.push_back(number(a));
  for (Operation &op : body) {
    if (isa<func::ReturnOp, mt::YieldOp>(op)) {
      for (Value v : op.getOperands())
        out.results.push_back(ids.lookup(v));
      continue;
    }
    if (op.getDialect()->getNamespace() != "mt")
      return op.emitOpError() << "cannot be placed in a bundle";
    bundle::Op b;
    b.name = op.getName().stripDialect().str();
    b.loc = locString(op.getLoc());
    for (Value v : op.getOperands())
      b.operands.push_back(ids.lookup(v));
    for (Value r : op.getResults())
      b.results.push_back(number(r));
    if (auto fused = dyn_cast<mt::FusedOp>(op)) {
      b.region = std::make_shared<bundle::Function>();
      if (failed(translateBlock(fused.getBody().front(), *b.region)))
        return failure();
    } else if (op.getNumRegions() != 0) {
      return op.emitOpError() << "has regions the bundle cannot hold";
    }
    for (NamedAttribute na : op.getAttrs()) {
      std::string key = na.getName().str();
      Attribute a = na.getValue();
      if (auto sym = dyn_cast<FlatSymbolRefAttr>(a))
        b.symbol = sym.getValue().str();
      else if (auto i = dyn_cast<IntegerAttr>(a))
        b.attrs[key] = i.getInt();
      else if (auto f = dyn_cast<FloatAttr>(a))
        b.attrs[key] = f.getValueAsDouble();
      else if (isa<UnitAttr>(a))
        b.attrs[key] = true;
      else if (auto bo = dyn_cast<BoolAttr>(a))
        b.attrs[key] = bo.getValue();
      else if (auto s = dyn_cast<StringAttr>(a))
        b.attrs[key] = s.str();
      else if (auto fn = dyn_cast<mt::UnaryFnAttr>(a)) // unary_grad's kind
        b.attrs[key] = mt::stringifyUnaryFn(fn.getValue()).str();
      else if (auto arr = dyn_cast<DenseI64ArrayAttr>(a))
        b.attrs[key] = std::vector<int64_t>(arr.asArrayRef().begin(),
                                            arr.asArrayRef().end());
      else
        return op.emitOpError()
               << "attribute '" << key << "' cannot be placed in a bundle";
    }
    out.ops.push_back(std::move(b));
  }
  return success();
}

bundle::Param translateParam(mt::ParamOp p) {
  bundle::Param out;
  out.name = p.getSymName().str();
  out.shape = p.getTensorType().getShapeVector();
  out.dtype = dtypeOf(p.getTensorType().getElementType());
  out.init = mt::stringifyInitKind(p.getInit()).str();
  out.initArgs.assign(p.getInitArgs().begin(), p.getInitArgs().end());
  return out;
}

LogicalResult translateFunction(func::FuncOp fn, bundle::Function &out) {
  return translateBlock(fn.getBody().front(), out);
}

LogicalResult translateFunctions(Block &body,
                                 std::map<std::string, bundle::Function> &out) {
  for (auto fn : body.getOps<func::FuncOp>())
    if (failed(translateFunction(fn, out[fn.getSymName().str()])))
      return failure();
  return success();
}

/// The keyword of a stream dialect enum attribute, which is the bundle's
/// string for it; nothing for other attributes.
std::optional<std::string> enumKeyword(Attribute a) {
  return llvm::TypeSwitch<Attribute, std::optional<std::string>>(a)
      .Case<stream::DirectionAttr, stream::StreamNameAttr,
            stream::BufferKindAttr, stream::MemorySpaceAttr,
            stream::RecomputePolicyAttr, stream::CheckpointPlacementAttr>(
          [](auto e) { return stream::stringifyEnum(e.getValue()).str(); })
      .Default([](Attribute) { return std::nullopt; });
}

/// A stream command's attributes: integers, strings and enum keywords (the
/// layer symbol becomes "layer").
LogicalResult translateCommand(Operation &op, bundle::PlanCommand &out) {
  out.op = op.getName().stripDialect().str();
  for (NamedAttribute na : op.getAttrs()) {
    std::string key = na.getName().str();
    Attribute a = na.getValue();
    if (auto sym = dyn_cast<FlatSymbolRefAttr>(a))
      out.attrs[key] = sym.getValue().str();
    else if (auto i = dyn_cast<IntegerAttr>(a))
      out.attrs[key] = i.getInt();
    else if (auto str = dyn_cast<StringAttr>(a))
      out.attrs[key] = str.str();
    else if (std::optional<std::string> keyword = enumKeyword(a))
      out.attrs[key] = *keyword;
    else
      return op.emitOpError()
             << "attribute '" << key << "' cannot be placed in a bundle";
  }
  for (Region &r : op.getRegions())
    for (Operation &inner : r.front()) {
      out.body.emplace_back();
      if (failed(translateCommand(inner, out.body.back())))
        return failure();
    }
  return success();
}

LogicalResult translateStep(stream::StepOp step, bundle::StepPlan &out) {
  out.batch = step.getBatch();
  out.seq = step.getSeq();
  out.microBatches = step.getMicroBatches();
  out.prefetchDepth = step.getPrefetchDepth();
  out.recompute = stream::stringifyRecomputePolicy(step.getRecompute()).str();
  if (std::optional<uint64_t> s = step.getSelectiveLayers())
    out.selectiveLayers = static_cast<int64_t>(*s);
  out.checkpoints =
      stream::stringifyCheckpointPlacement(step.getCheckpoints()).str();
  out.deviceBudget = step.getDeviceBudget();
  out.devicePeak = step.getDevicePeak();
  out.precision = step.getPrecision().value_or("fp32").str();
  out.checkpointEvery = step.getCheckpointEvery().value_or(1);
  for (Operation &op : step.getBody().front()) {
    if (auto buffer = dyn_cast<stream::BufferOp>(op)) {
      bundle::PlanBuffer b;
      b.name = buffer.getSymName().str();
      b.kind = stream::stringifyBufferKind(buffer.getKind()).str();
      b.space = stream::stringifyMemorySpace(buffer.getSpace()).str();
      b.bytes = buffer.getBytes();
      if (IntegerAttr offset = buffer.getOffsetAttr())
        b.offset = offset.getInt();
      else if (b.space == "device")
        return buffer.emitOpError()
               << "has no offset (run mtc-plan-memory before writing a "
                  "bundle)";
      out.buffers.push_back(std::move(b));
      continue;
    }
    out.program.emplace_back();
    if (failed(translateCommand(op, out.program.back())))
      return failure();
  }
  if (out.devicePeak == 0)
    return step.emitOpError()
           << "is not planned (run mtc-plan-memory before writing a bundle)";
  return success();
}

} // namespace

LogicalResult translateToBundle(ModuleOp module, bundle::Bundle &out) {
  auto models = module.getBody()->getOps<mt::ModelOp>();
  if (std::distance(models.begin(), models.end()) != 1)
    return module.emitError() << "a bundle holds exactly one mt.model";
  mt::ModelOp model = *models.begin();
  out.model = model.getSymName().str();
  if (auto config = model.getConfigAttr())
    for (NamedAttribute na : config) {
      if (auto i = dyn_cast<IntegerAttr>(na.getValue()))
        out.config[na.getName().str()] = static_cast<double>(i.getInt());
      else if (auto f = dyn_cast<FloatAttr>(na.getValue()))
        out.config[na.getName().str()] = f.getValueAsDouble();
    }
  Block &body = model.getBody().front();
  for (auto p : body.getOps<mt::ParamOp>())
    out.params.push_back(translateParam(p));
  for (auto layer : body.getOps<mt::LayerOp>()) {
    bundle::Layer l;
    l.name = layer.getSymName().str();
    l.count = layer.getCount();
    for (auto p : layer.getBody().front().getOps<mt::ParamOp>())
      l.params.push_back(translateParam(p));
    if (failed(translateFunctions(layer.getBody().front(), l.functions)))
      return failure();
    for (auto expert : layer.getBody().front().getOps<mt::ExpertOp>()) {
      bundle::Expert e;
      e.name = expert.getSymName().str();
      e.count = expert.getCount();
      for (auto p : expert.getBody().front().getOps<mt::ParamOp>())
        e.params.push_back(translateParam(p));
      if (failed(translateFunctions(expert.getBody().front(), e.functions)))
        return failure();
      l.experts.push_back(std::move(e));
    }
    out.layers.push_back(std::move(l));
  }
  if (failed(translateFunctions(body, out.functions)))
    return failure();
  out.step.reset();
  for (auto step : module.getBody()->getOps<stream::StepOp>()) {
    if (out.step)
      return step.emitOpError() << "a bundle holds at most one stream.step";
    out.step = std::make_shared<bundle::StepPlan>();
    if (failed(translateStep(step, *out.step)))
      return failure();
  }
  return success();
}

} // namespace mtc
