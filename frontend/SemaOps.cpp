//===- SemaOps.cpp - The operations of forward bodies ---------------------===//
//
// Part of mtc. The operation table of the language, generated from
// DslOps.def (names, families, argument lists), the public lookups of Sema.h,
// and the first half of checking one call: binding its arguments to the
// signature, evaluating its tensors and reading its compile-time arguments
// (OpCall). The rules of each family (dtypes, shape inference with
// lib/Support/Shape.h, the attributes MLIRGen reads) are in SemaOpsMath.cpp,
// SemaOpsShape.cpp and SemaOpsAttention.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaOpCall.h"

#include <algorithm>
#include <cmath>

namespace mtc::sema {

//===----------------------------------------------------------------------===//
// The op table
//===----------------------------------------------------------------------===//

const std::vector<OpSpec> &opTable() {
  static const std::vector<OpSpec> table = {
#define MTC_ARG(Name, Kind) {#Name, ArgKind::Kind, true},
#define MTC_OPT(Name, Kind) {#Name, ArgKind::Kind, false},
#define MTC_DSL_OP(Kind, Name, Family, Form, Args)                             \
  {Name, OpKind::Kind, OpFamily::Family, OpForm::Form, {Args}},
#include "frontend/DslOps.def"
  };
  return table;
}

namespace {

bool isTensorKind(ArgKind k) {
  return k == ArgKind::Tensor || k == ArgKind::OptTensor;
}

/// The callable operation called \p name, or null.
const OpSpec *findCallableOp(const std::string &name) {
  for (const OpSpec &spec : opTable())
    if (spec.form != OpForm::Internal && name == spec.name)
      return &spec;
  return nullptr;
}

/// "(x, w, eps[, offset])", "(x, w[, b], eps)", "(a, b, ...[, axis])".
std::string signatureText(const OpSpec &spec) {
  std::string s = "(";
  bool first = true;
  if (spec.form == OpForm::Variadic) {
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
// OpCall: reading the arguments of one call
//===----------------------------------------------------------------------===//

std::string OpCall::argName(size_t i) const {
  return "argument '" + std::string(spec.args[i].name) + "' of " + opName;
}

bool OpCall::number(size_t i, double dflt, double &v) {
  v = dflt;
  if (!bound[i])
    return true;
  ConfigValue c;
  if (!ck.evalConst(*bound[i], c)) {
    ok = false;
    return false;
  }
  v = c.value;
  return true;
}

void OpCall::integer(size_t i, int64_t dflt, int64_t minValue, int64_t &v) {
  if (!bound[i]) {
    v = dflt;
    return;
  }
  if (!ck.evalInt(*bound[i], spec.args[i].name, minValue, kMaxExactInt, v))
    ok = false;
}

void OpCall::boolean(size_t i, bool dflt, bool &v) {
  v = dflt;
  if (!bound[i])
    return;
  if (bound[i]->kind != ast::Expr::Kind::Bool) {
    ck.rep.error(boundLoc[i], argName(i) + " must be true or false");
    ok = false;
    return;
  }
  v = bound[i]->boolean;
}

void OpCall::string(size_t i, const char *dflt, std::string &v) {
  v = dflt;
  if (!bound[i])
    return;
  if (bound[i]->kind != ast::Expr::Kind::String) {
    ck.rep.error(boundLoc[i], argName(i) + " must be a string");
    ok = false;
    return;
  }
  v = bound[i]->text;
}

void OpCall::intList(size_t i, int64_t minValue, std::vector<int64_t> &v) {
  if (!bound[i])
    return;
  if (bound[i]->kind != ast::Expr::Kind::List) {
    ck.rep.error(boundLoc[i], argName(i) + " must be a list such as [64, 64]");
    ok = false;
    return;
  }
  for (const auto &x : bound[i]->operands) {
    int64_t n = 0;
    if (!x || !ck.evalInt(*x, spec.args[i].name, minValue, kMaxDim, n))
      ok = false;
    v.push_back(n);
  }
}

void OpCall::positive(size_t i, double v, bool allowZero) {
  if (!bound[i] || (allowZero ? v >= 0 : v > 0))
    return;
  ck.rep.error(boundLoc[i],
               argName(i) +
                   (allowZero ? " must not be negative" : " must be positive") +
                   ", got " + formatNumber(v));
  ok = false;
}

bool OpCall::requireFloat(int id) {
  if (id < 0 || isFloat(type(id).dtype))
    return true;
  ck.rep.error(e.loc, opName + " cannot operate on i32 values");
  ok = false;
  return false;
}

void OpCall::shapeError(const std::string &err) {
  ck.rep.error(e.loc, "shape mismatch in " + opName + ": " + err);
  ok = false;
}

DimContext OpCall::dimContext() const {
  return st.kind == ScopeKind::Expert  ? DimContext::Expert
         : st.kind == ScopeKind::Layer ? DimContext::Layer
                                       : DimContext::Model;
}

std::vector<Val> OpCall::failed() const {
  return std::vector<Val>(std::max<size_t>(wanted, 1), Val::poison());
}

std::vector<Val> OpCall::one(int id) const {
  std::vector<Val> r = failed();
  r[0] = Val::tensor(id);
  return r;
}

int OpCall::emit(std::vector<int> operands, std::vector<ValueType> results,
                 std::string symbol,
                 std::vector<std::pair<std::string, AttrValue>> attrs) {
  return ck.emit(st, kind, e.loc, std::move(operands), std::move(results),
                 std::move(symbol), std::move(attrs));
}

std::vector<Val> OpCall::unhandled() {
  ck.rep.error(e.loc, "internal error: the " +
                          std::string(opFamilyName(spec.family)) +
                          " rules have no case for " + opName);
  ok = false;
  return failed();
}

//===----------------------------------------------------------------------===//
// Binding a call and dispatching it to its family
//===----------------------------------------------------------------------===//

std::vector<Val> Checker::evalOp(const ast::Expr &e, FnState &st,
                                 size_t wanted) {
  std::vector<Val> failed(std::max<size_t>(wanted, 1), Val::poison());
  const OpSpec *spec = findCallableOp(e.text);
  if (!spec) {
    std::vector<std::string> candidates;
    for (const OpSpec &s : opTable())
      if (s.form != OpForm::Internal)
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
  std::vector<const ast::Expr *> tensors; // a variadic op's inputs
  OpCall c(*this, e, st, *spec, wanted);
  std::vector<const ast::Expr *> &bound = c.bound;
  std::vector<SourceLoc> &boundLoc = c.boundLoc;
  if (spec->form == OpForm::Variadic) {
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
  bool &ok = c.ok;
  std::vector<int> &ids = c.ids;
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
  for (const ast::Expr *x : tensors)
    c.inputs.push_back(tensorArg(x, x ? x->loc : e.loc));

  switch (spec->family) {
  case OpFamily::Linear:
    return checkLinearOp(c);
  case OpFamily::Elementwise:
    return checkElementwiseOp(c);
  case OpFamily::Reduction:
    return checkReductionOp(c);
  case OpFamily::Norm:
    return checkNormOp(c);
  case OpFamily::Shape:
    return checkShapeOp(c);
  case OpFamily::Attention:
    return checkAttentionOp(c);
  case OpFamily::Moe:
    return checkMoeOp(c);
  case OpFamily::Loss:
    return checkLossOp(c);
  case OpFamily::Model: // internal operations only: never called by name
    break;
  }
  return c.unhandled();
}

} // namespace mtc::sema

//===----------------------------------------------------------------------===//
// Public lookups of Sema.h
//===----------------------------------------------------------------------===//

namespace mtc {

const char *opKindName(OpKind kind) { return sema::opSpec(kind).name; }

std::optional<OpKind> opKindByName(const std::string &name) {
  for (const sema::OpSpec &spec : sema::opTable())
    if (name == spec.name)
      return spec.kind;
  return std::nullopt;
}

OpFamily opFamily(OpKind kind) { return sema::opSpec(kind).family; }

const char *opFamilyName(OpFamily family) {
  static const char *const names[] = {
#define MTC_DSL_FAMILY(Family) #Family,
#include "frontend/DslOps.def"
  };
  return names[static_cast<size_t>(family)];
}

bool isCallableOp(OpKind kind) {
  return sema::opSpec(kind).form != sema::OpForm::Internal;
}

std::string opSignature(OpKind kind) {
  const sema::OpSpec &spec = sema::opSpec(kind);
  return spec.form == sema::OpForm::Internal ? std::string()
                                             : sema::signatureText(spec);
}

} // namespace mtc
