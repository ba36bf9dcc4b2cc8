//===- MLIRGen.cpp - CheckedModel to the mt dialect -------------*- C++ -*-===//
//
// Part of mtc. A one-to-one translation: Sema has already resolved names and
// inferred every type, so each checked operation becomes one mt op.
//
//===----------------------------------------------------------------------===//

#include "frontend/MLIRGen.h"

#include "dialects/mt/MtDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace mtc {
namespace {

class Generator {
public:
  Generator(MLIRContext &ctx, StringRef fileName)
      : ctx(ctx), builder(&ctx), file(StringAttr::get(&ctx, fileName)) {}

  OwningOpRef<ModuleOp> run(const CheckedModel &model) {
    OwningOpRef<ModuleOp> module = ModuleOp::create(loc({}));
    builder.setInsertionPointToEnd(module->getBody());
    auto modelOp =
        mt::ModelOp::create(builder, loc({}), model.name, configAttr(model));
    Block *body = builder.createBlock(&modelOp.getBody());
    builder.setInsertionPointToEnd(body);
    for (const Param &p : model.params)
      genParam(p);
    for (const Layer &layer : model.layers) {
      builder.setInsertionPointToEnd(body);
      genLayer(layer);
    }
    builder.setInsertionPointToEnd(body);
    genFunction(model.forward, /*loc=*/{});
    if (failed(verify(*module)))
      return nullptr;
    return module;
  }

private:
  Location loc(SourceLoc l) {
    if (l.line == 0)
      return FileLineColLoc::get(file, 0, 0);
    return FileLineColLoc::get(file, l.line, l.col);
  }

  Type elementType(DType t) {
    switch (t) {
    case DType::F32:
      return builder.getF32Type();
    case DType::BF16:
      return builder.getBF16Type();
    case DType::I32:
      return builder.getI32Type();
    }
    llvm_unreachable("unknown dtype");
  }

  mt::MtTensorType tensorType(const ValueType &t) {
    return mt::MtTensorType::get(&ctx, t.shape, elementType(t.dtype));
  }

  DictionaryAttr configAttr(const CheckedModel &model) {
    SmallVector<NamedAttribute> entries;
    for (const auto &[name, value] : model.config) {
      Attribute attr = value.isInt
                           ? Attribute(builder.getI64IntegerAttr(
                                 static_cast<int64_t>(value.value)))
                           : Attribute(builder.getF64FloatAttr(value.value));
      entries.push_back(builder.getNamedAttr(name, attr));
    }
    return builder.getDictionaryAttr(entries);
  }

  static mt::InitKind initKind(ast::InitKind k) {
    switch (k) {
    case ast::InitKind::Zeros:
      return mt::InitKind::Zeros;
    case ast::InitKind::Ones:
      return mt::InitKind::Ones;
    case ast::InitKind::Normal:
      return mt::InitKind::Normal;
    case ast::InitKind::ScaledNormal:
      return mt::InitKind::ScaledNormal;
    case ast::InitKind::Uniform:
      return mt::InitKind::Uniform;
    }
    llvm_unreachable("unknown init kind");
  }

  void genParam(const Param &p) {
    SmallVector<double> args;
    switch (p.init) {
    case ast::InitKind::Normal:
    case ast::InitKind::ScaledNormal:
      args = {p.initA};
      break;
    case ast::InitKind::Uniform:
      args = {p.initA, p.initB};
      break;
    default:
      break;
    }
    mt::ParamOp::create(builder, loc(p.loc), builder.getStringAttr(p.name),
                        TypeAttr::get(tensorType({p.shape, p.dtype})),
                        mt::InitKindAttr::get(&ctx, initKind(p.init)),
                        builder.getDenseF64ArrayAttr(args));
  }

