//===- MemoryModel.cpp - Bytes and FLOPs of a model's training step -------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "compiler/Analysis/MemoryModel.h"

#include "lib/Bundle/Plan.h"
#include "lib/Support/ByteSize.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace mlir;

namespace mtc::analysis {

namespace {

Shape shapeOf(Type t) { return cast<mt::MtTensorType>(t).getShapeVector(); }

int64_t numelOf(Type t, const Dims &dims, int64_t tokens) {
  return bundle::concreteNumel(shapeOf(t), dims.batch, dims.seq, tokens);
}

/// The expert a moe/moe_grad op names, looked up in its enclosing layer.
mt::ExpertOp expertOf(Operation *op) {
  auto sym = op->getAttrOfType<FlatSymbolRefAttr>("expert");
  auto layer = op->getParentOfType<mt::LayerOp>();
  if (!sym || !layer)
    return {};
  return dyn_cast_or_null<mt::ExpertOp>(
      SymbolTable::lookupSymbolIn(layer, sym.getAttr()));
}

func::FuncOp functionIn(Operation *symbolTable, StringRef name) {
  return dyn_cast_or_null<func::FuncOp>(
      SymbolTable::lookupSymbolIn(symbolTable, name));
}

/// The device bytes of the parameters of \p body under \p precision; adds
/// their count to \p elements and their (f32) gradients' bytes to \p
/// gradBytes.
int64_t paramBytes(Block &body, bundle::Precision precision, int64_t &elements,
                   int64_t &gradBytes) {
  using bundle::addSize;
  int64_t bytes = 0;
  for (auto p : body.getOps<mt::ParamOp>()) {
    elements = addSize(elements, p.getNumElements());
    bytes = addSize(bytes,
                    bundle::tensorBytes(p.getNumElements(),
                                        bundle::deviceParamDType(precision)));
    gradBytes =
        addSize(gradBytes, bundle::tensorBytes(p.getNumElements(), DType::F32));
  }
  return bytes;
}

DType logicalDType(Type t) {
  Type e = cast<mt::MtTensorType>(t).getElementType();
  return e.isInteger(32) ? DType::I32 : e.isBF16() ? DType::BF16 : DType::F32;
}

/// Values of \p fn's backward computed from its input x (argument 0) alone,
/// without the incoming gradient or saved values: recomputation.
bool backwardRecomputes(func::FuncOp backward) {
  if (!backward || backward.getNumArguments() < 2)
    return false;
  Block &body = backward.getBody().front();
  llvm::DenseSet<Value> fromX, fromGrad;
  fromX.insert(body.getArgument(0));
  for (unsigned i = 1; i < body.getNumArguments(); ++i)
    fromGrad.insert(body.getArgument(i));
  for (Operation &op : body) {
    bool x = false, g = false;
    for (Value v : op.getOperands()) {
      x |= fromX.contains(v);
      g |= fromGrad.contains(v);
    }
    for (Value r : op.getResults())
      (g ? fromGrad : fromX).insert(r);
    if (x && !g && op.getNumResults() > 0 &&
        !isa<mt::ReshapeOp, mt::ParamRefOp>(op))
      return true;
    if (!g && !x)
      for (Value r : op.getResults())
        fromX.erase(r);
  }
  return false;
}

} // namespace

StorageMap valueStorage(func::FuncOp fn, bundle::Precision precision) {
  StorageMap out;
  Block &body = fn.getBody().front();
  for (BlockArgument a : body.getArguments())
    out[a] = bundle::argumentStorage(logicalDType(a.getType()),
                                     shapeOf(a.getType()).size(), precision);
  for (Operation &op : body) {
    int floats = 0;
    bool allF32 = true;
    for (Value v : op.getOperands()) {
      DType t = out.lookup(v);
      if (t != DType::I32) {
        ++floats;
        allF32 = allF32 && t == DType::F32;
      }
    }
    std::string name = op.getName().stripDialect().str();
    for (auto [r, v] : llvm::enumerate(op.getResults()))
      if (isa<mt::MtTensorType>(v.getType()))
        out[v] = bundle::resultStorage(name, r, logicalDType(v.getType()),
                                       shapeOf(v.getType()).size(), floats,
                                       allF32, precision);
  }
  return out;
}

int64_t valueBytes(Type type, DType storage, const Dims &dims, int64_t tokens) {
  return bundle::tensorBytes(numelOf(type, dims, tokens), storage);
}

int64_t opWorkspaceBytes(Operation *op, const StorageMap &storage,
                         const Dims &dims, int64_t tokens) {
  if (isa<mt::ParamRefOp, mt::ReshapeOp>(op))
    return 0;
  using bundle::addSize, bundle::mulSize;
  int64_t bytes = 0;
  for (Value r : op->getResults())
    bytes = addSize(bytes,
                    valueBytes(r.getType(), storage.lookup(r), dims, tokens));
  if (isa<mt::AttentionOp>(op))
    bytes = addSize(
        bytes, bundle::attentionLseBytes(shapeOf(op->getResult(0).getType()),
                                         dims.batch, dims.seq));
  if (isa<mt::MoeOp, mt::MoeGradOp>(op)) {
    if (mt::ExpertOp expert = expertOf(op)) {
      int64_t n = dims.tokens(), inner = 0;
      if (func::FuncOp fwd = expert.getForward())
        inner = addSize(inner, workspaceBytes(fwd, dims, n));
      if (isa<mt::MoeGradOp>(op))
        if (func::FuncOp bwd = functionIn(expert, "backward"))
          inner = addSize(inner, workspaceBytes(bwd, dims, n));
      // The expert's gathered input rows [T, D] (and, for moe_grad, its
      // output gradient rows), T <= N.
      Shape in = shapeOf(op->getOperand(0).getType());
      int64_t rows = bundle::tensorBytes(mulSize(n, in.empty() ? 0 : in.back()),
                                         storage.lookup(op->getOperand(0)));
      inner = addSize(inner, isa<mt::MoeGradOp>(op) ? mulSize(2, rows) : rows);
      bytes = addSize(bytes, inner);
    }
  }
  return bytes;
}

int64_t plannedWorkspaceBytes(func::FuncOp fn, const Dims &dims) {
  // The same liveness and packing as bundle::planLayerFunction, which the
  // runtime uses to place the values: op k is the k-th op of the body
  // (func.return excluded), views (param_ref, reshape) take no space, a
  // reshape keeps its operand alive, results live to the end.
  Block &body = fn.getBody().front();
  StorageMap storage = valueStorage(fn, dims.precision);
  llvm::DenseMap<Value, int64_t> def, last, bytes;
  std::vector<Value> order;
  int64_t k = 0, scratch = 0;
  for (Operation &op : body) {
    if (isa<func::ReturnOp>(op)) {
      for (Value v : op.getOperands())
        last[v] = -1; // set below
      continue;
    }
    for (Value v : op.getOperands())
      last[v] = std::max(last.lookup(v), k);
    bool view = isa<mt::ParamRefOp, mt::ReshapeOp>(op);
    for (auto [r, v] : llvm::enumerate(op.getResults())) {
      def[v] = k;
      last[v] = std::max(last.lookup(v), k);
      if (view)
        continue;
      int64_t b = valueBytes(v.getType(), storage.lookup(v), dims);
      if (isa<mt::AttentionOp>(op) && r == 0)
        b = bundle::addSize(b, bundle::attentionLseBytes(shapeOf(v.getType()),
                                                         dims.batch, dims.seq));
      bytes[v] = b;
      order.push_back(v);
    }
    scratch = std::max(scratch, opWorkspaceBytes(&op, storage, dims, 0));
    ++k;
  }
  if (Operation *ret = body.getTerminator())
    for (Value v : ret->getOperands())
      last[v] = k;
  std::vector<Operation *> ops;
  for (Operation &op : body)
    if (!isa<func::ReturnOp>(op))
      ops.push_back(&op);
  for (auto it = ops.rbegin(); it != ops.rend(); ++it)
    if (auto r = dyn_cast<mt::ReshapeOp>(*it))
      last[r->getOperand(0)] =
          std::max(last.lookup(r->getOperand(0)), last.lookup(r->getResult(0)));
  std::vector<bundle::LiveValue> live;
  for (Value v : order)
    live.push_back({bytes.lookup(v), def.lookup(v), last.lookup(v)});
  std::vector<int64_t> offsets;
  return bundle::addSize(bundle::packLiveValues(live, offsets), scratch);
}

int64_t workspaceBytes(func::FuncOp fn, const Dims &dims, int64_t tokens) {
  StorageMap storage = valueStorage(fn, dims.precision);
  int64_t bytes = 0;
  for (Operation &op : fn.getBody().front())
    bytes =
        bundle::addSize(bytes, opWorkspaceBytes(&op, storage, dims, tokens));
  return bytes;
}

namespace {

int64_t opFlops(Operation *op, const Dims &dims, int64_t tokens) {
  using bundle::addSize, bundle::mulSize;
  if (isa<mt::ParamRefOp, mt::ReshapeOp, func::ReturnOp>(op) ||
      op->getNumResults() == 0)
    return 0;
  if (isa<mt::MatMulOp>(op)) {
    Shape a = shapeOf(op->getOperand(0).getType());
    int64_t k = a.empty() ? 1
                          : bundle::concreteNumel({a.back()}, dims.batch,
                                                  dims.seq, tokens);
    return mulSize(mulSize(2, k),
                   numelOf(op->getResult(0).getType(), dims, tokens));
  }
  if (auto attn = dyn_cast<mt::AttentionOp>(op)) {
    Shape q = shapeOf(op->getResult(0).getType());
    int64_t f = mulSize(
        mulSize(4, numelOf(op->getResult(0).getType(), dims, tokens)),
        q.size() == 4 ? bundle::concreteNumel({q[1]}, dims.batch, dims.seq)
                      : 1);
    // A saturated count stays saturated.
    return attn.getCausal() && f < bundle::kSizeCap ? f / 2 : f;
  }
  if (auto fused = dyn_cast<mt::FusedOp>(op)) {
    int64_t f = 0;
    for (Operation &inner : fused.getBody().front())
      f = addSize(f, opFlops(&inner, dims, tokens));
    return f;
  }
  if (isa<mt::MoeOp>(op)) {
    Shape router = shapeOf(op->getOperand(1).getType());
    int64_t f =
        mulSize(mulSize(2, dims.tokens()), bundle::concreteNumel(router, 0, 0));
    if (mt::ExpertOp expert = expertOf(op))
      if (func::FuncOp fwd = expert.getForward())
        f = addSize(
            f,
            flops(fwd, dims,
                  mulSize(dims.tokens(),
                          op->getAttrOfType<IntegerAttr>("top_k").getInt())));
    return f;
  }
  return numelOf(op->getResult(0).getType(), dims, tokens);
}

} // namespace

int64_t flops(func::FuncOp fn, const Dims &dims, int64_t tokens) {
  int64_t f = 0;
  for (Operation &op : fn.getBody().front())
    f = bundle::addSize(f, opFlops(&op, dims, tokens));
  return f;
}

const LayerCost *ModelCost::layer(llvm::StringRef name) const {
  for (const LayerCost &l : layers)
    if (l.name == name)
      return &l;
  return nullptr;
}

int64_t ModelCost::totalParams() const {
  int64_t n = modelParams;
  for (const LayerCost &l : layers)
    n = bundle::addSize(n, bundle::mulSize(l.params, l.count));
  return n;
}

int64_t ModelCost::totalInstances() const {
  int64_t n = 0;
  for (const LayerCost &l : layers)
    n = bundle::addSize(n, l.count);
  return n;
}

namespace {

/// "2^56 bytes (64 PiB)": the plan limit as people read it.
std::string planLimitText() { return "2^56 bytes (64 PiB)"; }

/// A size for a message: its bytes, or "more than 2^62" when saturated.
std::string sizeText(int64_t bytes) {
  return bytes >= bundle::kSizeCap ? std::string("more than 2^62")
                                   : std::to_string(bytes);
}

/// The error for \p what needing \p bytes at \p dims (\p microBatches:
/// 0 when the size is per micro-batch).
llvm::Error sizeLimitError(const std::string &what, int64_t bytes,
                           const Dims &dims, int64_t microBatches) {
  std::string flags = "--batch " + std::to_string(dims.batch) + " and --seq " +
                      std::to_string(dims.seq);
  if (microBatches > 0)
    flags = "--batch " + std::to_string(dims.batch) + ", --seq " +
            std::to_string(dims.seq) + " and --micro-batches " +
            std::to_string(microBatches);
  return llvm::createStringError(
      "at " + flags + ", " + what + " needs " + sizeText(bytes) +
      " bytes, more than the limit of " + planLimitText() +
      " on any size of a step plan; give smaller values (or a model with "
      "smaller dimensions)");
}

/// analyzeModel's limits on \p cost (see its comment).
llvm::Error checkCostSizes(const ModelCost &cost, const Dims &dims) {
  const int64_t maxParams = bundle::kMaxPlanBytes / bundle::kStateBytesPerParam;
  int64_t params = cost.totalParams();
  if (params > maxParams)
    return llvm::createStringError(
        "model @" + cost.name + " has " +
        (params >= bundle::kSizeCap ? std::string("more than 2^62")
                                    : std::to_string(params)) +
        " parameters, more than the limit of " + std::to_string(maxParams) +
        " (2^52) of a step plan: their training state (" +
        std::to_string(bundle::kStateBytesPerParam) +
        " B/param) must stay within " + planLimitText());
  auto over = [](int64_t v) { return v > bundle::kMaxPlanBytes; };
  for (const LayerCost &l : cost.layers) {
    const std::pair<const char *, int64_t> sizes[] = {
        {"weights", l.weightBytes},
        {"gradients", l.gradBytes},
        {"checkpoint", l.checkpointBytes},
        {"workspace", l.workspaceBytes}};
    for (const auto &[what, bytes] : sizes)
      if (over(bytes))
        return sizeLimitError("the " + std::string(what) + " of layer @" +
                                  l.name + " (one instance)",
                              bytes, dims, 0);
    if (l.forwardFlops >= bundle::kSizeCap)
      return llvm::createStringError(
          "at --batch " + std::to_string(dims.batch) + " and --seq " +
          std::to_string(dims.seq) + ", the forward of layer @" + l.name +
          " needs more than 2^62 FLOPs per micro-batch, the limit of a step "
          "plan; give smaller values");
  }
  if (over(cost.stageBytes))
    return sizeLimitError("the model-level stage", cost.stageBytes, dims, 0);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<ModelCost> analyzeModel(mt::ModelOp model, const Dims &dims) {
  ModelCost out;
  out.name = model.getSymName().str();
  out.tokens = dims.tokens();
  Block &body = model.getBody().front();
  out.modelWeightBytes =
      paramBytes(body, dims.precision, out.modelParams, out.modelGradBytes);
  for (auto layer : body.getOps<mt::LayerOp>()) {
    LayerCost l;
    l.name = layer.getSymName().str();
    l.count = layer.getCount();
    Block &lb = layer.getBody().front();
    l.weightBytes = paramBytes(lb, dims.precision, l.params, l.gradBytes);
    for (auto expert : lb.getOps<mt::ExpertOp>())
      for (int64_t e = 0, n = expert.getCount(); e < n; ++e)
        l.weightBytes = bundle::addSize(
            l.weightBytes, paramBytes(expert.getBody().front(), dims.precision,
                                      l.params, l.gradBytes));
    func::FuncOp fwd = layer.getForward();
    func::FuncOp bwd = functionIn(layer, "backward");
    if (!fwd || !bwd)
      return llvm::createStringError(
          "layer @" + l.name +
          " has no backward function; run mtc-autodiff first");
    FunctionType type = fwd.getFunctionType();
    StorageMap fwdStorage = valueStorage(fwd, dims.precision);
    Value input = fwd.getBody().front().getArgument(0);
    l.boundaryBytes =
        valueBytes(type.getInput(0), fwdStorage.lookup(input), dims);
    l.checkpointBytes = l.boundaryBytes;
    // A kept attention output keeps its log-sum-exp with it (the backward
    // needs both).
    Operation *ret = fwd.getBody().front().getTerminator();
    for (unsigned i = 1; i < type.getNumResults(); ++i) {
      l.checkpointBytes = bundle::addSize(
          l.checkpointBytes,
          valueBytes(type.getResult(i), fwdStorage.lookup(ret->getOperand(i)),
                     dims));
      if (isa_and_nonnull<mt::AttentionOp>(ret->getOperand(i).getDefiningOp()))
        l.checkpointBytes = bundle::addSize(
            l.checkpointBytes,
            bundle::attentionLseBytes(shapeOf(type.getResult(i)), dims.batch,
                                      dims.seq));
    }
    l.keepsIntermediates = type.getNumResults() > 1;
    l.recomputes = backwardRecomputes(bwd);
    l.forwardFlops = flops(fwd, dims);
    if (auto save = bwd->getAttrOfType<StringAttr>("mt.save"))
      l.save = save.str();
    if (l.recomputes || l.save == "selective") {
      if (l.save == "selective") {
        for (Operation &op : fwd.getBody().front())
          if (!isa<mt::MatMulOp, mt::AttentionOp, mt::MoeOp>(op))
            l.recomputeFlops =
                bundle::addSize(l.recomputeFlops, opFlops(&op, dims, 0));
      } else {
        l.recomputeFlops = l.forwardFlops;
      }
    }
    l.workspaceBytes = std::max(plannedWorkspaceBytes(fwd, dims),
                                plannedWorkspaceBytes(bwd, dims));
    if (func::FuncOp full = functionIn(layer, "backward_full")) {
      l.hasFullBackward = true;
      l.workspaceBytes =
          std::max(l.workspaceBytes, plannedWorkspaceBytes(full, dims));
    }
    out.layers.push_back(std::move(l));
  }
  func::FuncOp fb = functionIn(model, "forward_backward");
  if (!fb)
    return llvm::createStringError(
        "model @" + out.name +
        " has no forward_backward function; run mtc-autodiff first");
  Block &fbBody = fb.getBody().front();
  StorageMap fbStorage = valueStorage(fb, dims.precision);
  // The same program for the host stage plan (bundle::planStage), values
  // numbered in definition order.
  bundle::StageProgram stage;
  llvm::DenseMap<Value, int> ids;
  llvm::DenseSet<Value> persistent;
  auto idOf = [&](Value v) {
    auto [it, inserted] = ids.try_emplace(v, (int)stage.valueBytes.size());
    if (inserted)
      stage.valueBytes.push_back(
          valueBytes(v.getType(), fbStorage.lookup(v), dims));
    return it->second;
  };
  for (BlockArgument a : fbBody.getArguments()) {
    out.stageBytes = bundle::addSize(
        out.stageBytes, valueBytes(a.getType(), fbStorage.lookup(a), dims));
    stage.args.push_back(idOf(a));
  }
  int64_t index = 0;
  for (Operation &op : fbBody) {
    if (isa<func::ReturnOp>(op))
      continue;
    int64_t scratch = opWorkspaceBytes(&op, fbStorage, dims);
    out.stageBytes = bundle::addSize(out.stageBytes, scratch);
    bundle::StageOp sop;
    for (Value v : op.getOperands())
      sop.operands.push_back(idOf(v));
    for (Value r : op.getResults())
      sop.results.push_back(idOf(r));
    sop.layers = isa<mt::ApplyLayersOp, mt::ApplyLayersGradOp>(op);
    sop.persistent =
        isa<mt::ParamRefOp>(op) ||
        (isa<mt::ReshapeOp>(op) && persistent.contains(op.getOperand(0)));
    if (sop.persistent)
      for (Value r : op.getResults())
        persistent.insert(r);
    sop.scratch = sop.layers ? 0 : scratch;
    stage.ops.push_back(std::move(sop));
    if (auto a = dyn_cast<mt::ApplyLayersOp>(op))
      out.layersOps.push_back({a.getLayer().str(), (int64_t)a.getFirst(),
                               (int64_t)a.getCount(), index, true});
    else if (auto g = dyn_cast<mt::ApplyLayersGradOp>(op))
      out.layersOps.push_back({g.getLayer().str(), (int64_t)g.getFirst(),
                               (int64_t)g.getCount(), index, false});
    ++index;
  }
  out.forwardBackwardOps = index;
  bundle::StagePlan sp = bundle::planStage(stage);
  out.stageSlotBytes = sp.slotBytes;
  out.stageHostBytes = sp.hostBytes;
  if (llvm::Error e = checkCostSizes(out, dims))
    return std::move(e);
  return out;
}

llvm::Error checkPlanSizes(const MemoryPlan &plan, const Dims &dims,
                           const PlanChoices &choices) {
  for (const bundle::PlanBuffer &b : plan.buffers)
    if (b.bytes > bundle::kMaxPlanBytes)
      return sizeLimitError("the " + b.space + " buffer '" + b.name + "'",
                            b.bytes, dims, choices.microBatches);
  if (plan.devicePeak > bundle::kMaxPlanBytes)
    return sizeLimitError("the device peak", plan.devicePeak, dims,
                          choices.microBatches);
  if (plan.hostBytes > bundle::kMaxPlanBytes)
    return sizeLimitError("the host buffers", plan.hostBytes, dims,
                          choices.microBatches);
  return llvm::Error::success();
}

std::vector<std::pair<std::string, int64_t>>
forwardLoops(const ModelCost &cost) {
  std::vector<std::pair<std::string, int64_t>> loops;
  for (const ModelCost::LayersOp &op : cost.layersOps)
    if (op.forward)
      loops.emplace_back(op.layer, op.count);
  return loops;
}

double recomputeCostSeconds(const ModelCost &cost, const PlanChoices &choices,
                            const DeviceRates &rates) {
  double seconds = 0;
  int64_t before = 0;
  for (const auto &[name, count] : choices.forwardLoops) {
    const LayerCost *l = cost.layer(name);
    if (!l)
      continue;
    // Mixed recomputation: the instances past the first S keep their input
    // alone and recompute their whole forward.
    const int64_t kept = keptCheckpoints(choices, before, count);
    before += count;
    if (kept < count) {
      double perFull =
          static_cast<double>(l->forwardFlops) / rates.flopsPerSecond;
      if (choices.checkpointsOnHost)
        perFull += 2.0 * static_cast<double>(l->boundaryBytes) /
                   rates.copyBytesPerSecond;
      seconds +=
          perFull * static_cast<double>((count - kept) * choices.microBatches);
    }
    double perInstance =
        static_cast<double>(l->recomputeFlops) / rates.flopsPerSecond;
    if (choices.checkpointsOnHost)
      perInstance += 2.0 * static_cast<double>(l->checkpointBytes) /
                     rates.copyBytesPerSecond;
    if (choices.checkpointEvery > 1 && choices.checkpointsOnHost)
      perInstance -= 2.0 * static_cast<double>(l->checkpointBytes) /
                     rates.copyBytesPerSecond;
    seconds += perInstance * static_cast<double>(kept * choices.microBatches);
    if (choices.checkpointEvery > 1) {
      // Segment checkpointing: only the segments' first instances copy their
      // checkpoint; the others' forward runs once more.
      int64_t segments = segmentCount(count, choices.checkpointEvery);
      if (choices.checkpointsOnHost)
        seconds += 2.0 * static_cast<double>(l->checkpointBytes) /
                   rates.copyBytesPerSecond *
                   static_cast<double>(segments * choices.microBatches);
      seconds += static_cast<double>(l->forwardFlops) / rates.flopsPerSecond *
                 static_cast<double>(
                     segmentExtraForwards(count, choices.checkpointEvery) *
                     choices.microBatches);
    }
  }
  return seconds;
}

MemoryPlan planMemory(const ModelCost &cost, const PlanChoices &choices) {
  // Every size saturates at bundle::kSizeCap (checkPlanSizes refuses it).
  using bundle::addSize, bundle::mulSize;
  MemoryPlan p;
  int64_t m = choices.microBatches;
  int64_t weights = 0, grads = 0, boundary = 0, maxCkpt = 0, ckptDevice = 0,
          workspace = 0;
  for (const LayerCost &l : cost.layers) {
    weights = std::max(weights, l.weightBytes);
    grads = std::max(grads, l.gradBytes);
    workspace = std::max(workspace, l.workspaceBytes);
    if (l.weightBytes > p.largestLayerWeights) {
      p.largestLayerWeights = l.weightBytes;
      p.largestLayer = l.name;
    }
  }
  int64_t before = 0;
  for (const auto &[name, count] : choices.forwardLoops) {
    const LayerCost *l = cost.layer(name);
    if (!l)
      continue;
    boundary = std::max(boundary, l->boundaryBytes);
    // Mixed recomputation: past the first S instances of the stack a
    // checkpoint is the input alone.
    const int64_t kept = keptCheckpoints(choices, before, count);
    before += count;
    if (kept < count) {
      maxCkpt = std::max(maxCkpt, l->boundaryBytes);
      ckptDevice = addSize(ckptDevice,
                           mulSize(mulSize(count - kept, m), l->boundaryBytes));
    }
    if (kept > 0)
      maxCkpt = std::max(maxCkpt, l->checkpointBytes);
    ckptDevice =
        addSize(ckptDevice,
                mulSize(mulSize(segmentCount(kept, choices.checkpointEvery), m),
                        l->checkpointBytes));
  }
  const int64_t k = std::max<int64_t>(1, choices.checkpointEvery);
  auto add = [&](std::string name, std::string kind, int64_t bytes,
                 bool host = false) {
    bundle::PlanBuffer b;
    b.name = std::move(name);
    b.kind = std::move(kind);
    b.space = host ? "host" : "device";
    b.bytes = bytes;
    p.buffers.push_back(std::move(b));
  };
  add("model.weights", "model_weights", cost.modelWeightBytes);
  add("model.grads", "model_grads", cost.modelGradBytes);
  for (int64_t i = 0; i < std::max(choices.prefetchDepth, k); ++i)
    add("weights." + std::to_string(i), "weights", weights);
  add("grads.0", "grads", grads);
  add("grads.1", "grads", grads);
  // With host checkpoints and several micro-batches the boundary
  // activations wait in host memory too, and the device keeps two input and
  // two output slots and two checkpoint staging slots (per micro-batch);
  // else every micro-batch's activations (ping-pong) and staging are on the
  // device.
  bool hostActivations = choices.checkpointsOnHost && m > 1;
  add("activations", "activations",
      hostActivations ? mulSize(4, boundary)
                      : mulSize(mulSize(2, m), boundary));
  if (hostActivations)
    add("activations.host", "activations", mulSize(m, boundary),
        /*host=*/true);
  if (choices.checkpointsOnHost) {
    add("checkpoints", "checkpoints",
        mulSize(hostActivations ? 2 : mulSize(2, m), maxCkpt));
    add("checkpoints.host", "checkpoints", ckptDevice, /*host=*/true);
  } else {
    add("checkpoints", "checkpoints", ckptDevice);
  }
  // Segment checkpointing: the inputs of the recomputed segment's k
  // instances, every micro-batch's.
  if (k > 1)
    add("segment", "activations", mulSize(mulSize(k, m), boundary));
  // With host activations the model-level values wait in host memory too:
  // one micro-batch's stage runs in the device slot at a time.
  if (hostActivations) {
    add("stage", "stage", cost.stageSlotBytes);
    add("stage.host", "stage", mulSize(m, cost.stageHostBytes),
        /*host=*/true);
  } else {
    add("stage", "stage", mulSize(m, cost.stageBytes));
  }
  add("workspace", "workspace", workspace);
  if (choices.immediateOptimizer)
    add("grads.host", "grads",
        mulSize(bundle::kGradRingSlots, std::max(grads, cost.modelGradBytes)),
        /*host=*/true);
  int64_t end = 0;
  for (bundle::PlanBuffer &b : p.buffers) {
    if (b.space == "host") {
      p.hostBytes = addSize(p.hostBytes, b.bytes);
      continue;
    }
    b.offset = bundle::alignOffset(end);
    end = addSize(b.offset, b.bytes);
  }
  p.devicePeak = end;
  return p;
}

llvm::Expected<int64_t> parseByteSize(llvm::StringRef text) {
  // The grammar lives in lib/ so that the runtime-only tools share it.
  mtc::Expected<int64_t> bytes = mtc::parseByteSize(text.str());
  if (!bytes)
    return llvm::createStringError(bytes.message());
  return *bytes;
}

std::string formatByteSize(int64_t bytes, bool roundUp) {
  // One formatter for the compiler and the runtime (lib/Support/ByteSize.h).
  return mtc::formatBytes(bytes, mtc::ByteFormat::compact(roundUp));
}

} // namespace mtc::analysis
