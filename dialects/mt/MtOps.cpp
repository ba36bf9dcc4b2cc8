//===- MtOps.cpp - Operations of the mt dialect -----------------*- C++ -*-===//
//
// Part of mtc. Verifiers delegate shape rules to lib/Support/Shape.h so that
// the dialect and the frontend accept exactly the same programs.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/MtDialect.h"

#include "lib/Bundle/OpKind.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mtc::mt;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

MtTensorType tensorOf(Value v) { return cast<MtTensorType>(v.getType()); }
mtc::Shape shapeOf(Value v) { return tensorOf(v).getShapeVector(); }

/// Reports a failed shape rule.
LogicalResult ruleFailed(Operation *op, const mtc::Status &err) {
  return op->emitOpError() << err.message();
}

/// The result must have \p expected as its shape.
LogicalResult expectShape(Operation *op, Value result,
                          const mtc::Shape &expected) {
  mtc::Shape actual = shapeOf(result);
  if (actual != expected)
    return op->emitOpError() << "result shape " << mtc::formatShape(actual)
                             << " does not match the inferred shape "
                             << mtc::formatShape(expected);
  return success();
}

LogicalResult requireFloat(Operation *op, Value v, StringRef what) {
  if (!tensorOf(v).isFloat())
    return op->emitOpError() << what << " must be f32 or bf16, got "
                             << tensorOf(v).getElementType();
  return success();
}

LogicalResult requireI32(Operation *op, Value v, StringRef what) {
  if (!tensorOf(v).getElementType().isInteger(32))
    return op->emitOpError()
           << what << " must be i32, got " << tensorOf(v).getElementType();
  return success();
}

/// All float ops produce f32 (bf16 parameters are read as f32).
LogicalResult requireF32Result(Operation *op, Value result) {
  if (!tensorOf(result).getElementType().isF32())
    return op->emitOpError()
           << "result must be f32, got " << tensorOf(result).getElementType();
  return success();
}

/// The single `func.func @forward` inside a model, layer or expert body.
func::FuncOp findForward(Block &body) {
  for (auto fn : body.getOps<func::FuncOp>())
    if (fn.getSymName() == "forward")
      return fn;
  return nullptr;
}

/// Checks the body of a model/layer/expert: only params, the listed nested
/// ops, and exactly one func.func @forward.
template <typename... Allowed>
LogicalResult verifyContainer(Operation *op, Block &body, StringRef what) {
  unsigned numFuncs = 0;
  for (Operation &nested : body) {
    if (auto fn = dyn_cast<func::FuncOp>(nested)) {
      if (fn.getSymName() == "forward")
        ++numFuncs;
      else if (fn.getSymName() != "backward" &&
               fn.getSymName() != "backward_full" &&
               fn.getSymName() != "forward_backward")
        return fn.emitOpError()
               << "in " << what
               << " must be @forward, @backward, @backward_full or "
                  "@forward_backward, got @"
               << fn.getSymName();
      continue;
    }
    if (isa<ParamOp, Allowed...>(nested))
      continue;
    return nested.emitOpError() << "is not allowed directly inside " << what;
  }
  if (numFuncs != 1)
    return op->emitOpError() << "must contain exactly one func.func @forward, "
                             << "found " << numFuncs;
  return success();
}

/// The model/layer/expert op whose forward contains \p op.
Operation *owningContainer(Operation *op) {
  auto fn = op->getParentOfType<func::FuncOp>();
  if (!fn)
    return nullptr;
  return fn->getParentOp();
}

} // namespace

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// `normal [0.02]`, `zeros`, `uniform [-0.1, 0.1]`.
static ParseResult parseInit(OpAsmParser &parser, InitKindAttr &kind,
                             DenseF64ArrayAttr &args) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<InitKind> parsed = symbolizeInitKind(keyword);
  if (!parsed)
    return parser.emitError(loc, "unknown initializer '")
           << keyword
           << "' (expected zeros, ones, normal, scaled_normal or uniform)";
  kind = InitKindAttr::get(parser.getContext(), *parsed);
  SmallVector<double> values;
  if (succeeded(parser.parseOptionalLSquare())) {
    if (failed(parser.parseOptionalRSquare())) {
      do {
        double v;
        if (parser.parseFloat(v))
          return failure();
        values.push_back(v);
      } while (succeeded(parser.parseOptionalComma()));
      if (parser.parseRSquare())
        return failure();
    }
  }
  args = DenseF64ArrayAttr::get(parser.getContext(), values);
  return success();
}

static void printInit(OpAsmPrinter &printer, Operation *, InitKindAttr kind,
                      DenseF64ArrayAttr args) {
  printer << stringifyInitKind(kind.getValue());
  if (!args || args.empty())
    return;
  printer << " [";
  llvm::interleaveComma(args.asArrayRef(), printer, [&](double v) {
    printer.printFloat(llvm::APFloat(v));
  });
  printer << "]";
}

