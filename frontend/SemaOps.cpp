//===- SemaOps.cpp - The operations of forward bodies ---------------------===//
//
// Part of mtc. The operation table of the language (names, argument lists and
// defaults) and the checking of one call: argument binding, compile-time
// arguments, dtype rules, shape inference with lib/Support/Shape.h and the
// attributes MLIRGen reads.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaInternal.h"

#include <algorithm>
#include <cmath>

namespace mtc::sema {

namespace {

/// How an operation argument is given and checked.
enum class ArgKind {
  Tensor,    ///< a tensor expression (a number becomes a Constant op)
  OptTensor, ///< an optional tensor (matmul bias, layernorm b)
  Number,    ///< a compile-time number
  Int,       ///< a compile-time integer
  Bool,      ///< true / false
  String,    ///< "tanh"
  IntList,   ///< [64, 64]
  DimList,   ///< [B, S, n_heads, head_dim]
  Expert,    ///< the name of an expert of the current layer
  Scaling,   ///< llama3(factor, low_freq_factor, high_freq_factor, max_pos)
};

struct ArgSpec {
  const char *name;
  ArgKind kind;
  bool required;
};

struct OpSpec {
  const char *name;
  OpKind kind;
  std::vector<ArgSpec> args;
  /// concat: any number of tensors, then the (named) arguments in `args`.
  bool variadic = false;
};

bool isTensorKind(ArgKind k) {
  return k == ArgKind::Tensor || k == ArgKind::OptTensor;
}

const std::vector<OpSpec> &opTable() {
  using A = ArgKind;
  auto unary = [](const char *name, OpKind kind) {
    return OpSpec{name, kind, {{"x", A::Tensor, true}}};
  };
  static const std::vector<OpSpec> table = {
      {"embedding",
       OpKind::Embedding,
       {{"ids", A::Tensor, true}, {"table", A::Tensor, true}}},
      {"matmul",
       OpKind::MatMul,
       {{"a", A::Tensor, true},
        {"b", A::Tensor, true},
        {"bias", A::OptTensor, false}}},
      unary("neg", OpKind::Neg),
      unary("exp", OpKind::Exp),
      unary("log", OpKind::Log),
      unary("silu", OpKind::Silu),
      unary("relu", OpKind::Relu),
      unary("sigmoid", OpKind::Sigmoid),
      unary("tanh", OpKind::Tanh),
      unary("rsqrt", OpKind::Rsqrt),
      unary("sqrt", OpKind::Sqrt),
      unary("square", OpKind::Square),
      {"gelu",
       OpKind::Gelu,
       {{"x", A::Tensor, true}, {"approximate", A::String, false}}},
      {"sum",
       OpKind::Sum,
       {{"x", A::Tensor, true},
        {"axis", A::Int, true},
        {"keepdim", A::Bool, false}}},
      {"mean",
       OpKind::Mean,
       {{"x", A::Tensor, true},
        {"axis", A::Int, true},
        {"keepdim", A::Bool, false}}},
      {"max",
       OpKind::Max,
       {{"x", A::Tensor, true},
        {"axis", A::Int, true},
        {"keepdim", A::Bool, false}}},
      {"softmax",
       OpKind::Softmax,
       {{"x", A::Tensor, true}, {"axis", A::Int, false}}},
      {"rmsnorm",
       OpKind::RmsNorm,
       {{"x", A::Tensor, true},
        {"w", A::Tensor, true},
        {"eps", A::Number, true},
        {"offset", A::Number, false}}},
      {"layernorm",
       OpKind::LayerNorm,
       {{"x", A::Tensor, true},
        {"w", A::Tensor, true},
        {"b", A::OptTensor, false},
        {"eps", A::Number, true}}},
      {"reshape",
       OpKind::Reshape,
       {{"x", A::Tensor, true}, {"shape", A::DimList, true}}},
      {"transpose",
       OpKind::Transpose,
       {{"x", A::Tensor, true}, {"perm", A::IntList, false}}},
      {"split",
       OpKind::Split,
       {{"x", A::Tensor, true},
        {"sizes", A::IntList, true},
        {"axis", A::Int, false}}},
      {"concat", OpKind::Concat, {{"axis", A::Int, false}}, true},
      {"slice",
       OpKind::Slice,
       {{"x", A::Tensor, true},
        {"axis", A::Int, true},
        {"start", A::Int, true},
        {"end", A::Int, true}}},
      {"rope",
       OpKind::Rope,
       {{"x", A::Tensor, true},
        {"theta", A::Number, true},
        {"fraction", A::Number, false},
        {"scaling", A::Scaling, false}}},
      {"attention",
       OpKind::Attention,
       {{"q", A::Tensor, true},
        {"k", A::Tensor, true},
        {"v", A::Tensor, true},
        {"causal", A::Bool, false},
        {"window", A::Int, false},
        {"softcap", A::Number, false},
        {"scale", A::Number, false}}},
      {"softcap",
       OpKind::Softcap,
       {{"x", A::Tensor, true}, {"cap", A::Number, true}}},
      {"moe",
       OpKind::Moe,
       {{"h", A::Tensor, true},
        {"router", A::Tensor, true},
        {"expert", A::Expert, true},
        {"top_k", A::Int, true},
        {"normalize", A::Bool, false},
        {"aux_loss", A::Number, false}}},
      {"cross_entropy",
       OpKind::CrossEntropy,
       {{"logits", A::Tensor, true},
        {"targets", A::Tensor, true},
        {"ignore_index", A::Int, false}}},
  };
  return table;
}

const OpSpec *findOp(const std::string &name) {
  for (const OpSpec &spec : opTable())
    if (name == spec.name)
      return &spec;
  return nullptr;
}

/// "(x, w, eps[, offset])", "(x, w[, b], eps)", "(a, b, ...[, axis])".
std::string signatureText(const OpSpec &spec) {
  std::string s = "(";
  bool first = true;
  if (spec.variadic) {
    s += "x, ...";
    first = false;
  }
  for (size_t i = 0; i < spec.args.size(); ++i) {
    const ArgSpec &a = spec.args[i];
    std::string sep = first ? "" : ", ";
    if (a.required) {
      s += sep + a.name;
      first = false;
      continue;
    }
    bool restOptional =
        std::none_of(spec.args.begin() + i, spec.args.end(),
                     [](const ArgSpec &x) { return x.required; });
    if (!restOptional) {
      s += "[" + sep + a.name + "]";
      first = false;
      continue;
    }
    s += "[" + sep;
    for (size_t j = i; j < spec.args.size(); ++j)
      s += std::string(j == i ? "" : ", ") + spec.args[j].name;
    s += "]";
    break;
  }
  return s + ")";
}

} // namespace

//===----------------------------------------------------------------------===//
// Operations
//===----------------------------------------------------------------------===//

std::vector<Val> Checker::evalOp(const ast::Expr &e, FnState &st,
                                 size_t wanted) {
  std::vector<Val> failed(std::max<size_t>(wanted, 1), Val::poison());
  const OpSpec *spec = findOp(e.text);
  if (!spec) {
    std::vector<std::string> candidates;
    for (const OpSpec &s : opTable())
      candidates.push_back(s.name);
    candidates.push_back("min");
    for (const auto &[n, i] : layerIndex)
      candidates.push_back(n);
    rep.error(e.loc, "unknown operation '" + e.text + "'" +
                         didYouMean(e.text, candidates));
    return failed;
  }
  const std::string opName = "'" + std::string(spec->name) + "'";

  // --- Bind the arguments to the signature ------------------------------
  size_t given = e.operands.size() + e.named.size();
  size_t minArgs = std::count_if(spec->args.begin(), spec->args.end(),
                                 [](const ArgSpec &a) { return a.required; });
  size_t maxArgs = spec->args.size();
  std::vector<const ast::Expr *> tensors; // concat's inputs
  std::vector<const ast::Expr *> bound(spec->args.size(), nullptr);
  std::vector<SourceLoc> boundLoc(spec->args.size(), e.loc);
  if (spec->variadic) {
    if (e.operands.empty()) {
      rep.error(e.loc, opName + " expects at least 1 argument " +
                           signatureText(*spec) + ", got 0");
      return failed;
    }
    for (const auto &x : e.operands)
      tensors.push_back(x.get());
  } else {
    if (given < minArgs || given > maxArgs) {
      std::string range =
          minArgs == maxArgs ? std::to_string(minArgs)
          : maxArgs == minArgs + 1
              ? std::to_string(minArgs) + " or " + std::to_string(maxArgs)
              : std::to_string(minArgs) + " to " + std::to_string(maxArgs);
      rep.error(e.loc, opName + " expects " + range +
                           (maxArgs == 1 ? " argument " : " arguments ") +
                           signatureText(*spec) + ", got " +
                           std::to_string(given));
      return failed;
    }
    // layernorm(x, w, eps): a constant third argument is eps, not b.
    bool skipBias = spec->kind == OpKind::LayerNorm && e.operands.size() == 3 &&
                    e.operands[2] && isConstExpr(*e.operands[2], st);
    size_t slot = 0;
    for (const auto &x : e.operands) {
      if (skipBias && slot == 2)
        ++slot;
      if (slot >= bound.size())
        break;
      bound[slot] = x.get();
      if (x)
        boundLoc[slot] = x->loc;
      ++slot;
    }
  }
  bool bindOk = true;
  for (const ast::NamedArg &n : e.named) {
    auto it = std::find_if(spec->args.begin(), spec->args.end(),
                           [&](const ArgSpec &a) { return n.name == a.name; });
    if (it == spec->args.end()) {
      std::vector<std::string> names;
      for (const ArgSpec &a : spec->args)
        if (!isTensorKind(a.kind))
          names.push_back(a.name);
      rep.error(n.loc, opName + " has no argument named '" + n.name + "'" +
                           didYouMean(n.name, names));
      bindOk = false;
      continue;
    }
    size_t idx = static_cast<size_t>(it - spec->args.begin());
    if (isTensorKind(it->kind)) {
      rep.error(n.loc, "argument '" + n.name + "' of " + opName +
                           " must be passed by position");
      bindOk = false;
      continue;
    }
    if (bound[idx]) {
      rep.error(n.loc,
                "argument '" + n.name + "' of " + opName + " is given twice");
      bindOk = false;
      continue;
    }
    bound[idx] = n.value.get();
    boundLoc[idx] = n.value ? n.value->loc : n.loc;
  }
  for (size_t i = 0; i < spec->args.size() && bindOk; ++i)
    if (spec->args[i].required && !bound[i]) {
      rep.error(e.loc, opName + " is missing argument '" +
                           std::string(spec->args[i].name) + "'");
      bindOk = false;
    }
  if (!bindOk)
    return failed;

  // --- Evaluate every argument (all of them, to report independent errors)
  bool ok = true;
  std::vector<int> ids(spec->args.size(), -1);
  auto tensorArg = [&](const ast::Expr *x, SourceLoc loc) {
    if (!x) {
      ok = false;
      return -1;
    }
    Val v = toTensor(evalExpr(*x, st), loc, st);
    if (v.kind != Val::Tensor) {
      ok = false;
      return -1;
    }
    return v.id;
  };
  for (size_t i = 0; i < spec->args.size(); ++i)
    if (isTensorKind(spec->args[i].kind) && bound[i])
      ids[i] = tensorArg(bound[i], boundLoc[i]);
  std::vector<int> inputs;
  for (const ast::Expr *x : tensors)
    inputs.push_back(tensorArg(x, x ? x->loc : e.loc));

  auto argName = [&](size_t i) {
    return "argument '" + std::string(spec->args[i].name) + "' of " + opName;
  };
  // Returns false when the argument was given but is not a valid number.
  auto number = [&](size_t i, double dflt, double &v) {
    v = dflt;
    if (!bound[i])
      return true;
    ConfigValue c;
    if (!evalConst(*bound[i], c)) {
      ok = false;
      return false;
    }
    v = c.value;
    return true;
  };
  auto integer = [&](size_t i, int64_t dflt, int64_t minValue, int64_t &v) {
    if (!bound[i]) {
      v = dflt;
      return;
    }
    if (!evalInt(*bound[i], spec->args[i].name, minValue, kMaxExactInt, v))
      ok = false;
  };
  auto boolean = [&](size_t i, bool dflt, bool &v) {
    v = dflt;
    if (!bound[i])
      return;
    if (bound[i]->kind != ast::Expr::Kind::Bool) {
      rep.error(boundLoc[i], argName(i) + " must be true or false");
      ok = false;
      return;
    }
    v = bound[i]->boolean;
  };
  auto stringArg = [&](size_t i, const char *dflt, std::string &v) {
    v = dflt;
    if (!bound[i])
      return;
    if (bound[i]->kind != ast::Expr::Kind::String) {
      rep.error(boundLoc[i], argName(i) + " must be a string");
      ok = false;
      return;
    }
    v = bound[i]->text;
  };
  auto intList = [&](size_t i, int64_t minValue, std::vector<int64_t> &v) {
    if (!bound[i])
      return;
    if (bound[i]->kind != ast::Expr::Kind::List) {
      rep.error(boundLoc[i], argName(i) + " must be a list such as [64, 64]");
      ok = false;
      return;
    }
    for (const auto &x : bound[i]->operands) {
      int64_t n = 0;
      if (!x || !evalInt(*x, spec->args[i].name, minValue, kMaxDim, n))
        ok = false;
      v.push_back(n);
    }
  };
  auto positive = [&](size_t i, double v, bool allowZero) {
    if (!bound[i] || (allowZero ? v >= 0 : v > 0))
      return;
    rep.error(boundLoc[i],
              argName(i) +
                  (allowZero ? " must not be negative" : " must be positive") +
                  ", got " + formatNumber(v));
    ok = false;
  };
  auto requireFloat = [&](int id) {
    if (id < 0 || isFloat(typeOf(st, id).dtype))
      return true;
    rep.error(e.loc, opName + " cannot operate on i32 values");
    ok = false;
    return false;
  };
  auto shapeError = [&](const std::string &err) {
    rep.error(e.loc, "shape mismatch in " + opName + ": " + err);
    ok = false;
  };
  auto type = [&](int id) { return typeOf(st, id); };
  auto one = [&](int id) {
    std::vector<Val> r = failed;
    r[0] = Val::tensor(id);
    return r;
  };
  DimContext dimContext = st.kind == ScopeKind::Expert  ? DimContext::Expert
                          : st.kind == ScopeKind::Layer ? DimContext::Layer
                                                        : DimContext::Model;

  OpKind kind = spec->kind;
  switch (kind) {
  case OpKind::Embedding: {
    if (!ok)
      return failed;
    ValueType ids_ = type(ids[0]);
    if (ids_.dtype != DType::I32) {
      rep.error(e.loc, "'embedding' ids must be i32, got " +
                           std::string(dtypeName(ids_.dtype)));
      return failed;
    }
    if (!requireFloat(ids[1]))
      return failed;
    Expected<Shape> shape = rules::embedding(ids_.shape, type(ids[1]).shape);
    if (!shape) {
      shapeError(shape.message());
      return failed;
    }
    return one(emit(st, kind, e.loc, {ids[0], ids[1]},
                    {ValueType{*shape, DType::F32}}));
  }
  case OpKind::MatMul: {
    if (!ok || !requireFloat(ids[0]) || !requireFloat(ids[1]) ||
        !requireFloat(ids[2]))
      return failed;
    Shape bias;
    if (ids[2] >= 0)
      bias = type(ids[2]).shape;
    Expected<Shape> shape = rules::matmul(
        type(ids[0]).shape, type(ids[1]).shape, ids[2] >= 0 ? &bias : nullptr);
    if (!shape) {
      shapeError(shape.message());
      return failed;
    }
    std::vector<int> operands = {ids[0], ids[1]};
    if (ids[2] >= 0)
      operands.push_back(ids[2]);
    return one(
        emit(st, kind, e.loc, operands, {ValueType{*shape, DType::F32}}));
  }
  case OpKind::Neg:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Silu:
  case OpKind::Relu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Rsqrt:
  case OpKind::Sqrt:
  case OpKind::Square: {
    if (!ok || !requireFloat(ids[0]))
      return failed;
    return one(emit(st, kind, e.loc, {ids[0]}, {type(ids[0])}));
  }
  case OpKind::Gelu: {
    std::string approximate;
    stringArg(1, "none", approximate);
    if (ok && approximate != "none" && approximate != "tanh") {
      rep.error(boundLoc[1], "'gelu' approximate must be \"none\" or "
                             "\"tanh\", got \"" +
                                 approximate + "\"");
      ok = false;
    }
    if (!ok || !requireFloat(ids[0]))
      return failed;
    return one(emit(st, kind, e.loc, {ids[0]}, {type(ids[0])}, {},
                    {{"approximate", AttrValue(approximate)}}));
  }
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Max: {
    int64_t axis = 0;
    bool keepdim = false;
    integer(1, 0, -kMaxDim, axis);
    boolean(2, false, keepdim);
    if (!ok || !requireFloat(ids[0]))
      return failed;
    const Shape x = type(ids[0]).shape;
    Expected<size_t> normAxis = rules::axis(axis, x.size());
    if (!normAxis) {
      shapeError(normAxis.message());
      return failed;
    }
    Expected<Shape> shape = rules::reduce(x, axis, keepdim);
    if (!shape) {
      shapeError(shape.message());
      return failed;
    }
    return one(emit(st, kind, e.loc, {ids[0]}, {ValueType{*shape, DType::F32}},
                    {},
                    {{"axis", AttrValue(static_cast<int64_t>(*normAxis))},
                     {"keepdim", AttrValue(keepdim)}}));
  }
  case OpKind::Softmax: {
    int64_t axis = -1;
    integer(1, -1, -kMaxDim, axis);
    if (!ok || !requireFloat(ids[0]))
      return failed;
    Expected<size_t> normAxis = rules::axis(axis, type(ids[0]).shape.size());
    if (!normAxis) {
      shapeError(normAxis.message() + " of " + formatShape(type(ids[0]).shape));
      return failed;
    }
    return one(emit(st, kind, e.loc, {ids[0]}, {type(ids[0])}, {},
                    {{"axis", AttrValue(static_cast<int64_t>(*normAxis))}}));
  }
  case OpKind::RmsNorm:
  case OpKind::LayerNorm: {
    bool rms = kind == OpKind::RmsNorm;
    size_t epsIdx = rms ? 2 : 3;
    double eps = 0, offset = 0;
    if (number(epsIdx, 0, eps))
      positive(epsIdx, eps, false);
    if (rms)
      number(3, 0.0, offset);
    int bias = rms ? -1 : ids[2];
    if (!ok || !requireFloat(ids[0]) || !requireFloat(ids[1]) ||
        !requireFloat(bias))
      return failed;
    Shape b;
    if (bias >= 0)
      b = type(bias).shape;
    const Shape x = type(ids[0]).shape;
    if (Status s = rules::norm(x, type(ids[1]).shape, bias >= 0 ? &b : nullptr);
        !s) {
      shapeError(s.message());
      return failed;
    }
    std::vector<int> operands = {ids[0], ids[1]};
    if (bias >= 0)
      operands.push_back(bias);
    std::vector<std::pair<std::string, AttrValue>> attrs = {
        {"eps", AttrValue(eps)}};
    if (rms)
      attrs.push_back({"offset", AttrValue(offset)});
    return one(emit(st, kind, e.loc, operands, {ValueType{x, DType::F32}}, {},
                    std::move(attrs)));
  }
  case OpKind::Reshape: {
    Shape target;
    if (bound[1]->kind != ast::Expr::Kind::List) {
      rep.error(boundLoc[1],
                argName(1) + " must be a shape such as [B, S, n_heads, 64]");
      ok = false;
    } else {
      for (const auto &d : bound[1]->operands) {
        Dim v = 1;
        if (!d || !evalDim(*d, dimContext, "", v))
          ok = false;
        target.push_back(v);
      }
    }
    if (!ok)
      return failed;
    ValueType x = type(ids[0]);
    if (Status s = rules::reshape(x.shape, target); !s) {
      shapeError(s.message());
      return failed;
    }
    return one(emit(st, kind, e.loc, {ids[0]}, {ValueType{target, x.dtype}}));
  }
  case OpKind::Transpose: {
    std::vector<int64_t> perm;
    intList(1, -kMaxDim, perm);
    if (!ok)
      return failed;
    ValueType x = type(ids[0]);
    int64_t rank = static_cast<int64_t>(x.shape.size());
    if (!bound[1]) {
      if (rank < 2) {
        shapeError("transpose needs at least 2 dimensions, got " +
                   formatShape(x.shape));
        return failed;
      }
      for (int64_t i = 0; i < rank; ++i)
        perm.push_back(i);
      std::swap(perm[rank - 1], perm[rank - 2]);
    } else {
      for (int64_t &p : perm)
        if (p < 0 && p >= -rank)
          p += rank;
    }
    Expected<Shape> shape = rules::transpose(x.shape, perm);
    if (!shape) {
      shapeError(shape.message());
      return failed;
    }
    return one(emit(st, kind, e.loc, {ids[0]}, {ValueType{*shape, x.dtype}}, {},
                    {{"perm", AttrValue(perm)}}));
  }
  case OpKind::Split: {
    std::vector<int64_t> sizes;
    int64_t axis = -1;
    intList(1, 1, sizes);
    integer(2, -1, -kMaxDim, axis);
    if (ok && wanted == 0 && sizes.size() != 1) {
      rep.error(e.loc, "'split' produces " + plural(sizes.size(), "value") +
                           "; assign them with 'a, b = split(...)'");
      ok = false;
    } else if (ok && wanted > 0 && sizes.size() != wanted) {
      rep.error(e.loc, "'split' produces " + plural(sizes.size(), "value") +
                           " but " + plural(wanted, "name") +
                           (wanted == 1 ? " is" : " are") + " assigned");
      ok = false;
    }
    if (!ok)
      return failed;
    ValueType x = type(ids[0]);
    Expected<size_t> normAxis = rules::axis(axis, x.shape.size());
    if (!normAxis) {
      shapeError(normAxis.message() + " of " + formatShape(x.shape));
      return failed;
    }
    Expected<std::vector<Shape>> shapes = rules::split(x.shape, sizes, axis);
    if (!shapes) {
      shapeError(shapes.message());
      return failed;
    }
    std::vector<ValueType> types;
    for (Shape &s : *shapes)
      types.push_back(ValueType{std::move(s), x.dtype});
    int first = emit(st, kind, e.loc, {ids[0]}, std::move(types), {},
                     {{"sizes", AttrValue(sizes)},
                      {"axis", AttrValue(static_cast<int64_t>(*normAxis))}});
    std::vector<Val> results;
    for (size_t i = 0; i < sizes.size(); ++i)
      results.push_back(Val::tensor(first + static_cast<int>(i)));
    return results;
  }
  case OpKind::Concat: {
    int64_t axis = -1;
    integer(0, -1, -kMaxDim, axis);
    if (!ok)
      return failed;
    std::vector<Shape> shapes;
    DType dtype = type(inputs[0]).dtype;
    for (int id : inputs) {
      if (type(id).dtype != dtype) {
        rep.error(e.loc, "'concat' inputs must have the same dtype, got " +
                             std::string(dtypeName(dtype)) + " and " +
                             dtypeName(type(id).dtype));
        return failed;
      }
      shapes.push_back(type(id).shape);
    }
    Expected<size_t> normAxis = rules::axis(axis, shapes[0].size());
    if (!normAxis) {
      shapeError(normAxis.message() + " of " + formatShape(shapes[0]));
      return failed;
    }
    Expected<Shape> shape = rules::concat(shapes, axis);
    if (!shape) {
      shapeError(shape.message());
      return failed;
    }
    return one(emit(st, kind, e.loc, inputs, {ValueType{*shape, dtype}}, {},
                    {{"axis", AttrValue(static_cast<int64_t>(*normAxis))}}));
  }
  case OpKind::Slice: {
    int64_t axis = 0, start = 0, end = 0;
    integer(1, 0, -kMaxDim, axis);
    integer(2, 0, 0, start);
    // `end` may be S: the first S rows of a static axis (a learned position
    // table); whether S fits is checked when S is bound.
    const ast::Expr *endArg = bound[3];
    if (endArg && endArg->kind == ast::Expr::Kind::Name &&
        reservedDimMeaning(endArg->text)) {
      if (symbolicDimByName(endArg->text) != kDimS ||
          st.kind == ScopeKind::Expert) {
        rep.error(boundLoc[3], argName(3) +
                                   " may be S (the sequence length) "
                                   "in a model or layer forward, not " +
                                   endArg->text);
        ok = false;
      }
      end = kDimS;
    } else {
      integer(3, 0, 0, end);
    }
    if (!ok)
      return failed;
    ValueType x = type(ids[0]);
    Expected<size_t> normAxis = rules::axis(axis, x.shape.size());
    if (!normAxis) {
      shapeError(normAxis.message() + " of " + formatShape(x.shape));
      return failed;
    }
    Expected<Shape> shape = rules::slice(x.shape, axis, start, end);
    if (!shape) {
      shapeError(shape.message());
      return failed;
    }
    return one(emit(st, kind, e.loc, {ids[0]}, {ValueType{*shape, x.dtype}}, {},
                    {{"axis", AttrValue(static_cast<int64_t>(*normAxis))},
                     {"start", AttrValue(start)},
                     {"end", AttrValue(end)}}));
  }
  case OpKind::Rope: {
    double theta = 0, fraction = 1.0;
    if (number(1, 0, theta))
      positive(1, theta, false);
    number(2, 1.0, fraction);
    std::vector<std::pair<std::string, AttrValue>> attrs;
    if (const ast::Expr *s = bound[3]) {
      static const char *names[] = {"factor", "low_freq_factor",
                                    "high_freq_factor",
                                    "original_max_position"};
      const char *usage = "rope scaling must be llama3(factor, "
                          "low_freq_factor, high_freq_factor, "
                          "original_max_position)";
      if (s->kind != ast::Expr::Kind::Call || s->text != "llama3" || s->index ||
          s->operands.size() + s->named.size() != 4) {
        rep.error(s->loc, usage);
        ok = false;
      } else {
        const ast::Expr *args[4] = {nullptr, nullptr, nullptr, nullptr};
        for (size_t i = 0; i < s->operands.size(); ++i)
          args[i] = s->operands[i].get();
        for (const ast::NamedArg &n : s->named) {
          auto it = std::find(std::begin(names), std::end(names), n.name);
          size_t idx = static_cast<size_t>(it - std::begin(names));
          if (it == std::end(names) || args[idx]) {
            rep.error(n.loc,
                      it == std::end(names)
                          ? "'llama3' has no argument named '" + n.name + "'"
                          : "argument '" + n.name +
                                "' of 'llama3' is given twice");
            ok = false;
            continue;
          }
          args[idx] = n.value.get();
        }
        attrs.push_back({"scaling", AttrValue(std::string("llama3"))});
        for (size_t i = 0; i < 4 && ok; ++i) {
          if (!args[i]) {
            rep.error(s->loc, usage);
            ok = false;
            break;
          }
          if (i == 3) {
            int64_t n = 0;
            if (!evalInt(*args[i], names[i], 1, kMaxExactInt, n))
              ok = false;
            attrs.push_back({names[i], AttrValue(n)});
            continue;
          }
          ConfigValue c;
          if (!evalConst(*args[i], c)) {
            ok = false;
            continue;
          }
          if (!(c.value > 0)) {
            rep.error(args[i]->loc, std::string("llama3 ") + names[i] +
                                        " must be positive, got " +
                                        formatNumber(c.value));
            ok = false;
          }
          attrs.push_back({names[i], AttrValue(c.value)});
        }
      }
    }
    if (!ok || !requireFloat(ids[0]))
      return failed;
    if (Status s = rules::rope(type(ids[0]).shape, fraction); !s) {
      shapeError(s.message());
      return failed;
    }
    std::vector<std::pair<std::string, AttrValue>> ropeAttrs = {
        {"theta", AttrValue(theta)}, {"fraction", AttrValue(fraction)}};
    ropeAttrs.insert(ropeAttrs.end(), attrs.begin(), attrs.end());
    attrs = std::move(ropeAttrs);
    return one(
        emit(st, kind, e.loc, {ids[0]}, {type(ids[0])}, {}, std::move(attrs)));
  }
  case OpKind::Attention: {
    bool causal = true;
    int64_t window = 0;
    double softcap = 0, scale = 0;
    boolean(3, true, causal);
    integer(4, 0, 0, window);
    if (number(5, 0.0, softcap))
      positive(5, softcap, true);
    if (number(6, 0.0, scale))
      positive(6, scale, true);
    if (!ok || !requireFloat(ids[0]) || !requireFloat(ids[1]) ||
        !requireFloat(ids[2]))
      return failed;
    Expected<Shape> shape = rules::attention(
        type(ids[0]).shape, type(ids[1]).shape, type(ids[2]).shape);
    if (!shape) {
      shapeError(shape.message());
      return failed;
    }
    return one(emit(st, kind, e.loc, {ids[0], ids[1], ids[2]},
                    {ValueType{*shape, DType::F32}}, {},
                    {{"causal", AttrValue(causal)},
                     {"window", AttrValue(window)},
                     {"softcap", AttrValue(softcap)},
                     {"scale", AttrValue(scale)}}));
  }
  case OpKind::Softcap: {
    double cap = 0;
    if (number(1, 0, cap))
      positive(1, cap, false);
    if (!ok || !requireFloat(ids[0]))
      return failed;
    return one(emit(st, kind, e.loc, {ids[0]}, {type(ids[0])}, {},
                    {{"cap", AttrValue(cap)}}));
  }
  case OpKind::Moe: {
    if (st.kind != ScopeKind::Layer) {
      rep.error(e.loc, "'moe' can only be used in the forward of a layer "
                       "that declares experts");
      return failed;
    }
    const LayerInfo &info = layers[st.layer];
    const Layer &layer = out.layers[st.layer];
    int expertIdx = -1;
    const ast::Expr *x = bound[2];
    if (x->kind != ast::Expr::Kind::Name) {
      rep.error(boundLoc[2], "the third argument of 'moe' must name an "
                             "expert of layer '" +
                                 layer.name + "'");
      ok = false;
    } else {
      auto it = info.experts.find(x->text);
      if (it == info.experts.end()) {
        std::vector<std::string> names;
        for (const auto &[n, i] : info.experts)
          names.push_back(n);
        rep.error(x->loc, "'" + x->text + "' is not an expert of layer '" +
                              layer.name + "'" + didYouMean(x->text, names));
        ok = false;
      } else {
        expertIdx = static_cast<int>(it->second);
      }
    }
    int64_t topK = 0;
    bool normalize = false;
    double auxLoss = 0;
    integer(3, 1, 1, topK);
    boolean(4, false, normalize);
    if (number(5, 0.0, auxLoss))
      positive(5, auxLoss, true);
    if (!ok || !requireFloat(ids[0]) || !requireFloat(ids[1]))
      return failed;
    const Expert &expert = layer.experts[expertIdx];
    if (expert.count <= 0)
      return failed; // the expert count itself was reported
    if (topK > expert.count) {
      rep.error(boundLoc[3], "top_k " + std::to_string(topK) + " exceeds the " +
                                 plural(expert.count, "expert") + " of '" +
                                 expert.name + "'");
      return failed;
    }
    ValueType h = type(ids[0]);
    if (Status s = rules::moe(h.shape, type(ids[1]).shape, expert.count); !s) {
      shapeError(s.message());
      return failed;
    }
    if (info.expertSignatureOk[expertIdx] &&
        info.expertInput[expertIdx].shape[1] != h.shape[2]) {
      rep.error(e.loc, "expert '" + expert.name + "' takes " +
                           formatShape(info.expertInput[expertIdx].shape) +
                           " but the 'moe' input is " + formatShape(h.shape));
      return failed;
    }
    return one(emit(st, kind, e.loc, {ids[0], ids[1]}, {h}, expert.name,
                    {{"top_k", AttrValue(topK)},
                     {"normalize", AttrValue(normalize)},
                     {"aux_loss", AttrValue(auxLoss)}}));
  }
  case OpKind::CrossEntropy: {
    int64_t ignoreIndex = -100;
    if (bound[2] && !evalInt(*bound[2], "ignore_index", -kMaxExactInt,
                             kMaxExactInt, ignoreIndex))
      ok = false;
    if (!ok || !requireFloat(ids[0]))
      return failed;
    ValueType targets = type(ids[1]);
    if (targets.dtype != DType::I32) {
      rep.error(e.loc, "'cross_entropy' targets must be i32, got " +
                           std::string(dtypeName(targets.dtype)));
      return failed;
    }
    if (Status s = rules::crossEntropy(type(ids[0]).shape, targets.shape); !s) {
      shapeError(s.message());
      return failed;
    }
    return one(emit(st, kind, e.loc, {ids[0], ids[1]},
                    {ValueType{{}, DType::F32}}, {},
                    {{"ignore_index", AttrValue(ignoreIndex)}}));
  }
  default:
    break;
  }
  return failed;
}

} // namespace mtc::sema