  void genLayer(const Layer &layer) {
    auto op =
        mt::LayerOp::create(builder, loc(layer.loc), layer.name, layer.count);
    Block *body = builder.createBlock(&op.getBody());
    for (const Param &p : layer.params) {
      builder.setInsertionPointToEnd(body);
      genParam(p);
    }
    for (const Expert &e : layer.experts) {
      builder.setInsertionPointToEnd(body);
      auto expert = mt::ExpertOp::create(builder, loc(e.loc), e.name, e.count);
      Block *ebody = builder.createBlock(&expert.getBody());
      for (const Param &p : e.params) {
        builder.setInsertionPointToEnd(ebody);
        genParam(p);
      }
      builder.setInsertionPointToEnd(ebody);
      genFunction(e.forward, e.loc);
    }
    builder.setInsertionPointToEnd(body);
    genFunction(layer.forward, layer.loc);
  }

  void genFunction(const Function &fn, SourceLoc where) {
    SmallVector<Type> argTypes;
    for (size_t i = 0; i < fn.numArgs; ++i)
      argTypes.push_back(tensorType(fn.types[i]));
    auto type = builder.getFunctionType(argTypes, {tensorType(fn.resultType)});
    auto func = func::FuncOp::create(builder, loc(where), "forward", type);
    Block *entry = func.addEntryBlock();
    builder.setInsertionPointToEnd(entry);
    values.assign(fn.types.size(), Value());
    for (size_t i = 0; i < fn.numArgs; ++i)
      values[i] = entry->getArgument(i);
    for (const Operation &op : fn.ops)
      genOp(fn, op);
    func::ReturnOp::create(builder, loc(where), values[fn.result]);
  }

  // --- Attribute access ---------------------------------------------------
  static int64_t intAttr(const Operation &op, const char *name,
                         int64_t dflt = 0) {
    if (const AttrValue *v = op.attr(name)) {
      if (auto *i = std::get_if<int64_t>(v))
        return *i;
      if (auto *d = std::get_if<double>(v))
        return static_cast<int64_t>(*d);
    }
    return dflt;
  }
  static double floatAttr(const Operation &op, const char *name,
                          double dflt = 0) {
    if (const AttrValue *v = op.attr(name)) {
      if (auto *d = std::get_if<double>(v))
        return *d;
      if (auto *i = std::get_if<int64_t>(v))
        return static_cast<double>(*i);
    }
    return dflt;
  }
  static bool boolAttr(const Operation &op, const char *name,
                       bool dflt = false) {
    if (const AttrValue *v = op.attr(name))
      if (auto *b = std::get_if<bool>(v))
        return *b;
    return dflt;
  }
  static std::string strAttr(const Operation &op, const char *name,
                             const std::string &dflt = "") {
    if (const AttrValue *v = op.attr(name))
      if (auto *s = std::get_if<std::string>(v))
        return *s;
    return dflt;
  }
  static std::vector<int64_t> listAttr(const Operation &op, const char *name) {
    if (const AttrValue *v = op.attr(name))
      if (auto *l = std::get_if<std::vector<int64_t>>(v))
        return *l;
    return {};
  }

  template <typename OpTy>
  Value unary(const Function &fn, const Operation &op) {
    return OpTy::create(builder, loc(op.loc), resultType(fn, op),
                        operand(op, 0));
  }
  template <typename OpTy>
  Value binary(const Function &fn, const Operation &op) {
    return OpTy::create(builder, loc(op.loc), resultType(fn, op),
                        operand(op, 0), operand(op, 1));
  }

  FloatAttr f64(double v) { return builder.getF64FloatAttr(v); }
  IntegerAttr i64(int64_t v) { return builder.getI64IntegerAttr(v); }
  UnitAttr unit(bool v) { return v ? builder.getUnitAttr() : UnitAttr(); }

  Type resultType(const Function &fn, const Operation &op, size_t i = 0) {
    return tensorType(fn.types[op.results[i]]);
  }
  Value operand(const Operation &op, size_t i) {
    return i < op.operands.size() ? values[op.operands[i]] : Value();
  }