/// unary_grad's kind as its bare name: `silu`, `gelu_tanh`.
static ParseResult parseUnaryFn(OpAsmParser &parser, UnaryFnAttr &fn) {
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<UnaryFn> parsed = symbolizeUnaryFn(keyword);
  if (!parsed)
    return parser.emitError(loc, "unknown elementwise function '")
           << keyword << "' (expected one of " << mtc::bundle::unaryFnNames()
           << ")";
  fn = UnaryFnAttr::get(parser.getContext(), *parsed);
  return success();
}

static void printUnaryFn(OpAsmPrinter &printer, Operation *, UnaryFnAttr fn) {
  printer << stringifyUnaryFn(fn.getValue());
}

/// The end of mt.slice and mt.pad: an integer, or `S` (stored as kDimS).
static ParseResult parseSliceEnd(OpAsmParser &parser, IntegerAttr &end) {
  Builder b(parser.getContext());
  if (succeeded(parser.parseOptionalKeyword("S"))) {
    end = b.getI64IntegerAttr(mtc::kDimS);
    return success();
  }
  int64_t v;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseInteger(v))
    return failure();
  if (v < 0)
    return parser.emitError(loc, "end must be a non-negative integer or S");
  end = b.getI64IntegerAttr(v);
  return success();
}

static void printSliceEnd(OpAsmPrinter &printer, Operation *, IntegerAttr end) {
  if (end.getInt() == mtc::kDimS)
    printer << "S";
  else
    printer << end.getInt();
}

#define GET_OP_CLASSES
#include "dialects/mt/MtOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

func::FuncOp ModelOp::getForward() { return findForward(getBody().front()); }

LayerOp ModelOp::lookupLayer(StringRef name) {
  return dyn_cast_or_null<LayerOp>(mlir::SymbolTable::lookupSymbolIn(
      getOperation(), StringAttr::get(getContext(), name)));
}

LogicalResult ModelOp::verifyRegions() {
  if (failed(verifyContainer<LayerOp>(*this, getBody().front(), "mt.model")))
    return failure();
  func::FuncOp fn = getForward();
  FunctionType type = fn.getFunctionType();
  if (type.getNumResults() != 1)
    return fn.emitOpError() << "of a model must return exactly the loss";
  auto loss = dyn_cast<MtTensorType>(type.getResult(0));
  if (!loss || loss.getRank() != 0 || !loss.getElementType().isF32())
    return fn.emitOpError() << "of a model must return a scalar f32 loss, got "
                            << type.getResult(0);
  return success();
}

func::FuncOp LayerOp::getForward() { return findForward(getBody().front()); }

MtTensorType LayerOp::getActivationType() {
  func::FuncOp fn = getForward();
  if (!fn || fn.getFunctionType().getNumInputs() != 1)
    return {};
  return dyn_cast<MtTensorType>(fn.getFunctionType().getInput(0));
}

LogicalResult LayerOp::verifyRegions() {
  if (failed(verifyContainer<ExpertOp>(*this, getBody().front(), "mt.layer")))
    return failure();
  // The forward maps one activation to one of the same type; after
  // mtc-autodiff with save=all it also returns the intermediates its
  // backward takes.
  FunctionType type = getForward().getFunctionType();
  if (type.getNumInputs() != 1 || type.getNumResults() < 1 ||
      type.getInput(0) != type.getResult(0))
    return getForward().emitOpError()
           << "of a layer must take one activation and return one of the "
              "same type, got "
           << type;
  return success();
}

func::FuncOp ExpertOp::getForward() { return findForward(getBody().front()); }

LogicalResult ExpertOp::verifyRegions() {
  if (failed(verifyContainer<>(*this, getBody().front(), "mt.expert")))
    return failure();
  FunctionType type = getForward().getFunctionType();
  auto in = type.getNumInputs() == 1 ? dyn_cast<MtTensorType>(type.getInput(0))
                                     : MtTensorType();
  if (!in || type.getNumResults() != 1 || type.getResult(0) != in ||
      in.getRank() != 2 || in.getShape()[0] != mtc::kDimT)
    return getForward().emitOpError()
           << "of an expert must map [T, D] to [T, D], got " << type;
  return success();
}

int64_t ParamOp::getNumElements() {
  int64_t n = 1;
  for (int64_t d : getTensorType().getShape())
    n *= d;
  return n;
}

