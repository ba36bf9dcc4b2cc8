//===- Validate.cpp - What the runtime may assume of a bundle ---*- C++ -*-===//
//
// Part of mtc. The op table and the checks of every function, op, parameter
// and step-plan reference of a bundle (Validate.h). Shape rules come from
// lib/Support/Shape.h; this file only says which rule applies to which
// operands.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Validate.h"

#include "lib/Bundle/OpKind.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace mtc::bundle {

namespace {

struct ValidationError {
  std::string message;
};

constexpr unsigned kModel = static_cast<unsigned>(FunctionKind::Model);
constexpr unsigned kLayer = static_cast<unsigned>(FunctionKind::Layer);
constexpr unsigned kExpert = static_cast<unsigned>(FunctionKind::Expert);
constexpr unsigned kFused = static_cast<unsigned>(FunctionKind::Fused);
/// Ops of every function.
constexpr unsigned kAnyFn = kModel | kLayer | kExpert;
/// Ops that may also appear in a fused body (mt.fused: elementwise ops,
/// constants and reductions over the last axis).
constexpr unsigned kFusable = kAnyFn | kFused;

std::string typeText(const ValueType &t) {
  return formatShape(t.shape) + " " + dtypeName(t.dtype);
}

std::string attrText(const Attr &a) {
  if (auto *i = std::get_if<int64_t>(&a))
    return std::to_string(*i);
  if (auto *d = std::get_if<double>(&a)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", *d);
    return buf;
  }
  if (auto *b = std::get_if<bool>(&a))
    return *b ? "true" : "false";
  if (auto *s = std::get_if<std::string>(&a))
    return "'" + *s + "'";
  std::string out = "[";
  for (int64_t v : std::get<std::vector<int64_t>>(a))
    out += (out.size() > 1 ? ", " : "") + std::to_string(v);
  return out + "]";
}

const char *attrTypeName(AttrType t) {
  switch (t) {
  case AttrType::Int:
    return "an integer";
  case AttrType::Float:
    return "a number";
  case AttrType::Bool:
    return "true or false";
  case AttrType::String:
    return "a string";
  case AttrType::IntList:
    return "a list of integers";
  }
  return "?";
}

bool hasType(const Attr &a, AttrType t) {
  switch (t) {
  case AttrType::Int:
    return std::holds_alternative<int64_t>(a);
  case AttrType::Float:
    return std::holds_alternative<double>(a) ||
           std::holds_alternative<int64_t>(a);
  case AttrType::Bool:
    return std::holds_alternative<bool>(a);
  case AttrType::String:
    return std::holds_alternative<std::string>(a);
  case AttrType::IntList:
    return std::holds_alternative<std::vector<int64_t>>(a);
  }
  return false;
}

/// "model", "layer 'Block'", ... for messages about where an op may appear.
std::string kindText(FunctionKind k) {
  switch (k) {
  case FunctionKind::Model:
    return "a model function";
  case FunctionKind::Layer:
    return "a layer function";
  case FunctionKind::Expert:
    return "an expert function";
  case FunctionKind::Fused:
    return "a fused body";
  }
  return "?";
}

std::string allowedText(unsigned where) {
  std::string out;
  for (FunctionKind k : {FunctionKind::Model, FunctionKind::Layer,
                         FunctionKind::Expert, FunctionKind::Fused})
    if (where & static_cast<unsigned>(k))
      out += (out.empty() ? "" : ", ") + kindText(k);
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// OpChecker: one op in its function, for the type rules of the table
//===----------------------------------------------------------------------===//

class FunctionChecker;

class OpChecker {
public:
  OpChecker(FunctionChecker &fc, const Function &fn, const Op &op,
            const std::string &where)
      : fc(fc), fn(fn), op(op), where(where) {}

  FunctionChecker &fc;
  const Function &fn;
  const Op &op;
  const std::string &where; ///< "function 'forward': op 3 'matmul' at ..."
  OpKind kind{};            ///< the op's kind, once its table entry is found

  [[noreturn]] void fail(const std::string &what) const {
    throw ValidationError{where + ": " + what};
  }
  /// Fails with a shape rule's message.
  void rule(const Status &s) const {
    if (!s)
      fail(s.message());
  }
  /// A shape rule's result, or fails with its message.
  template <typename T> T rule(Expected<T> r) const {
    if (!r)
      fail(r.message());
    return std::move(r).value();
  }

  size_t numOperands() const { return op.operands.size(); }
  size_t numResults() const { return op.results.size(); }
  const ValueType &operand(size_t i) const { return fn.values[op.operands[i]]; }
  const ValueType &result(size_t i) const { return fn.values[op.results[i]]; }
  const Shape &in(size_t i) const { return operand(i).shape; }
  const Shape &out(size_t i) const { return result(i).shape; }

  std::string operandText(size_t i, const char *role) const {
    return "operand " + std::to_string(i) + " (" +
           (role ? std::string(role) + ", " : "") + "value " +
           std::to_string(op.operands[i]) + ")";
  }

  /// Operand \p i is f32 or bf16.
  void floatOperand(size_t i, const char *role = nullptr) const {
    DType t = operand(i).dtype;
    if (t != DType::F32 && t != DType::BF16)
      fail(operandText(i, role) + " must be f32 or bf16, got " + dtypeName(t));
  }
  void floatOperands() const {
    for (size_t i = 0; i < numOperands(); ++i)
      floatOperand(i);
  }
  /// Operand \p i is i32 (token ids, targets).
  void i32Operand(size_t i, const char *role) const {
    if (operand(i).dtype != DType::I32)
      fail(operandText(i, role) + " must be i32, got " +
           dtypeName(operand(i).dtype));
  }
  /// Operand \p i has shape \p expected.
  void operandShape(size_t i, const Shape &expected,
                    const char *role = nullptr) const {
    if (in(i) != expected)
      fail(operandText(i, role) + " has shape " + formatShape(in(i)) +
           ", expected " + formatShape(expected));
  }
  /// Result \p r is f32 with shape \p expected.
  void resultF32(size_t r, const Shape &expected) const {
    if (out(r) != expected)
      fail("result " + std::to_string(r) + " (value " +
           std::to_string(op.results[r]) + ") has shape " +
           formatShape(out(r)) + ", expected " + formatShape(expected));
    if (result(r).dtype != DType::F32)
      fail("result " + std::to_string(r) + " must be f32, got " +
           dtypeName(result(r).dtype));
  }
  /// Result \p r has type \p expected (shape and dtype).
  void resultType(size_t r, const ValueType &expected,
                  const std::string &what) const {
    const ValueType &t = result(r);
    if (t.shape != expected.shape || t.dtype != expected.dtype)
      fail("result " + std::to_string(r) + " (value " +
           std::to_string(op.results[r]) + ") is " + typeText(t) +
           ", expected " + typeText(expected) + " (" + what + ")");
  }

  int64_t intAttr(const char *key, int64_t dflt = 0) const {
    return op.intAttr(key, dflt);
  }
  double floatAttr(const char *key, double dflt = 0) const {
    return op.floatAttr(key, dflt);
  }
  /// An integer attribute that must not be negative (axis, start, ...).
  int64_t nonNegative(const char *key) const {
    int64_t v = op.intAttr(key, 0);
    if (v < 0)
      fail("attribute '" + std::string(key) + "' must not be negative, got " +
           std::to_string(v));
    return v;
  }
  /// The `end` of slice and pad: not negative, or kDimS (the first S rows).
  int64_t rangeEnd() const {
    int64_t v = op.intAttr("end", 0);
    if (v < 0 && v != kDimS)
      fail("attribute 'end' must not be negative (or " + std::to_string(kDimS) +
           ", S), got " + std::to_string(v));
    return v;
  }
  /// A float attribute that must not be negative (or NaN).
  void nonNegativeFloat(const char *key) const {
    double v = op.floatAttr(key, 0);
    if (!(v >= 0))
      fail("attribute '" + std::string(key) + "' must not be negative, got " +
           attrText(v));
  }
  /// A string attribute that must be one of \p allowed.
  void choice(const char *key, std::initializer_list<const char *> allowed,
              const char *dflt) const {
    std::string v = op.strAttr(key, dflt);
    std::string list;
    for (const char *a : allowed) {
      if (v == a)
        return;
      list += std::string(list.empty() ? "" : ", ") + "'" + a + "'";
    }
    fail("attribute '" + std::string(key) + "' must be one of " + list +
         ", got '" + v + "'");
  }

  /// The expert an op names (moe, moe_grad): resolved before the rule runs.
  const Expert *namedExpert = nullptr;
  const Layer *namedLayer = nullptr;
  const Param *namedParam = nullptr;
  /// Checks the op's region as a fused body.
  void checkFusedBody() const;
};

//===----------------------------------------------------------------------===//
// Type rules, one per op or op family
//===----------------------------------------------------------------------===//

namespace {

void checkParamRef(OpChecker &c) {
  c.resultType(0, {c.namedParam->shape, c.namedParam->dtype},
               "the type of parameter '" + c.namedParam->name + "'");
}

void checkParamGrad(OpChecker &c) {
  c.floatOperand(0, "gradient");
  c.operandShape(0, c.namedParam->shape, "gradient");
}

/// apply_layers, apply_layers_grad: instances in range; the activation in,
/// the activation out.
void checkApplyLayers(OpChecker &c) {
  const Layer &l = *c.namedLayer;
  bool grad = c.kind == OpKind::ApplyLayersGrad;
  const char *fn = grad ? "backward" : "forward";
  if (!l.functions.count(fn))
    c.fail("layer '" + l.name + "' has no " + fn + " function");
  int64_t first = c.nonNegative("first"), count = c.intAttr("count");
  if (count < 1 || first > l.count || count > l.count - first)
    c.fail("instances [" + std::to_string(first) + ", " +
           std::to_string(first + count) + ") are not instances of layer '" +
           l.name + "', which has " + std::to_string(l.count));
  auto f = l.functions.find("forward");
  if (f == l.functions.end() || f->second.args.empty())
    c.fail("layer '" + l.name + "' has no forward function");
  const ValueType &act = f->second.values[f->second.args[0]];
  if (c.operand(0).shape != act.shape || c.operand(0).dtype != act.dtype)
    c.fail("operand 0 is " + typeText(c.operand(0)) + ", but layer '" + l.name +
           "' takes " + typeText(act));
  c.resultType(0, act, "the activation of layer '" + l.name + "'");
}

void checkConstant(OpChecker &c) { c.resultF32(0, {}); }

void checkZeros(OpChecker &c) { c.resultF32(0, c.out(0)); }

void checkEmbedding(OpChecker &c) {
  c.i32Operand(0, "ids");
  c.floatOperand(1, "table");
  Shape out = c.rule(rules::embedding(c.in(0), c.in(1)));
  c.resultF32(0, out);
}

void checkEmbeddingGrad(OpChecker &c) {
  c.i32Operand(0, "ids");
  c.floatOperand(1, "gradient");
  // The result is table-shaped: the forward's rule maps (ids, it) to dy.
  Shape rows = c.rule(rules::embedding(c.in(0), c.out(0)));
  if (std::any_of(c.out(0).begin(), c.out(0).end(), isSymbolic))
    c.fail("the table gradient must be static, got " + formatShape(c.out(0)));
  c.operandShape(1, rows, "gradient");
  c.resultF32(0, c.out(0));
}

void checkMatmul(OpChecker &c) {
  c.floatOperands();
  Shape out = c.rule(rules::matmul(c.in(0), c.in(1),
                                   c.numOperands() > 2 ? &c.in(2) : nullptr));
  c.resultF32(0, out);
}

void checkWeightGrad(OpChecker &c) {
  c.floatOperands();
  Shape out = c.rule(rules::weightGrad(c.in(0), c.in(1)));
  c.resultF32(0, out);
}

void checkBinary(OpChecker &c) {
  c.floatOperands();
  Shape out = c.rule(rules::broadcast(c.in(0), c.in(1)));
  c.resultF32(0, out);
}

void checkReduceTo(OpChecker &c) {
  c.floatOperands();
  c.rule(rules::reduceTo(c.in(0), c.out(0)));
  c.resultF32(0, c.out(0));
}

/// Elementwise functions: the result has the operand's type.
void checkUnary(OpChecker &c) {
  c.floatOperands();
  if (c.kind == OpKind::Gelu)
    c.choice("approximate", {"none", "tanh"}, "none");
  c.resultType(0, c.operand(0), "the operand's type");
}

void checkUnaryGrad(OpChecker &c) {
  std::string kind = c.op.strAttr("kind");
  if (!unaryFnOf(kind))
    c.fail("attribute 'kind' must be one of " + unaryFnNames() + ", got '" +
           kind + "'");
  c.floatOperands();
  if (c.in(1) != c.in(0) || c.operand(1).dtype != c.operand(0).dtype)
    c.fail("the gradient " + typeText(c.operand(1)) +
           " must have the input's type " + typeText(c.operand(0)));
  c.resultType(0, c.operand(0), "the input's type");
}

void checkReduce(OpChecker &c) {
  c.floatOperands();
  Shape out = c.rule(
      rules::reduce(c.in(0), c.nonNegative("axis"), c.op.boolAttr("keepdim")));
  c.resultF32(0, out);
}

void checkReduceGrad(OpChecker &c) {
  c.choice("kind", {"sum", "mean", "max"}, "");
  c.floatOperands();
  Shape reduced = c.rule(
      rules::reduce(c.in(0), c.nonNegative("axis"), c.op.boolAttr("keepdim")));
  c.operandShape(1, reduced, "gradient");
  c.resultF32(0, c.in(0));
}

void checkSoftmax(OpChecker &c) {
  c.floatOperands();
  c.rule(rules::axis(c.nonNegative("axis"), c.in(0).size()));
  for (size_t i = 1; i < c.numOperands(); ++i)
    if (c.in(i) != c.in(0) || c.operand(i).dtype != c.operand(0).dtype)
      c.fail("operand " + std::to_string(i) + " is " + typeText(c.operand(i)) +
             ", expected " + typeText(c.operand(0)));
  c.resultType(0, c.operand(0), "the operand's type");
}

void positiveEps(OpChecker &c) {
  if (!(c.floatAttr("eps") > 0))
    c.fail("attribute 'eps' must be positive, got " +
           attrText(c.floatAttr("eps")));
}

void checkNorm(OpChecker &c) {
  c.floatOperands();
  bool layer = c.kind == OpKind::LayerNorm;
  c.rule(rules::norm(c.in(0), c.in(1),
                     layer && c.numOperands() > 2 ? &c.in(2) : nullptr));
  positiveEps(c);
  c.resultF32(0, c.in(0));
}

/// rmsnorm_grad (x, w, dy) -> (dx, dw); layernorm_grad also -> db.
void checkNormGrad(OpChecker &c) {
  c.floatOperands();
  c.rule(rules::norm(c.in(0), c.in(1), nullptr));
  c.operandShape(2, c.in(0), "gradient");
  positiveEps(c);
  size_t expected = c.kind == OpKind::LayerNormGrad ? 3 : 2;
  if (c.numResults() != expected)
    c.fail("expected " + std::to_string(expected) + " results, got " +
           std::to_string(c.numResults()));
  c.resultF32(0, c.in(0));
  for (size_t r = 1; r < expected; ++r)
    c.resultF32(r, c.in(1));
}

/// Movement ops keep the element type; the runtime moves floats only
/// (reshape, a view, also i32).
void sameDType(OpChecker &c, size_t r, bool floatOnly) {
  if (floatOnly)
    c.floatOperands();
  if (c.result(r).dtype != c.operand(0).dtype)
    c.fail("result " + std::to_string(r) + " is " +
           dtypeName(c.result(r).dtype) + ", but the operand is " +
           dtypeName(c.operand(0).dtype) + " (the element type cannot change)");
}

void checkReshape(OpChecker &c) {
  c.rule(rules::reshape(c.in(0), c.out(0)));
  sameDType(c, 0, false);
}

void checkTranspose(OpChecker &c) {
  Shape out = c.rule(rules::transpose(c.in(0), c.op.listAttr("perm")));
  sameDType(c, 0, true);
  c.resultType(0, {out, c.operand(0).dtype}, "the permuted operand");
}

void checkSplit(OpChecker &c) {
  std::vector<Shape> outs = c.rule(
      rules::split(c.in(0), c.op.listAttr("sizes"), c.nonNegative("axis")));
  if (outs.size() != c.numResults())
    c.fail("attribute 'sizes' has " + std::to_string(outs.size()) +
           " sizes for " + std::to_string(c.numResults()) + " results");
  for (size_t r = 0; r < outs.size(); ++r) {
    sameDType(c, r, true);
    c.resultType(r, {outs[r], c.operand(0).dtype},
                 "piece " + std::to_string(r));
  }
}

void checkConcat(OpChecker &c) {
  c.floatOperands();
  std::vector<Shape> shapes;
  for (size_t i = 0; i < c.numOperands(); ++i) {
    if (c.operand(i).dtype != c.result(0).dtype)
      c.fail("operand " + std::to_string(i) + " is " +
             dtypeName(c.operand(i).dtype) + ", but the result is " +
             dtypeName(c.result(0).dtype));
    shapes.push_back(c.in(i));
  }
  Shape out = c.rule(rules::concat(shapes, c.nonNegative("axis")));
  c.resultType(0, {out, c.operand(0).dtype}, "the joined operands");
}

void checkSlice(OpChecker &c) {
  Shape out = c.rule(rules::slice(c.in(0), c.nonNegative("axis"),
                                  c.nonNegative("start"), c.rangeEnd()));
  sameDType(c, 0, true);
  c.resultType(0, {out, c.operand(0).dtype}, "the slice");
}

void checkPad(OpChecker &c) {
  c.rule(rules::pad(c.in(0), c.out(0), c.nonNegative("axis"),
                    c.nonNegative("start"), c.rangeEnd()));
  sameDType(c, 0, true);
}

void checkRope(OpChecker &c) {
  c.floatOperands();
  c.rule(rules::rope(c.in(0), c.floatAttr("fraction", 1.0)));
  if (!(c.floatAttr("theta") > 0))
    c.fail("attribute 'theta' must be positive, got " +
           attrText(c.floatAttr("theta")));
  if (c.op.attr("scaling")) {
    c.choice("scaling", {"llama3"}, "");
    for (const char *k : {"factor", "low_freq_factor", "high_freq_factor",
                          "original_max_position"})
      if (!c.op.attr(k))
        c.fail("llama3 scaling needs attribute '" + std::string(k) + "'");
  }
  c.resultType(0, c.operand(0), "the operand's type");
}

void attentionAttrs(OpChecker &c) {
  c.nonNegative("window");
  c.nonNegativeFloat("softcap");
  c.nonNegativeFloat("scale");
}

void checkAttention(OpChecker &c) {
  c.floatOperands();
  Shape out = c.rule(rules::attention(c.in(0), c.in(1), c.in(2)));
  attentionAttrs(c);
  c.resultF32(0, out);
}

/// (q, k, v, o, do) -> (dq, dk, dv).
void checkAttentionGrad(OpChecker &c) {
  c.floatOperands();
  Shape out = c.rule(rules::attention(c.in(0), c.in(1), c.in(2)));
  c.operandShape(3, out, "output");
  c.operandShape(4, out, "output gradient");
  attentionAttrs(c);
  for (size_t r = 0; r < 3; ++r)
    c.resultF32(r, c.in(r));
}

/// moe (h, router) -> y; moe_grad (h, router, dy) -> (dh, drouter).
void checkMoe(OpChecker &c) {
  c.floatOperands();
  const Expert &e = *c.namedExpert;
  c.rule(rules::moe(c.in(0), c.in(1), e.count));
  int64_t k = c.intAttr("top_k");
  if (k < 1 || k > e.count)
    c.fail("attribute 'top_k' must be in [1, " + std::to_string(e.count) +
           "] (the experts of '" + e.name + "'), got " + std::to_string(k));
  c.nonNegativeFloat("aux_loss");
  // The expert runs on the [T, D] rows of h.
  const Shape &h = c.in(0);
  for (const auto &[name, f] : e.functions) {
    if (f.args.empty())
      continue;
    const Shape &t = f.values[f.args[0]].shape;
    if (t != Shape{kDimT, h.back()})
      c.fail("expert '" + e.name + "' function '" + name + "' takes " +
             formatShape(t) + " tokens, but the input " + formatShape(h) +
             " has rows of " + formatDim(h.back()));
  }
  if (c.kind == OpKind::Moe) {
    c.resultType(0, c.operand(0), "the input's type");
    return;
  }
  if (!e.functions.count("backward"))
    c.fail("expert '" + e.name + "' has no backward function");
  c.operandShape(2, h, "gradient");
  c.resultF32(0, h);
  c.resultF32(1, c.in(1));
}

void checkCrossEntropy(OpChecker &c) {
  c.floatOperand(0, "logits");
  c.i32Operand(1, "targets");
  c.rule(rules::crossEntropy(c.in(0), c.in(1)));
  if (c.kind == OpKind::CrossEntropy) {
    c.resultF32(0, {});
    return;
  }
  c.floatOperand(2, "loss gradient");
  c.operandShape(2, {}, "loss gradient");
  c.resultF32(0, c.in(0));
}

void checkLinearCrossEntropy(OpChecker &c) {
  c.floatOperand(0, "input");
  c.floatOperand(1, "weight");
  c.i32Operand(2, "targets");
  c.rule(rules::linearCrossEntropy(c.in(0), c.in(1),
                                   c.op.boolAttr("transpose_weight"), c.in(2)));
  c.nonNegativeFloat("softcap");
  if (c.kind == OpKind::LinearCrossEntropy) {
    c.resultF32(0, {});
    return;
  }
  c.floatOperand(3, "loss gradient");
  c.operandShape(3, {}, "loss gradient");
  c.resultF32(0, c.in(0));
  c.resultF32(1, c.in(1));
}

void checkFused(OpChecker &c) {
  c.floatOperands();
  for (size_t r = 0; r < c.numResults(); ++r)
    c.resultF32(r, c.out(r));
  c.checkFusedBody();
}

/// The C++ type of an attribute type's values (an Ops.def default).
template <AttrType T> struct AttrValue;
template <> struct AttrValue<AttrType::Int> { using type = int64_t; };
template <> struct AttrValue<AttrType::Float> { using type = double; };
template <> struct AttrValue<AttrType::Bool> { using type = bool; };
template <> struct AttrValue<AttrType::String> { using type = std::string; };
template <> struct AttrValue<AttrType::IntList> {
  using type = std::vector<int64_t>;
};

constexpr unsigned kWhereModel = kModel, kWhereLayer = kLayer,
                   kWhereAny = kAnyFn, kWhereFusable = kFusable;

/// The ops of the runtime, one entry per row of lib/Bundle/Ops.def in its
/// order (so indexed by OpKind).
const std::vector<OpSpec> &opTable() {
  static const std::vector<OpSpec> table = {
#define MTC_ATTR_REQ(Name, Type) AttrSpec{#Name, AttrType::Type, true, {}},
#define MTC_ATTR_OPT(Name, Type, Default)                                      \
  AttrSpec{#Name, AttrType::Type, false,                                       \
           Attr(AttrValue<AttrType::Type>::type(Default))},
#define MTC_OP(Kind, Name, MinOperands, MaxOperands, MinResults, MaxResults,   \
               Symbol, Where, Family, Rule, ...)                               \
  OpSpec{OpKind::Kind,  Name,       MinOperands,        MaxOperands,           \
         MinResults,    MaxResults, SymbolKind::Symbol, kWhere##Where,         \
         {__VA_ARGS__}, check##Rule},
#include "lib/Bundle/Ops.def"
  };
  return table;
}

} // namespace

const OpSpec *findOp(const std::string &name) {
  std::optional<OpKind> kind = opKindOf(name);
  return kind ? &opSpec(*kind) : nullptr;
}

const OpSpec &opSpec(OpKind kind) {
  return opTable()[static_cast<size_t>(kind)];
}

const AttrSpec *OpSpec::attr(const std::string &key) const {
  for (const AttrSpec &a : attrs)
    if (key == a.name)
      return &a;
  return nullptr;
}

Status checkAttributes(const Op &op, const OpSpec &spec) {
  for (const auto &[key, value] : op.attrs) {
    const AttrSpec *it = spec.attr(key);
    if (!it) {
      std::string known;
      for (const AttrSpec &a : spec.attrs)
        known += std::string(known.empty() ? "" : ", ") + a.name;
      return Status::error(
          "unknown attribute '" + key + "' (" +
          (known.empty() ? "'" + op.name + "' has none" : "expected " + known) +
          ")");
    }
    if (!hasType(value, it->type))
      return Status::error("attribute '" + key + "' must be " +
                           attrTypeName(it->type) + ", got " + attrText(value));
  }
  for (const AttrSpec &a : spec.attrs)
    if (a.required && !op.attr(a.name))
      return Status::error("missing attribute '" + std::string(a.name) + "' (" +
                           attrTypeName(a.type) + ")");
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

/// Checks one function (and, through its fused ops, their bodies).
class FunctionChecker {
public:
  FunctionChecker(const Bundle &b, FunctionKind kind, const Layer *layer,
                  const Expert *expert, const Function &fn, std::string where)
      : b(b), kind(kind), layer(layer), expert(expert), fn(fn),
        where(std::move(where)) {}

  const Bundle &b;
  FunctionKind kind;
  const Layer *layer;   ///< the layer of a layer or expert function
  const Expert *expert; ///< the expert of an expert function
  const Function &fn;
  std::string where;

  [[noreturn]] void fail(const std::string &what) const {
    throw ValidationError{where + ": " + what};
  }

  void run() {
    checkDims();
    std::vector<bool> defined(fn.values.size(), false);
    auto define = [&](int v, const std::string &what) {
      if (defined[v])
        fail(what + " defines value " + std::to_string(v) +
             ", which is already defined");
      defined[v] = true;
    };
    for (size_t i = 0; i < fn.args.size(); ++i)
      define(fn.args[i], "argument " + std::to_string(i));
    for (size_t i = 0; i < fn.ops.size(); ++i) {
      const Op &op = fn.ops[i];
      std::string w = where + ": op " + std::to_string(i) + " '" + op.name +
                      "'" + (op.loc.empty() ? "" : " at " + op.loc);
      for (size_t k = 0; k < op.operands.size(); ++k)
        if (!defined[op.operands[k]])
          throw ValidationError{w + ": operand " + std::to_string(k) +
                                " is value " + std::to_string(op.operands[k]) +
                                ", which no argument or earlier op defines"};
      for (size_t r = 0; r < op.results.size(); ++r) {
        if (defined[op.results[r]])
          throw ValidationError{w + ": result " + std::to_string(r) +
                                " is value " + std::to_string(op.results[r]) +
                                ", which is already defined"};
        defined[op.results[r]] = true;
      }
      checkOp(op, w);
    }
    for (size_t r = 0; r < fn.results.size(); ++r)
      if (!defined[fn.results[r]])
        fail("result " + std::to_string(r) + " is value " +
             std::to_string(fn.results[r]) + ", which nothing defines");
    for (size_t v = 0; v < defined.size(); ++v)
      if (!defined[v])
        fail("value " + std::to_string(v) +
             " is neither an argument nor an op result");
  }

private:
  /// B and S in model and layer functions, T in expert functions; static
  /// dims are positive.
  void checkDims() const {
    bool inExpert = expert != nullptr;
    for (size_t v = 0; v < fn.values.size(); ++v)
      for (Dim d : fn.values[v].shape) {
        bool ok = !isSymbolic(d) ? d >= 1 : inExpert ? d == kDimT : d != kDimT;
        if (ok)
          continue;
        std::string shape = formatShape(fn.values[v].shape);
        if (!isSymbolic(d))
          fail("value " + std::to_string(v) + " has shape " + shape +
               " (static dimensions are at least 1)");
        fail("value " + std::to_string(v) + " has shape " + shape +
             (inExpert ? ": an expert function's values have T, not B or S"
                       : ": T only appears in expert functions"));
      }
  }

  void checkOp(const Op &op, const std::string &w) {
    OpChecker c(*this, fn, op, w);
    const OpSpec *spec = findOp(op.name);
    if (!spec)
      c.fail("unknown op (the runtime has no kernel for '" + op.name + "')");
    c.kind = spec->kind;
    if (!(spec->where & static_cast<unsigned>(kind)))
      c.fail("is not valid in " + kindText(kind) + " (only in " +
             allowedText(spec->where) + ")");
    auto arity = [&](const char *what, size_t got, int min, int max) {
      if (static_cast<int>(got) >= min &&
          (max < 0 || static_cast<int>(got) <= max))
        return;
      std::string want =
          max < 0      ? "at least " + std::to_string(min)
          : min == max ? std::to_string(min)
                       : std::to_string(min) + " to " + std::to_string(max);
      c.fail("expected " + want + " " + what + ", got " + std::to_string(got));
    };
    arity("operands", op.operands.size(), spec->minOperands, spec->maxOperands);
    arity("results", op.results.size(), spec->minResults, spec->maxResults);
    if (op.region && spec->kind != OpKind::Fused)
      c.fail("has a region, but only fused ops have one");
    if (!op.region && spec->kind == OpKind::Fused)
      c.fail("has no region (its body)");
    checkAttrs(c, *spec);
    resolveSymbol(c, spec->symbol);
    spec->rule(c);
  }

  void checkAttrs(const OpChecker &c, const OpSpec &spec) const {
    if (Status st = checkAttributes(c.op, spec); !st.ok())
      c.fail(st.message());
  }

  void resolveSymbol(OpChecker &c, SymbolKind kind) const {
    const std::string &sym = c.op.symbol;
    switch (kind) {
    case SymbolKind::None:
      if (!sym.empty())
        c.fail("names '" + sym + "', but '" + c.op.name + "' names nothing");
      return;
    case SymbolKind::Param: {
      const std::vector<Param> &params = expert  ? expert->params
                                         : layer ? layer->params
                                                 : b.params;
      for (const Param &p : params)
        if (p.name == sym) {
          c.namedParam = &p;
          return;
        }
      c.fail("names no parameter of " + ownerText() + ": '" + sym + "'");
    }
    case SymbolKind::Layer:
      if (!(c.namedLayer = b.layer(sym)))
        c.fail("names no layer of the model: '" + sym + "'");
      return;
    case SymbolKind::Expert:
      if (!(c.namedExpert = layer ? layer->expert(sym) : nullptr))
        c.fail("names no expert of layer '" + (layer ? layer->name : "") +
               "': '" + sym + "'");
      return;
    }
  }

  std::string ownerText() const {
    if (expert)
      return "expert '" + expert->name + "' of layer '" + layer->name + "'";
    if (layer)
      return "layer '" + layer->name + "'";
    return "the model";
  }
};

void OpChecker::checkFusedBody() const {
  const Function &body = *op.region;
  if (body.args.size() != numOperands() || body.results.size() != numResults())
    fail("the region takes " + std::to_string(body.args.size()) +
         " arguments and returns " + std::to_string(body.results.size()) +
         " results for " + std::to_string(numOperands()) + " operands and " +
         std::to_string(numResults()) + " results");
  for (size_t i = 0; i < numOperands(); ++i) {
    const ValueType &a = body.values[body.args[i]];
    if (a.shape != in(i) || a.dtype != operand(i).dtype)
      fail("region argument " + std::to_string(i) + " is " + typeText(a) +
           ", but operand " + std::to_string(i) + " is " +
           typeText(operand(i)));
  }
  for (size_t r = 0; r < numResults(); ++r) {
    const ValueType &v = body.values[body.results[r]];
    if (v.shape != out(r) || v.dtype != result(r).dtype)
      fail("region result " + std::to_string(r) + " is " + typeText(v) +
           ", but result " + std::to_string(r) + " is " + typeText(result(r)));
  }
  FunctionChecker inner(fc.b, FunctionKind::Fused, fc.layer, fc.expert, body,
                        where + ": region");
  inner.run();
  // The iteration shape: what the reductions reduce, else the first
  // result's shape; every value of the body is bounded by it.
  Shape it = out(0);
  auto isReduction = [](const Op &o) {
    std::optional<OpKind> k = opKindOf(o.name);
    return k && (*k == OpKind::Sum || *k == OpKind::Mean || *k == OpKind::Max);
  };
  for (const Op &o : body.ops)
    if (isReduction(o)) {
      it = body.values[o.operands[0]].shape;
      break;
    }
  for (size_t k = 0; k < body.ops.size(); ++k) {
    const Op &o = body.ops[k];
    if (isReduction(o) &&
        (body.values[o.operands[0]].shape != it ||
         o.intAttr("axis") != static_cast<int64_t>(it.size()) - 1))
      fail("region: op " + std::to_string(k) + " '" + o.name +
           "' must reduce the last axis of the iteration shape " +
           formatShape(it));
  }
  for (size_t v = 0; v < body.values.size(); ++v) {
    if (Status s = rules::fusedValue(body.values[v].shape, it); !s)
      fail("region: value " + std::to_string(v) + ": " + s.message());
  }
}

//===----------------------------------------------------------------------===//
// The bundle
//===----------------------------------------------------------------------===//

namespace {

[[noreturn]] void fail(const std::string &where, const std::string &what) {
  throw ValidationError{where + ": " + what};
}

void checkParams(const std::vector<Param> &params, const std::string &where) {
  std::set<std::string> names;
  for (const Param &p : params) {
    std::string w = where + ": parameter '" + p.name + "'";
    if (p.name.empty() || !names.insert(p.name).second)
      fail(w, "parameter names must be unique and non-empty");
    if (p.dtype == DType::I32)
      fail(w, "must be f32 or bf16, got i32");
    for (Dim d : p.shape)
      if (d < 1)
        fail(w, "shape " + formatShape(p.shape) +
                    " (parameter dimensions are static and at least 1)");
    size_t args = p.init == "zeros" || p.init == "ones"             ? 0
                  : p.init == "normal" || p.init == "scaled_normal" ? 1
                  : p.init == "uniform"                             ? 2
                                                                    : SIZE_MAX;
    if (args == SIZE_MAX)
      fail(w, "unknown initializer '" + p.init +
                  "' (expected zeros, ones, normal, scaled_normal or "
                  "uniform)");
    if (p.initArgs.size() != args)
      fail(w, "initializer '" + p.init + "' takes " + std::to_string(args) +
                  " argument(s), got " + std::to_string(p.initArgs.size()));
    for (double a : p.initArgs)
      if (!std::isfinite(a))
        fail(w, "initializer arguments must be finite");
    if (args == 1 && p.initArgs[0] < 0)
      fail(w, "the standard deviation must not be negative");
    if (args == 2 && p.initArgs[0] > p.initArgs[1])
      fail(w, "uniform bounds must satisfy lo <= hi");
  }
}

/// Function \p name of \p fns: (args) -> (results) with these types.
void checkSignature(const Function &fn, const std::string &where,
                    const std::vector<ValueType> &args,
                    const std::vector<ValueType> &results) {
  auto list = [](const Function &f, const std::vector<int> &ids) {
    std::string s = "(";
    for (size_t i = 0; i < ids.size(); ++i)
      s += (i ? ", " : "") + typeText(f.values[ids[i]]);
    return s + ")";
  };
  auto want = [](const std::vector<ValueType> &ts) {
    std::string s = "(";
    for (size_t i = 0; i < ts.size(); ++i)
      s += (i ? ", " : "") + typeText(ts[i]);
    return s + ")";
  };
  bool ok =
      fn.args.size() == args.size() && fn.results.size() == results.size();
  for (size_t i = 0; ok && i < args.size(); ++i) {
    const ValueType &t = fn.values[fn.args[i]];
    ok = t.shape == args[i].shape && t.dtype == args[i].dtype;
  }
  for (size_t i = 0; ok && i < results.size(); ++i) {
    const ValueType &t = fn.values[fn.results[i]];
    ok = t.shape == results[i].shape && t.dtype == results[i].dtype;
  }
  if (!ok)
    fail(where, "signature " + list(fn, fn.args) + " -> " +
                    list(fn, fn.results) + ", expected " + want(args) + " -> " +
                    want(results));
}

const ValueType &typeOf(const Function &f, int id) { return f.values[id]; }

/// A layer's forward (x) -> (y, saved...) with y of x's type, and its
/// backward (x, dy, saved...) -> (dx).
void checkLayerSignatures(const Layer &l, const std::string &where) {
  for (const auto &[name, fn] : l.functions)
    if (name != "forward" && name != "backward" && name != "backward_full")
      fail(where + ": function '" + name + "'",
           "a layer has only 'forward', 'backward' and 'backward_full' "
           "functions");
  auto f = l.functions.find("forward");
  auto g = l.functions.find("backward");
  if (f == l.functions.end()) {
    if (g != l.functions.end())
      fail(where, "has a backward but no forward function");
    return;
  }
  const Function &fw = f->second;
  std::string wf = where + ": function 'forward'";
  if (fw.args.size() != 1 || fw.results.empty())
    fail(wf, "takes the activation and returns it (then what it saves), "
             "got " +
                 std::to_string(fw.args.size()) + " argument(s) and " +
                 std::to_string(fw.results.size()) + " result(s)");
  const ValueType &act = typeOf(fw, fw.args[0]);
  if (act.dtype != DType::F32)
    fail(wf, "the activation must be f32, got " + typeText(act));
  std::vector<ValueType> results;
  for (int r : fw.results)
    results.push_back(typeOf(fw, r));
  results[0] = act;
  checkSignature(fw, wf, {act}, results);
  if (g == l.functions.end())
    return;
  std::vector<ValueType> args = {act, act};
  for (size_t r = 1; r < fw.results.size(); ++r)
    args.push_back(typeOf(fw, fw.results[r]));
  checkSignature(g->second, where + ": function 'backward'", args, {act});
  // Mixed plans: the backward of an instance that kept its input alone.
  auto full = l.functions.find("backward_full");
  if (full != l.functions.end())
    checkSignature(full->second, where + ": function 'backward_full'",
                   {act, act}, {act});
}

/// An expert's forward ([T, D]) -> ([T, D]) and backward ([T, D], [T, D]) ->
/// ([T, D]).
void checkExpertSignatures(const Expert &e, const std::string &where) {
  for (const auto &[name, fn] : e.functions)
    if (name != "forward" && name != "backward")
      fail(where + ": function '" + name + "'",
           "an expert has only 'forward' and 'backward' functions");
  auto f = e.functions.find("forward");
  if (f == e.functions.end())
    fail(where, "missing function 'forward'");
  const Function &fw = f->second;
  if (fw.args.size() != 1)
    fail(where + ": function 'forward'", "takes the [T, D] tokens, got " +
                                             std::to_string(fw.args.size()) +
                                             " arguments");
  ValueType t = typeOf(fw, fw.args[0]);
  if (t.shape.size() != 2 || t.shape[0] != kDimT || t.dtype != DType::F32)
    fail(where + ": function 'forward'",
         "takes [T, D] f32 tokens, got " + typeText(t));
  checkSignature(fw, where + ": function 'forward'", {t}, {t});
  auto g = e.functions.find("backward");
  if (g != e.functions.end())
    checkSignature(g->second, where + ": function 'backward'", {t, t}, {t});
}

/// "program 3 (layers Block backward)": a command for messages.
std::string describeCommand(const PlanCommand &c, size_t index) {
  std::string d = "program " + std::to_string(index) + " (" + c.op;
  if (c.op == "layers")
    d += " " + c.strAttr("layer") + " " + c.strAttr("direction");
  else if (c.op == "stage")
    d += " [" + std::to_string(c.intAttr("begin")) + ", " +
         std::to_string(c.intAttr("end")) + ")";
  return d + ")";
}

/// One layers body: the commands the streaming runtime relies on, each
/// once, in an order that keeps every buffer valid (docs/streaming.md,
/// "The step program").
void checkLayersBody(const StepPlan &s, const PlanCommand &loop,
                     const std::string &where) {
  const bool forward = loop.strAttr("direction") == "forward";
  std::map<std::string, std::vector<size_t>> at; // command -> positions
  for (size_t i = 0; i < loop.body.size(); ++i)
    at[loop.body[i].op].push_back(i);
  auto once = [&](const char *op, const std::string &why) -> size_t {
    auto it = at.find(op);
    size_t n = it == at.end() ? 0 : it->second.size();
    if (n != 1)
      fail(where, n == 0 ? "the body has no '" + std::string(op) + "': " + why
                         : "the body has " + std::to_string(n) + " '" + op +
                               "' commands; it needs exactly one: " + why);
    return it->second.front();
  };
  auto body = [&](size_t i) {
    return "body " + std::to_string(i) + " (" + loop.body[i].op + ")";
  };
  const size_t compute = at["compute"].front(); // exactly one (the reader)
  const size_t wait = once(
      "wait_weights", "the compute would run on weights it never waited for");
  if (wait > compute)
    fail(where, body(wait) + " comes after the compute at body " +
                    std::to_string(compute) +
                    ", which would not wait for its weights");
  size_t firstLoad = wait;
  int64_t prefetchAhead = 0;
  if (at.count("prefetch")) {
    const size_t pf = once("prefetch", "one copy ahead per instance");
    const PlanCommand &c = loop.body[pf];
    prefetchAhead = c.intAttr("ahead");
    if (prefetchAhead >= s.prefetchDepth)
      fail(where, body(pf) + ": ahead " + std::to_string(prefetchAhead) +
                      " needs more than the plan's " +
                      std::to_string(s.prefetchDepth) +
                      " weight slots (prefetch_depth); at most " +
                      std::to_string(s.prefetchDepth - 1));
    if (c.strAttr("event") != loop.body[wait].strAttr("event"))
      fail(where, body(wait) + " waits for event '" +
                      loop.body[wait].strAttr("event") +
                      "', but the prefetch records '" + c.strAttr("event") +
                      "'");
    firstLoad = std::min(firstLoad, pf);
  }
  if (forward) {
    // The deferred AdamW update of an instance runs before its first
    // weight copy of the step, or the step computes with last step's
    // weights.
    const size_t up = once("optimizer_update",
                           "the deferred AdamW update of every instance must "
                           "run before its weights are copied");
    if (up > firstLoad)
      fail(where, body(up) + " comes after " + body(firstLoad) +
                      ": an instance's weights would be copied before its "
                      "AdamW update");
    if (loop.body[up].intAttr("ahead") < prefetchAhead)
      fail(where, body(up) + ": ahead " +
                      std::to_string(loop.body[up].intAttr("ahead")) +
                      " is below the prefetch's " +
                      std::to_string(prefetchAhead) +
                      ": an instance's weights would be copied before its "
                      "AdamW update");
    const size_t save = once("save", "the backward needs what the forward "
                                     "keeps for it");
    if (loop.body[save].strAttr("to") != s.checkpoints)
      fail(where, body(save) + " keeps to " + loop.body[save].strAttr("to") +
                      " memory, but the plan keeps its checkpoints in " +
                      s.checkpoints + " memory");
    if (save > compute)
      fail(where, body(save) + " comes after the compute at body " +
                      std::to_string(compute));
  } else {
    const size_t restore =
        once("restore", "the backward needs what the forward kept for it");
    if (loop.body[restore].strAttr("from") != s.checkpoints)
      fail(where, body(restore) + " restores from " +
                      loop.body[restore].strAttr("from") +
                      " memory, but the plan keeps its checkpoints in " +
                      s.checkpoints + " memory");
    if (restore > compute)
      fail(where, body(restore) + " comes after the compute at body " +
                      std::to_string(compute));
    const size_t ret = once("grad_return", "every instance's gradients must "
                                           "reach the host exactly once");
    if (ret < compute)
      fail(where, body(ret) + " comes before the compute at body " +
                      std::to_string(compute) + ", whose gradients it returns");
  }
}

/// The program as a whole (docs/streaming.md, "The step program"): its
/// commands run forward_backward's ops once each, in order (stages for the
/// model-level ops, a layers loop for each apply_layers op); the model-level
/// weights are loaded before anything runs and their gradients returned
/// after everything ran; every layer instance is computed once forward and
/// once backward.
void checkStepProgram(const Bundle &b) {
  const StepPlan &s = *b.step;
  auto fb = b.functions.find("forward_backward");
  const size_t numOps = fb == b.functions.end() ? 0 : fb->second.ops.size();
  size_t next = 0;
  int loads = 0, returns = 0;
  std::set<std::pair<std::string, int64_t>> seen[2]; // backward, forward
  for (size_t i = 0; i < s.program.size(); ++i) {
    const PlanCommand &c = s.program[i];
    const std::string where = "step: " + describeCommand(c, i);
    if (c.op == "load_model_weights") {
      if (++loads > 1 || i != 0)
        fail(where, "the model-level weights are loaded once, by the "
                    "program's first command");
      continue;
    }
    if (loads == 0)
      fail(where, "runs before the model-level weights are loaded (the "
                  "program must start with load_model_weights)");
    if (c.op == "return_model_grads") {
      if (++returns > 1 || i + 1 != s.program.size())
        fail(where, "the model-level gradients are returned once, by the "
                    "program's last command, after everything that computes "
                    "them");
      continue;
    }
    const size_t begin = static_cast<size_t>(
        c.op == "stage" ? c.intAttr("begin") : c.intAttr("op_index"));
    const size_t end = static_cast<size_t>(
        c.op == "stage" ? c.intAttr("end") : c.intAttr("op_index") + 1);
    if (begin != next)
      fail(where, begin > next
                      ? "skips ops [" + std::to_string(next) + ", " +
                            std::to_string(begin) +
                            ") of forward_backward (the first: " +
                            fb->second.ops[next].name +
                            (fb->second.ops[next].symbol.empty()
                                 ? std::string()
                                 : " @" + fb->second.ops[next].symbol) +
                            "): no command runs them"
                      : "runs op " + std::to_string(begin) +
                            " of forward_backward again or out of order "
                            "(the commands before it ran up to op " +
                            std::to_string(next) + ")");
    next = end;
    if (c.op != "layers")
      continue;
    const bool forward = c.strAttr("direction") == "forward";
    for (int64_t k = c.intAttr("first");
         k < c.intAttr("first") + c.intAttr("count"); ++k)
      if (!seen[forward].insert({c.strAttr("layer"), k}).second)
        fail(where, "instance " + std::to_string(k) + " of layer '" +
                        c.strAttr("layer") + "' already ran " +
                        (forward ? "forward" : "backward") + " in this step");
    checkLayersBody(s, c, where);
  }
  const std::string where = "step: program";
  if (loads == 0)
    fail(where, "no load_model_weights: the model-level weights would never "
                "reach the device");
  if (next != numOps)
    fail(where, "ends at op " + std::to_string(next) +
                    " of forward_backward's " + std::to_string(numOps) +
                    ": ops [" + std::to_string(next) + ", " +
                    std::to_string(numOps) + ") run in no command");
  if (returns == 0)
    fail(where, "no return_model_grads: the model-level gradients would "
                "never reach the host");
  for (const Layer &l : b.layers)
    for (int64_t k = 0; k < l.count; ++k)
      for (int forward = 0; forward < 2; ++forward)
        if (!seen[forward].count({l.name, k}))
          fail(where, "instance " + std::to_string(k) + " of layer '" + l.name +
                          "' is never computed " +
                          (forward ? "forward" : "backward"));
}

/// The buffers the streaming runtime binds by name (docs/streaming.md,
/// "Device buffers"), and the layers loops' agreement with their ops.
void checkStep(const Bundle &b) {
  const StepPlan &s = *b.step;
  const std::string where = "step";
  auto need = [&](const std::string &name, const char *kind,
                  const char *space) {
    const PlanBuffer *buf = s.buffer(name);
    if (!buf)
      fail(where, "no buffer '" + name + "' (" + kind + ", " + space +
                      " memory), which the runtime uses");
    if (buf->kind != kind || buf->space != space)
      fail(where, "buffer '" + name + "' is " + buf->kind + " in " +
                      buf->space + " memory, expected " + kind + " in " +
                      space + " memory");
  };
  need("model.weights", "model_weights", "device");
  need("model.grads", "model_grads", "device");
  for (int64_t i = 0; i < s.prefetchDepth; ++i)
    need("weights." + std::to_string(i), "weights", "device");
  need("grads.0", "grads", "device");
  need("grads.1", "grads", "device");
  need("activations", "activations", "device");
  need("checkpoints", "checkpoints", "device");
  need("stage", "stage", "device");
  need("workspace", "workspace", "device");
  if (s.buffer("activations.host")) {
    need("activations.host", "activations", "host");
    if (s.checkpoints != "host")
      fail(where, "buffer 'activations.host' needs checkpoints in host "
                  "memory");
  }
  if (s.buffer("grads.host"))
    need("grads.host", "grads", "host");
  if (s.gradDType == "bf16" && s.buffer("grads.host"))
    fail(where, "grad_dtype bf16 is the deferred optimizer's, but the plan "
                "has the immediate optimizer's gradient ring ('grads.host')");
  if (s.checkpointEvery > 1) {
    // Segment checkpointing: a segment's inputs, and its instances resident.
    need("segment", "activations", "device");
    if (s.recompute != "full")
      fail(where, "checkpoint_every " + std::to_string(s.checkpointEvery) +
                      " needs recompute 'full', got '" + s.recompute + "'");
    if (s.prefetchDepth < s.checkpointEvery)
      fail(where, "checkpoint_every " + std::to_string(s.checkpointEvery) +
                      " needs at least as many weight slots (prefetch_depth " +
                      std::to_string(s.prefetchDepth) + ")");
  }
  if (s.selectiveLayers >= 0 && s.recompute != "selective")
    fail(where, "selective_layers " + std::to_string(s.selectiveLayers) +
                    " needs recompute 'selective', got '" + s.recompute + "'");
  if (s.buffer("stage.host")) {
    need("stage.host", "stage", "host");
    if (!s.buffer("activations.host"))
      fail(where, "buffer 'stage.host' needs host activations "
                  "('activations.host')");
  }
  auto fb = b.functions.find("forward_backward");
  for (size_t i = 0; i < s.program.size(); ++i) {
    const PlanCommand &c = s.program[i];
    if (c.op != "layers")
      continue;
    // The reader checked that op_index is an apply_layers(_grad) of the
    // loop's layer in forward_backward.
    std::string w = where + ": program " + std::to_string(i);
    int64_t index = c.intAttr("op_index", -1);
    const Layer *l = b.layer(c.strAttr("layer"));
    if (fb == b.functions.end() || index < 0 ||
        index >= static_cast<int64_t>(fb->second.ops.size()) || !l)
      fail(w, "the loop names no apply_layers op of forward_backward");
    const Op &op = fb->second.ops[static_cast<size_t>(index)];
    if (op.intAttr("first") != c.intAttr("first") ||
        op.intAttr("count") != c.intAttr("count"))
      fail(w, "the loop runs instances [" + std::to_string(c.intAttr("first")) +
                  ", +" + std::to_string(c.intAttr("count")) + ") but op " +
                  std::to_string(c.intAttr("op_index")) + " applies [" +
                  std::to_string(op.intAttr("first")) + ", +" +
                  std::to_string(op.intAttr("count")) + ")");
    if (!l->functions.count("forward") || !l->functions.count("backward"))
      fail(w, "layer '" + l->name +
                  "' needs a forward and a backward function to stream");
    if (s.selectiveLayers >= 0 && !l->functions.count("backward_full"))
      fail(w, "selective_layers needs layer '" + l->name +
                  "' to have a backward_full function");
  }
  checkStepProgram(b);
}

void validateBundle(const Bundle &b) {
  checkParams(b.params, "model");
  std::set<std::string> layerNames;
  for (const Layer &l : b.layers) {
    std::string wl = "layer '" + l.name + "'";
    if (l.name.empty() || !layerNames.insert(l.name).second)
      fail(wl, "layer names must be unique and non-empty");
    checkParams(l.params, wl);
    for (const Expert &e : l.experts) {
      std::string we = wl + ": expert '" + e.name + "'";
      checkParams(e.params, we);
      checkExpertSignatures(e, we);
      for (const auto &[name, fn] : e.functions)
        FunctionChecker(b, FunctionKind::Expert, &l, &e, fn,
                        we + ": function '" + name + "'")
            .run();
    }
    checkLayerSignatures(l, wl);
    for (const auto &[name, fn] : l.functions)
      FunctionChecker(b, FunctionKind::Layer, &l, nullptr, fn,
                      wl + ": function '" + name + "'")
          .run();
  }
  const ValueType loss{{}, DType::F32};
  for (const auto &[name, fn] : b.functions) {
    std::string w = "function '" + name + "'";
    if (name != "forward" && name != "forward_backward")
      fail(w, "the model has only 'forward' and 'forward_backward' functions");
    // Tokens and targets are [B, S] i32; a model may declare either dim
    // static (a learned position table of S rows: checkTokenShapes binds
    // it).
    ValueType ids{{kDimB, kDimS}, DType::I32};
    if (!fn.args.empty()) {
      const Shape &declared = fn.values[fn.args[0]].shape;
      if (declared.size() == 2 && (declared[0] == kDimB || declared[0] > 0) &&
          (declared[1] == kDimS || declared[1] > 0))
        ids.shape = declared;
    }
    checkSignature(fn, w, {ids, ids}, {loss});
    FunctionChecker(b, FunctionKind::Model, nullptr, nullptr, fn, w).run();
  }
  if (b.step)
    checkStep(b);
}

} // namespace

Status validate(const Bundle &b) {
  try {
    validateBundle(b);
    return Status::success();
  } catch (const ValidationError &e) {
    return Status::error(e.message);
  }
}

} // namespace mtc::bundle