  void genOp(const Function &fn, const Operation &op) {
    Location l = loc(op.loc);
    Value r;
    switch (op.kind) {
    case OpKind::Constant:
      r = mt::ConstantOp::create(
          builder, l, resultType(fn, op),
          builder.getF64FloatAttr(floatAttr(op, "value")));
      break;
    case OpKind::ParamRef:
      r = mt::ParamRefOp::create(builder, l, resultType(fn, op),
                                 FlatSymbolRefAttr::get(&ctx, op.symbol));
      break;
    case OpKind::Embedding:
      r = binary<mt::EmbeddingOp>(fn, op);
      break;
    case OpKind::MatMul:
      r = mt::MatMulOp::create(builder, l, resultType(fn, op), operand(op, 0),
                               operand(op, 1), operand(op, 2));
      break;
    case OpKind::Add:
      r = binary<mt::AddOp>(fn, op);
      break;
    case OpKind::Sub:
      r = binary<mt::SubOp>(fn, op);
      break;
    case OpKind::Mul:
      r = binary<mt::MulOp>(fn, op);
      break;
    case OpKind::Div:
      r = binary<mt::DivOp>(fn, op);
      break;
    case OpKind::Neg:
      r = unary<mt::NegOp>(fn, op);
      break;
    case OpKind::Exp:
      r = unary<mt::ExpOp>(fn, op);
      break;
    case OpKind::Log:
      r = unary<mt::LogOp>(fn, op);
      break;
    case OpKind::Silu:
      r = unary<mt::SiluOp>(fn, op);
      break;
    case OpKind::Relu:
      r = unary<mt::ReluOp>(fn, op);
      break;
    case OpKind::Sigmoid:
      r = unary<mt::SigmoidOp>(fn, op);
      break;
    case OpKind::Tanh:
      r = unary<mt::TanhOp>(fn, op);
      break;
    case OpKind::Rsqrt:
      r = unary<mt::RsqrtOp>(fn, op);
      break;
    case OpKind::Sqrt:
      r = unary<mt::SqrtOp>(fn, op);
      break;
    case OpKind::Square:
      r = unary<mt::SquareOp>(fn, op);
      break;
    case OpKind::Relu2:
      r = unary<mt::Relu2Op>(fn, op);
      break;
    case OpKind::Gelu:
      r = mt::GeluOp::create(builder, l, resultType(fn, op), operand(op, 0),
                             strAttr(op, "approximate", "none"));
      break;
    case OpKind::Sum:
    case OpKind::Mean:
    case OpKind::Max: {
      int64_t axis = intAttr(op, "axis");
      bool keep = boolAttr(op, "keepdim");
      Type t = resultType(fn, op);
      if (op.kind == OpKind::Sum)
        r = mt::SumOp::create(builder, l, t, operand(op, 0), axis, keep);
      else if (op.kind == OpKind::Mean)
        r = mt::MeanOp::create(builder, l, t, operand(op, 0), axis, keep);
      else
        r = mt::MaxOp::create(builder, l, t, operand(op, 0), axis, keep);
      break;
    }
    case OpKind::Softmax:
      r = mt::SoftmaxOp::create(builder, l, resultType(fn, op), operand(op, 0),
                                intAttr(op, "axis"));
      break;
    case OpKind::RmsNorm:
      r = mt::RmsNormOp::create(builder, l, resultType(fn, op), operand(op, 0),
                                operand(op, 1), f64(floatAttr(op, "eps", 1e-5)),
                                f64(floatAttr(op, "offset")));
      break;
    case OpKind::LayerNorm:
      r = mt::LayerNormOp::create(
          builder, l, resultType(fn, op), operand(op, 0), operand(op, 1),
          operand(op, 2), f64(floatAttr(op, "eps", 1e-5)));
      break;
    case OpKind::Reshape:
      r = unary<mt::ReshapeOp>(fn, op);
      break;
    case OpKind::Transpose:
      r = mt::TransposeOp::create(
          builder, l, resultType(fn, op), operand(op, 0),
          builder.getDenseI64ArrayAttr(listAttr(op, "perm")));
      break;
    case OpKind::Split: {
      SmallVector<Type> types;
      for (size_t i = 0; i < op.results.size(); ++i)
        types.push_back(resultType(fn, op, i));
      auto split = mt::SplitOp::create(
          builder, l, types, operand(op, 0), intAttr(op, "axis"),
          builder.getDenseI64ArrayAttr(listAttr(op, "sizes")));
      for (auto [id, v] : llvm::zip(op.results, split.getResults()))
        values[id] = v;
      return;
    }
    case OpKind::Concat: {
      SmallVector<Value> inputs;
      for (int id : op.operands)
        inputs.push_back(values[id]);
      r = mt::ConcatOp::create(builder, l, resultType(fn, op), inputs,
                               intAttr(op, "axis"));
      break;
    }
    case OpKind::Slice:
      r = mt::SliceOp::create(builder, l, resultType(fn, op), operand(op, 0),
                              intAttr(op, "axis"), intAttr(op, "start"),
                              intAttr(op, "end"));
      break;
    case OpKind::Rope: {
      auto rope = mt::RopeOp::create(
          builder, l, resultType(fn, op), operand(op, 0),
          f64(floatAttr(op, "theta", 10000.0)),
          f64(floatAttr(op, "fraction", 1.0)), StringAttr(), FloatAttr(),
          FloatAttr(), FloatAttr(), IntegerAttr());
      std::string scaling = strAttr(op, "scaling");
      if (!scaling.empty()) {
        rope.setScalingAttr(builder.getStringAttr(scaling));
        rope.setFactorAttr(builder.getF64FloatAttr(floatAttr(op, "factor")));
        rope.setLowFreqFactorAttr(
            builder.getF64FloatAttr(floatAttr(op, "low_freq_factor")));
        rope.setHighFreqFactorAttr(
            builder.getF64FloatAttr(floatAttr(op, "high_freq_factor")));
        rope.setOriginalMaxPositionAttr(
            builder.getI64IntegerAttr(intAttr(op, "original_max_position")));
      }
      r = rope;
      break;
    }
    case OpKind::Attention:
      r = mt::AttentionOp::create(
          builder, l, resultType(fn, op), operand(op, 0), operand(op, 1),
          operand(op, 2), unit(boolAttr(op, "causal", true)),
          i64(intAttr(op, "window")), f64(floatAttr(op, "softcap")),
          f64(floatAttr(op, "scale")));
      break;
    case OpKind::Softcap:
      r = mt::SoftcapOp::create(builder, l, resultType(fn, op), operand(op, 0),
                                f64(floatAttr(op, "cap")));
      break;
    case OpKind::Moe:
      r = mt::MoeOp::create(
          builder, l, resultType(fn, op), operand(op, 0), operand(op, 1),
          FlatSymbolRefAttr::get(&ctx, op.symbol), i64(intAttr(op, "top_k", 1)),
          unit(boolAttr(op, "normalize")), f64(floatAttr(op, "aux_loss")));
      break;
    case OpKind::CrossEntropy:
      r = mt::CrossEntropyOp::create(builder, l, resultType(fn, op),
                                     operand(op, 0), operand(op, 1),
                                     intAttr(op, "ignore_index", -100));
      break;
    case OpKind::ApplyLayers:
      r = mt::ApplyLayersOp::create(builder, l, op.symbol, intAttr(op, "first"),
                                    intAttr(op, "count"), operand(op, 0));
      break;
    }
    values[op.results[0]] = r;
  }

  MLIRContext &ctx;
  OpBuilder builder;
  StringAttr file;
  std::vector<Value> values;
};

} // namespace

OwningOpRef<ModuleOp> mlirGen(MLIRContext &context, const CheckedModel &model,
                              StringRef fileName) {
  return Generator(context, fileName).run(model);
}

} // namespace mtc