LogicalResult ParamOp::verify() {
  MtTensorType type = getTensorType();
  for (int64_t d : type.getShape())
    if (mtc::isSymbolic(d))
      return emitOpError() << "shape must be static, got "
                           << mtc::formatShape(type.getShapeVector());
  if (!type.isFloat())
    return emitOpError() << "must be f32 or bf16, got "
                         << type.getElementType();
  size_t expected = 0;
  switch (getInit()) {
  case InitKind::Zeros:
  case InitKind::Ones:
    expected = 0;
    break;
  case InitKind::Normal:
  case InitKind::ScaledNormal:
    expected = 1;
    break;
  case InitKind::Uniform:
    expected = 2;
    break;
  }
  if (getInitArgs().size() != expected)
    return emitOpError() << "initializer '" << stringifyInitKind(getInit())
                         << "' takes " << expected << " argument(s), got "
                         << getInitArgs().size();
  if ((getInit() == InitKind::Normal || getInit() == InitKind::ScaledNormal) &&
      !(getInitArgs()[0] >= 0))
    return emitOpError() << "standard deviation must be non-negative";
  if (getInit() == InitKind::Uniform && !(getInitArgs()[0] <= getInitArgs()[1]))
    return emitOpError() << "uniform bounds must satisfy lo <= hi";
  return success();
}

LogicalResult ParamRefOp::verifySymbolUses(SymbolTableCollection &tables) {
  Operation *container = owningContainer(*this);
  if (!container || !isa<ModelOp, LayerOp, ExpertOp>(container))
    return emitOpError() << "must be inside the forward of a model, layer or "
                            "expert";
  auto param = dyn_cast_or_null<ParamOp>(
      tables.lookupSymbolIn(container, getNameAttr()));
  if (!param)
    return emitOpError() << "'" << getName()
                         << "' is not a parameter of the enclosing "
                         << container->getName();
  if (param.getType() != getResult().getType())
    return emitOpError() << "type " << getResult().getType()
                         << " does not match parameter type "
                         << param.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Model-body ops
//===----------------------------------------------------------------------===//

void ApplyLayersOp::build(OpBuilder &builder, OperationState &state,
                          StringRef layer, int64_t first, int64_t count,
                          Value input) {
  build(builder, state, input.getType(),
        FlatSymbolRefAttr::get(builder.getContext(), layer),
        builder.getI64IntegerAttr(first), builder.getI64IntegerAttr(count),
        input);
}

LogicalResult ApplyLayersOp::verify() {
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  return success();
}

LogicalResult ApplyLayersOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto model = dyn_cast_or_null<ModelOp>(owningContainer(*this));
  if (!model)
    return emitOpError() << "is only valid in the forward of an mt.model";
  auto layer =
      dyn_cast_or_null<LayerOp>(tables.lookupSymbolIn(model, getLayerAttr()));
  if (!layer)
    return emitOpError() << "'" << getLayer() << "' is not a layer of @"
                         << model.getSymName();
  if (getFirst() + getCount() > layer.getCount())
    return emitOpError() << "applies instances [" << getFirst() << ", "
                         << getFirst() + getCount() << ") but layer @"
                         << layer.getSymName() << " has " << layer.getCount();
  MtTensorType act = layer.getActivationType();
  if (act && act != getInput().getType())
    return emitOpError() << "input type " << getInput().getType()
                         << " does not match layer activation type " << act;
  return success();
}

//===----------------------------------------------------------------------===//
// Tensor ops
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  MtTensorType t = tensorOf(getResult());
  if (t.getRank() != 0 || !t.getElementType().isF32())
    return emitOpError() << "result must be a scalar f32";
  return success();
}

LogicalResult EmbeddingOp::verify() {
  if (failed(requireI32(*this, getIds(), "ids")) ||
      failed(requireFloat(*this, getTable(), "table")) ||
      failed(requireF32Result(*this, getResult())))
    return failure();
  mtc::Expected<mtc::Shape> out =
      mtc::rules::embedding(shapeOf(getIds()), shapeOf(getTable()));
  if (!out)
    return ruleFailed(*this, out.status());
  return expectShape(*this, getResult(), *out);
}

LogicalResult MatMulOp::verify() {
  if (failed(requireFloat(*this, getLhs(), "lhs")) ||
      failed(requireFloat(*this, getRhs(), "rhs")) ||
      (getBias() && failed(requireFloat(*this, getBias(), "bias"))) ||
      failed(requireF32Result(*this, getResult())))
    return failure();
  mtc::Shape bias;
  if (getBias())
    bias = shapeOf(getBias());
  mtc::Expected<mtc::Shape> out = mtc::rules::matmul(
      shapeOf(getLhs()), shapeOf(getRhs()), getBias() ? &bias : nullptr);
  if (!out)
    return ruleFailed(*this, out.status());
  return expectShape(*this, getResult(), *out);
}

template <typename BinOp> static LogicalResult verifyBinary(BinOp op) {
  if (failed(requireFloat(op, op.getLhs(), "lhs")) ||
      failed(requireFloat(op, op.getRhs(), "rhs")) ||
      failed(requireF32Result(op, op.getResult())))
    return failure();
  mtc::Expected<mtc::Shape> out =
      mtc::rules::broadcast(shapeOf(op.getLhs()), shapeOf(op.getRhs()));
  if (!out)
    return ruleFailed(op, out.status());
  return expectShape(op, op.getResult(), *out);
}

LogicalResult AddOp::verify() { return verifyBinary(*this); }
LogicalResult SubOp::verify() { return verifyBinary(*this); }
LogicalResult MulOp::verify() { return verifyBinary(*this); }
LogicalResult DivOp::verify() { return verifyBinary(*this); }

// The unary ops of MT_UnaryOp (neg ... square) get theirs from MtOps.td.
LogicalResult SoftcapOp::verify() {
  return requireFloat(*this, getInput(), "input");
}

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError() << "approximate must be \"none\" or \"tanh\", got \""
                         << getApproximate() << "\"";
  return requireFloat(*this, getInput(), "input");
}

template <typename RedOp> static LogicalResult verifyReduce(RedOp op) {
  if (failed(requireFloat(op, op.getInput(), "input")) ||
      failed(requireF32Result(op, op.getResult())))
    return failure();
  mtc::Expected<mtc::Shape> out =
      mtc::rules::reduce(shapeOf(op.getInput()), op.getAxis(), op.getKeepdim());
  if (!out)
    return ruleFailed(op, out.status());
  return expectShape(op, op.getResult(), *out);
}

LogicalResult SumOp::verify() { return verifyReduce(*this); }
LogicalResult MeanOp::verify() { return verifyReduce(*this); }
LogicalResult MaxOp::verify() { return verifyReduce(*this); }

LogicalResult SoftmaxOp::verify() {
  mtc::Expected<size_t> axis =
      mtc::rules::axis(getAxis(), tensorOf(getInput()).getRank());
  if (!axis)
    return ruleFailed(*this, axis.status());
  return requireFloat(*this, getInput(), "input");
}

LogicalResult RmsNormOp::verify() {
  if (failed(requireFloat(*this, getInput(), "input")) ||
      failed(requireFloat(*this, getWeight(), "weight")) ||
      failed(requireF32Result(*this, getResult())))
    return failure();
  mtc::Shape w = shapeOf(getWeight());
  if (mtc::Status st = mtc::rules::norm(shapeOf(getInput()), w, nullptr); !st)
    return ruleFailed(*this, st);
  if (!(getEps().convertToDouble() > 0))
    return emitOpError() << "eps must be positive";
  return expectShape(*this, getResult(), shapeOf(getInput()));
}

LogicalResult LayerNormOp::verify() {
  if (failed(requireFloat(*this, getInput(), "input")) ||
      failed(requireFloat(*this, getWeight(), "weight")) ||
      (getBias() && failed(requireFloat(*this, getBias(), "bias"))) ||
      failed(requireF32Result(*this, getResult())))
    return failure();
  mtc::Shape b;
  if (getBias())
    b = shapeOf(getBias());
  if (mtc::Status st = mtc::rules::norm(
          shapeOf(getInput()), shapeOf(getWeight()), getBias() ? &b : nullptr);
      !st)
    return ruleFailed(*this, st);
  if (!(getEps().convertToDouble() > 0))
    return emitOpError() << "eps must be positive";
  return expectShape(*this, getResult(), shapeOf(getInput()));
}

LogicalResult ReshapeOp::verify() {
  if (tensorOf(getInput()).getElementType() !=
      tensorOf(getResult()).getElementType())
    return emitOpError() << "cannot change the element type";
  if (mtc::Status st =
          mtc::rules::reshape(shapeOf(getInput()), shapeOf(getResult()));
      !st)
    return ruleFailed(*this, st);
  return success();
}

LogicalResult TransposeOp::verify() {
  if (tensorOf(getInput()).getElementType() !=
      tensorOf(getResult()).getElementType())
    return emitOpError() << "cannot change the element type";
  std::vector<int64_t> perm(getPerm().begin(), getPerm().end());
  mtc::Expected<mtc::Shape> out =
      mtc::rules::transpose(shapeOf(getInput()), perm);
  if (!out)
    return ruleFailed(*this, out.status());
  return expectShape(*this, getResult(), *out);
}

LogicalResult SplitOp::verify() {
  std::vector<int64_t> sizes(getSizes().begin(), getSizes().end());
  mtc::Expected<std::vector<mtc::Shape>> outs =
      mtc::rules::split(shapeOf(getInput()), sizes, getAxis());
  if (!outs)
    return ruleFailed(*this, outs.status());
  if (outs->size() != getNumResults())
    return emitOpError() << "has " << getNumResults() << " results but "
                         << outs->size() << " sizes";
  for (auto [result, shape] : llvm::zip(getResults(), *outs)) {
    if (tensorOf(result).getElementType() !=
        tensorOf(getInput()).getElementType())
      return emitOpError() << "cannot change the element type";
    if (failed(expectShape(*this, result, shape)))
      return failure();
  }
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "needs at least one input";
  std::vector<mtc::Shape> shapes;
  for (Value v : getInputs()) {
    if (tensorOf(v).getElementType() != tensorOf(getResult()).getElementType())
      return emitOpError() << "inputs and result must share an element type";
    shapes.push_back(shapeOf(v));
  }
  mtc::Expected<mtc::Shape> out = mtc::rules::concat(shapes, getAxis());
  if (!out)
    return ruleFailed(*this, out.status());
  return expectShape(*this, getResult(), *out);
}

LogicalResult SliceOp::verify() {
  if (tensorOf(getInput()).getElementType() !=
      tensorOf(getResult()).getElementType())
    return emitOpError() << "cannot change the element type";
  mtc::Expected<mtc::Shape> out =
      mtc::rules::slice(shapeOf(getInput()), getAxis(), getStart(), getEnd());
  if (!out)
    return ruleFailed(*this, out.status());
  return expectShape(*this, getResult(), *out);
}

LogicalResult RopeOp::verify() {
  if (failed(requireFloat(*this, getInput(), "input")))
    return failure();
  if (mtc::Status st = mtc::rules::rope(shapeOf(getInput()),
                                        getFraction().convertToDouble());
      !st)
    return ruleFailed(*this, st);
  if (!(getTheta().convertToDouble() > 0))
    return emitOpError() << "theta must be positive";
  if (auto scaling = getScaling()) {
    if (*scaling != "llama3")
      return emitOpError() << "unsupported rope scaling \"" << *scaling
                           << "\" (supported: \"llama3\")";
    if (!getFactor() || !getLowFreqFactor() || !getHighFreqFactor() ||
        !getOriginalMaxPosition())
      return emitOpError() << "llama3 scaling needs factor, low_freq_factor, "
                              "high_freq_factor and original_max_position";
  }
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(requireFloat(*this, getQ(), "q")) ||
      failed(requireFloat(*this, getK(), "k")) ||
      failed(requireFloat(*this, getV(), "v")) ||
      failed(requireF32Result(*this, getResult())))
    return failure();
  mtc::Expected<mtc::Shape> out =
      mtc::rules::attention(shapeOf(getQ()), shapeOf(getK()), shapeOf(getV()));
  if (!out)
    return ruleFailed(*this, out.status());
  if (getWindow() < 0)
    return emitOpError() << "window must be non-negative";
  if (getSoftcap().convertToDouble() < 0 || getScale().convertToDouble() < 0)
    return emitOpError() << "softcap and scale must be non-negative";
  return expectShape(*this, getResult(), *out);
}

LogicalResult MoeOp::verify() {
  if (failed(requireFloat(*this, getInput(), "input")) ||
      failed(requireFloat(*this, getRouter(), "router")))
    return failure();
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  if (getAuxLoss().convertToDouble() < 0)
    return emitOpError() << "aux_loss must be non-negative";
  return success();
}

/// The expert an mt.moe / mt.moe_grad names must belong to the enclosing
/// layer and fit its router and top_k.
template <typename OpTy>
static LogicalResult verifyMoeExpert(OpTy op, SymbolTableCollection &tables,
                                     StringRef where) {
  auto layer = dyn_cast_or_null<LayerOp>(owningContainer(op));
  if (!layer)
    return op.emitOpError()
           << "is only valid in " << where << " of an mt.layer";
  auto expert = dyn_cast_or_null<ExpertOp>(
      tables.lookupSymbolIn(layer, op.getExpertAttr()));
  if (!expert)
    return op.emitOpError() << "'" << op.getExpert()
                            << "' is not an expert of @" << layer.getSymName();
  if (mtc::Status st = mtc::rules::moe(
          shapeOf(op.getInput()), shapeOf(op.getRouter()), expert.getCount());
      !st)
    return ruleFailed(op, st);
  if (op.getTopK() > expert.getCount())
    return op.emitOpError() << "top_k " << op.getTopK() << " exceeds the "
                            << expert.getCount() << " experts";
  return success();
}

LogicalResult MoeOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyMoeExpert(*this, tables, "the forward");
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(requireFloat(*this, getLogits(), "logits")) ||
      failed(requireI32(*this, getTargets(), "targets")) ||
      failed(requireF32Result(*this, getResult())))
    return failure();
  if (mtc::Status st =
          mtc::rules::crossEntropy(shapeOf(getLogits()), shapeOf(getTargets()));
      !st)
    return ruleFailed(*this, st);
  return expectShape(*this, getResult(), {});
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

LogicalResult ParamGradOp::verifySymbolUses(SymbolTableCollection &tables) {
  Operation *container = owningContainer(*this);
  if (!container || !isa<ModelOp, LayerOp, ExpertOp>(container))
    return emitOpError() << "must be inside a function of a model, layer or "
                            "expert";
  auto param = dyn_cast_or_null<ParamOp>(
      tables.lookupSymbolIn(container, getNameAttr()));
  if (!param)
    return emitOpError() << "'" << getName()
                         << "' is not a parameter of the enclosing "
                         << container->getName();
  if (shapeOf(getGrad()) != param.getTensorType().getShapeVector())
    return emitOpError() << "gradient shape "
                         << mtc::formatShape(shapeOf(getGrad()))
                         << " does not match parameter shape "
                         << mtc::formatShape(
                                param.getTensorType().getShapeVector());
  return success();
}

LogicalResult WeightGradOp::verify() {
  mtc::Expected<mtc::Shape> out =
      mtc::rules::weightGrad(shapeOf(getInput()), shapeOf(getGrad()));
  if (!out)
    return ruleFailed(*this, out.status());
  return expectShape(*this, getResult(), *out);
}

LogicalResult ReduceToOp::verify() {
  if (mtc::Status st =
          mtc::rules::reduceTo(shapeOf(getInput()), shapeOf(getResult()));
      !st)
    return ruleFailed(*this, st);
  return success();
}

// mt::UnaryFn (MtUnaryFns.td.in) and bundle::UnaryFn are both generated
// from UnaryFns.def: the same enumerators with the same numbers.
#define MTC_UNARY_FN(Enum, Name, Param)                                        \
  static_assert(static_cast<int>(UnaryFn::Enum) ==                             \
                static_cast<int>(mtc::bundle::UnaryFn::Enum));
#include "lib/Bundle/UnaryFns.def"

std::optional<UnaryFnCall> mtc::mt::getUnaryFnCall(Operation *op) {
  if (auto g = dyn_cast<UnaryGradOp>(op))
    return UnaryFnCall{g.getKind(), g.getParam().convertToDouble(), true};
  if (auto g = dyn_cast<GeluOp>(op))
    return UnaryFnCall{g.getApproximate() == "tanh" ? UnaryFn::GeluTanh
                                                    : UnaryFn::GeluErf};
  if (auto c = dyn_cast<SoftcapOp>(op))
    return UnaryFnCall{UnaryFn::Softcap, c.getCap().convertToDouble()};
  if (!isa_and_nonnull<MtDialect>(op->getDialect()) ||
      op->getNumOperands() != 1)
    return std::nullopt;
  std::optional<UnaryFn> fn = symbolizeUnaryFn(op->getName().stripDialect());
  if (!fn ||
      mtc::bundle::unaryFnTakesParam(static_cast<mtc::bundle::UnaryFn>(*fn)))
    return std::nullopt;
  return UnaryFnCall{*fn};
}

LogicalResult UnaryGradOp::verify() {
  if (getInput().getType() != getGrad().getType() ||
      getInput().getType() != getResult().getType())
    return emitOpError() << "input, gradient and result must have one type";
  return success();
}

LogicalResult ReduceGradOp::verify() {
  if (getKind() != "sum" && getKind() != "mean" && getKind() != "max")
    return emitOpError() << "kind must be sum, mean or max";
  mtc::Expected<mtc::Shape> out =
      mtc::rules::reduce(shapeOf(getInput()), getAxis(), getKeepdim());
  if (!out)
    return ruleFailed(*this, out.status());
  if (*out != shapeOf(getGrad()))
    return emitOpError() << "gradient shape does not match the reduction";
  return expectShape(*this, getResult(), shapeOf(getInput()));
}

LogicalResult PadOp::verify() {
  if (mtc::Status st =
          mtc::rules::pad(shapeOf(getInput()), shapeOf(getResult()), getAxis(),
                          getStart(), getEnd());
      !st)
    return ruleFailed(*this, st);
  return success();
}

LogicalResult MoeGradOp::verify() {
  if (failed(requireFloat(*this, getInput(), "input")) ||
      failed(requireFloat(*this, getRouter(), "router")) ||
      failed(requireFloat(*this, getGrad(), "gradient")) ||
      failed(requireF32Result(*this, getInputGrad())) ||
      failed(requireF32Result(*this, getRouterGrad())))
    return failure();
  if (shapeOf(getGrad()) != shapeOf(getInput()))
    return emitOpError() << "gradient shape "
                         << mtc::formatShape(shapeOf(getGrad()))
                         << " does not match the input shape "
                         << mtc::formatShape(shapeOf(getInput()));
  if (failed(expectShape(*this, getInputGrad(), shapeOf(getInput()))) ||
      failed(expectShape(*this, getRouterGrad(), shapeOf(getRouter()))))
    return failure();
  if (getAuxLoss().convertToDouble() < 0)
    return emitOpError() << "aux_loss must be non-negative";
  return success();
}

LogicalResult MoeGradOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyMoeExpert(*this, tables, "a function");
}

LogicalResult
ApplyLayersGradOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto model = dyn_cast_or_null<ModelOp>(owningContainer(*this));
  if (!model)
    return emitOpError() << "is only valid in a function of an mt.model";
  auto layer =
      dyn_cast_or_null<LayerOp>(tables.lookupSymbolIn(model, getLayerAttr()));
  if (!layer)
    return emitOpError() << "'" << getLayer() << "' is not a layer of @"
                         << model.getSymName();
  if (getFirst() + getCount() > layer.getCount())
    return emitOpError() << "instances out of range";
  return success();
}

//===----------------------------------------------------------------------===//
// Fused regions
//===----------------------------------------------------------------------===//

/// The ops whose row of lib/Bundle/Ops.def says Fusable (the mt op of row
/// Kind is KindOp).
bool FusedOp::isFusable(Operation *op) {
#define MTC_WHERE_Model(Kind)
#define MTC_WHERE_Layer(Kind)
#define MTC_WHERE_Any(Kind)
#define MTC_WHERE_Fusable(Kind) || isa<Kind##Op>(op)
#define MTC_OP(Kind, Name, MinOperands, MaxOperands, MinResults, MaxResults,   \
               Symbol, Where, ...)                                             \
  MTC_WHERE_##Where(Kind)
  return false
#include "lib/Bundle/Ops.def"
      ;
#undef MTC_WHERE_Model
#undef MTC_WHERE_Layer
#undef MTC_WHERE_Any
#undef MTC_WHERE_Fusable
}

bool FusedOp::isReduction(Operation *op) {
  return isa<SumOp, MeanOp, MaxOp>(op);
}

bool FusedOp::hasReductions() {
  return llvm::any_of(getBody().front(),
                      [](Operation &op) { return isReduction(&op); });
}

llvm::SmallPtrSet<Operation *, 8> FusedOp::getRowOps() {
  llvm::SmallPtrSet<Operation *, 8> rows;
  for (Operation &op : getBody().front().without_terminator())
    if (isReduction(&op) || llvm::any_of(op.getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && rows.contains(def);
        }))
      rows.insert(&op);
  return rows;
}

mtc::Shape FusedOp::getIterationShape() {
  for (Operation &op : getBody().front())
    if (isReduction(&op))
      return shapeOf(op.getOperand(0));
  if (getNumResults() == 0)
    return {};
  return shapeOf(getResult(0));
}

namespace {
/// Whether a non-reduction row op reads block argument \p arg.
bool readPerRow(BlockArgument arg,
                const llvm::SmallPtrSet<Operation *, 8> &rowOps) {
  return llvm::any_of(arg.getUsers(), [&](Operation *u) {
    return rowOps.contains(u) && !FusedOp::isReduction(u);
  });
}

bool isStaticScalar(const mtc::Shape &s) {
  int64_t numel = 1;
  for (int64_t d : s)
    numel *= d;
  return numel == 1 && llvm::none_of(s, mtc::isSymbolic);
}
} // namespace

FusedOp::InputAccess FusedOp::getInputAccess(unsigned index) {
  mtc::Shape in = shapeOf(getInputs()[index]), it = getIterationShape();
  if (isStaticScalar(in))
    return in == it ? InputAccess::Full : InputAccess::Scalar;
  if (readPerRow(getBody().front().getArgument(index), getRowOps()))
    return InputAccess::Row;
  if (in == it)
    return InputAccess::Full;
  if (!it.empty() && in.size() == it.size() &&
      std::equal(in.begin(), in.end() - 1, it.begin()) && in.back() == 1)
    return InputAccess::Row; // [R..., 1] broadcast over the last axis
  return InputAccess::Suffix;
}

LogicalResult FusedOp::verify() {
  if (getNumResults() == 0)
    return emitOpError() << "must have at least one result";
  for (Value r : getResults())
    if (!tensorOf(r).getElementType().isF32())
      return emitOpError() << "results must be f32";
  for (auto [i, v] : llvm::enumerate(getInputs()))
    if (!tensorOf(v).isFloat())
      return emitOpError() << "input " << i << " must be f32 or bf16";
  return success();
}

LogicalResult FusedOp::verifyRegions() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body takes " << body.getNumArguments()
                         << " arguments for " << getInputs().size()
                         << " inputs";
  for (auto [arg, in] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != in.getType())
      return emitOpError() << "body argument types must match the inputs";
  for (Operation &op : body.without_terminator())
    if (!isFusable(&op))
      return op.emitOpError() << "cannot appear in an mt.fused body (only "
                                 "elementwise ops, constants and reductions "
                                 "over the last axis)";
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yielded types must match the results";

  mtc::Shape it = getIterationShape();
  llvm::SmallPtrSet<Operation *, 8> rowOps = getRowOps();
  mtc::Shape rowKeep = it, rowDrop = it;
  if (!it.empty()) {
    rowKeep.back() = 1;
    rowDrop.pop_back();
  }
  auto isRowValue = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && rowOps.contains(def);
  };
  for (Operation &op : body.without_terminator()) {
    if (isReduction(&op)) {
      Value x = op.getOperand(0);
      if (it.empty() || shapeOf(x) != it ||
          op.getAttrOfType<IntegerAttr>("axis").getInt() !=
              static_cast<int64_t>(it.size()) - 1)
        return op.emitOpError()
               << "in an mt.fused body must reduce the last axis of the "
                  "iteration shape "
               << mtc::formatShape(it);
      if (isRowValue(x))
        return op.emitOpError() << "in an mt.fused body cannot reduce a value "
                                   "computed from a reduction";
      continue;
    }
    if (!rowOps.contains(&op))
      continue;
    // Row phase: row-shaped result; operands are scalars or of that shape
    // (row values, or inputs read per row).
    mtc::Shape r = shapeOf(op.getResult(0));
    if (r != rowKeep && r != rowDrop)
      return op.emitOpError()
             << "reads a reduction's result in an mt.fused body, so its "
                "result must have a row shape ("
             << mtc::formatShape(rowDrop) << " or " << mtc::formatShape(rowKeep)
             << "): a region cannot broadcast a row value back over "
                "the iteration shape";
    for (Value v : op.getOperands()) {
      mtc::Shape s = shapeOf(v);
      bool ok = isRowValue(v)           ? s == r
                : isa<BlockArgument>(v) ? (s == r || isStaticScalar(s))
                                        : isa<ConstantOp>(v.getDefiningOp());
      if (!ok)
        return op.emitOpError()
               << "in the row phase of an mt.fused body: operand of shape "
               << mtc::formatShape(s)
               << " is neither a row value, a scalar nor an input of shape "
               << mtc::formatShape(r);
    }
  }
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    mtc::Shape in = shapeOf(arg);
    if (isStaticScalar(in))
      continue;
    if (in == it)
      continue;
    if (readPerRow(arg, rowOps)) {
      if (in != rowKeep && llvm::any_of(arg.getUsers(), [&](Operation *u) {
            return !rowOps.contains(u) || isReduction(u);
          }))
        return emitOpError()
               << "input " << i << " is read both per row and per element";
      continue;
    }
    if (in == rowKeep)
      continue; // row r of the iteration shape reads element r
    bool suffix = in.size() <= it.size() &&
                  std::equal(in.begin(), in.end(), it.end() - in.size());
    if (llvm::any_of(in, mtc::isSymbolic) || !suffix)
      return emitOpError() << "input " << i << " of shape "
                           << mtc::formatShape(in)
                           << " is neither the iteration shape "
                           << mtc::formatShape(it)
                           << ", a scalar, a static suffix of it, nor "
                           << mtc::formatShape(rowKeep);
  }
  for (Value v : yield.getValues())
    if (!isRowValue(v) && shapeOf(v) != it)
      return emitOpError() << "results must have the iteration shape "
                           << mtc::formatShape(it) << " or be row values";
  return success();
}

//===----------------------------------------------------------------------===//
// Fused LM head + cross-entropy
//===----------------------------------------------------------------------===//

int64_t LinearCrossEntropyOp::getVocabulary() {
  mtc::Shape w = shapeOf(getWeight());
  return getTransposeWeight() ? w[0] : w[1];
}

LogicalResult LinearCrossEntropyOp::verify() {
  if (failed(requireFloat(*this, getInput(), "input")) ||
      failed(requireFloat(*this, getWeight(), "weight")) ||
      failed(requireI32(*this, getTargets(), "targets")) ||
      failed(requireF32Result(*this, getResult())))
    return failure();
  if (mtc::Status st = mtc::rules::linearCrossEntropy(
          shapeOf(getInput()), shapeOf(getWeight()), getTransposeWeight(),
          shapeOf(getTargets()));
      !st)
    return ruleFailed(*this, st);
  if (getSoftcap().convertToDouble() < 0)
    return emitOpError() << "softcap must be non-negative";
  return expectShape(*this, getResult(), {});
}
