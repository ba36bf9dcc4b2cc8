//===- SemaExpr.cpp - Checking forward bodies -----------------------------===//
//
// Part of mtc. The statement and expression side of Sema: forward signatures,
// name resolution, the operation table, shape and dtype inference, layer
// application counting and `repeat` unrolling. Each forward body becomes a
// Function in SSA form; a failed expression yields a poisoned value that later
// uses pass on silently, so every independent error is reported once.
//
//===----------------------------------------------------------------------===//

#include "frontend/SemaInternal.h"

#include <algorithm>
#include <cmath>

namespace mtc::sema {

//===----------------------------------------------------------------------===//
// Scopes and emission
//===----------------------------------------------------------------------===//

const std::vector<Param> *Checker::scopeParams(const FnState &st) const {
  switch (st.kind) {
  case ScopeKind::Model:
    return &out.params;
  case ScopeKind::Layer:
    return &out.layers[st.layer].params;
  case ScopeKind::Expert:
    return &out.layers[st.layer].experts[st.expert].params;
  }
  return nullptr;
}

const std::map<std::string, size_t> *
Checker::scopeParamIndex(const FnState &st) const {
  switch (st.kind) {
  case ScopeKind::Model:
    return &modelParams;
  case ScopeKind::Layer:
    return &layers[st.layer].params;
  case ScopeKind::Expert:
    return &layers[st.layer].expertParams[st.expert];
  }
  return nullptr;
}

int Checker::emit(FnState &st, OpKind kind, SourceLoc loc,
                  std::vector<int> operands, std::vector<ValueType> results,
                  std::string symbol,
                  std::vector<std::pair<std::string, AttrValue>> attrs) {
  Function &fn = *st.fn;
  Operation op;
  op.kind = kind;
  op.loc = loc;
  op.operands = std::move(operands);
  op.symbol = std::move(symbol);
  op.attrs = std::move(attrs);
  int first = static_cast<int>(fn.types.size());
  for (ValueType &t : results) {
    op.results.push_back(static_cast<int>(fn.types.size()));
    fn.types.push_back(std::move(t));
  }
  fn.ops.push_back(std::move(op));
  if (fn.ops.size() > kMaxOps && !st.aborted) {
    st.aborted = true;
    rep.error(loc, st.what + " has more than " + std::to_string(kMaxOps) +
                       " operations after unrolling 'repeat'");
  }
  return first;
}

Val Checker::toTensor(const Val &v, SourceLoc loc, FnState &st) {
  if (v.kind != Val::Number)
    return v;
  int id = emit(st, OpKind::Constant, loc, {}, {ValueType{{}, DType::F32}}, {},
                {{"value", AttrValue(v.num.value)}});
  return Val::tensor(id);
}

//===----------------------------------------------------------------------===//
// Forward functions
//===----------------------------------------------------------------------===//

bool Checker::checkSignature(const ast::ForwardDecl &f, DimContext where,
                             FnState &st) {
  Function &fn = *st.fn;
  bool ok = true;
  const auto *params = scopeParamIndex(st);
  for (const ast::ArgDecl &arg : f.args) {
    bool argOk = true;
    if (const char *meaning = reservedDimMeaning(arg.name)) {
      rep.error(arg.loc, "'" + arg.name + "' is reserved for the " + meaning +
                             " dimension");
      argOk = false;
    } else if (st.locals.count(arg.name)) {
      rep.error(arg.loc, "duplicate argument '" + arg.name + "'");
      argOk = false;
    } else if (params->count(arg.name)) {
      rep.error(arg.loc, "argument '" + arg.name +
                             "' conflicts with parameter '" + arg.name + "'");
      argOk = false;
    } else if (config.count(arg.name)) {
      rep.error(arg.loc, "argument '" + arg.name +
                             "' conflicts with config entry '" + arg.name +
                             "'");
      argOk = false;
    }
    ValueType t;
    t.dtype = arg.shape.dtype.value_or(DType::F32);
    if (!evalShape(arg.shape, where, "argument '" + arg.name + "'", t.shape))
      argOk = false;
    int id = static_cast<int>(fn.types.size());
    fn.argNames.push_back(arg.name);
    fn.types.push_back(t);
    if (!st.locals.count(arg.name))
      st.locals[arg.name] = argOk ? Val::tensor(id) : Val::poison();
    ok = ok && argOk;
  }
  fn.numArgs = f.args.size();
  fn.resultType.dtype = f.result.dtype.value_or(DType::F32);
  st.resultDeclOk =
      evalShape(f.result, where, "the result", fn.resultType.shape);
  return ok && st.resultDeclOk;
}

void Checker::checkModelForward() {
  if (!model.forward) {
    rep.error(model.loc, "model '" + model.name + "' has no forward");
    return;
  }
  const ast::ForwardDecl &f = *model.forward;
  FnState st;
  st.serial = ++numForwards;
  st.fn = &out.forward;
  st.kind = ScopeKind::Model;
  st.what = st.owner = "the model forward";
  current = &st;
  checkSignature(f, DimContext::Model, st);
  for (size_t i = 0; i < f.args.size(); ++i) {
    DType t = out.forward.types[i].dtype;
    if (t != DType::I32)
      rep.error(f.args[i].loc, "argument '" + f.args[i].name +
                                   "' of the model forward must be i32 token "
                                   "ids, got " +
                                   dtypeName(t));
  }
  if (st.resultDeclOk && (!out.forward.resultType.shape.empty() ||
                          out.forward.resultType.dtype != DType::F32)) {
    rep.error(f.result.loc,
              "the model forward must return the scalar loss [], but is "
              "declared to return " +
                  formatType(out.forward.resultType));
    st.resultDeclOk = false;
  }
  checkBody(f, st);
  modelForwardOk = !st.aborted;
  current = nullptr;
}

void Checker::checkLayerForward(size_t layerIdx) {
  Layer &layer = out.layers[layerIdx];
  LayerInfo &info = layers[layerIdx];
  if (!info.decl->forward) {
    rep.error(layer.loc, "layer '" + layer.name + "' has no forward");
    return;
  }
  const ast::ForwardDecl &f = *info.decl->forward;
  FnState st;
  st.serial = ++numForwards;
  st.fn = &layer.forward;
  st.kind = ScopeKind::Layer;
  st.layer = static_cast<int>(layerIdx);
  st.owner = "layer '" + layer.name + "'";
  st.what = "the forward of " + st.owner;
  current = &st;
  bool ok = checkSignature(f, DimContext::Layer, st);
  if (f.args.size() != 1) {
    rep.error(f.loc, st.what + " must take exactly one argument, got " +
                         std::to_string(f.args.size()));
    ok = false;
  } else if (ok) {
    const ValueType &in = layer.forward.types[0];
    const ValueType &res = layer.forward.resultType;
    if (in.dtype != DType::F32) {
      rep.error(f.args[0].loc, "argument '" + f.args[0].name + "' of " +
                                   st.owner + " must be f32, got " +
                                   dtypeName(in.dtype));
      ok = false;
    } else if (res.shape != in.shape || res.dtype != in.dtype) {
      rep.error(f.result.loc,
                st.owner + " must return its input shape " + formatType(in) +
                    ", but is declared to return " + formatType(res));
      ok = false;
      st.resultDeclOk = false;
    }
  }
  info.signatureOk = ok;
  if (ok)
    info.activation = layer.forward.types[0];
  checkBody(f, st);
  current = nullptr;
}

void Checker::checkExpertForward(size_t layerIdx, size_t expertIdx) {
  Layer &layer = out.layers[layerIdx];
  LayerInfo &info = layers[layerIdx];
  Expert &expert = layer.experts[expertIdx];
  // Find the declaration: experts skipped as duplicates are not in `out`.
  const ast::ExpertDecl *decl = nullptr;
  for (const auto &x : info.decl->experts)
    if (x.name == expert.name && !skipped.count(&x)) {
      decl = &x;
      break;
    }
  if (!decl)
    return;
  if (!decl->forward) {
    rep.error(expert.loc, "expert '" + expert.name + "' has no forward");
    return;
  }
  const ast::ForwardDecl &f = *decl->forward;
  FnState st;
  st.serial = ++numForwards;
  st.fn = &expert.forward;
  st.kind = ScopeKind::Expert;
  st.layer = static_cast<int>(layerIdx);
  st.expert = static_cast<int>(expertIdx);
  st.owner = "expert '" + expert.name + "'";
  st.what = "the forward of " + st.owner;
  current = &st;
  bool ok = checkSignature(f, DimContext::Expert, st);
  if (f.args.size() != 1) {
    rep.error(f.loc, st.what + " must take exactly one argument, got " +
                         std::to_string(f.args.size()));
    ok = false;
  } else if (ok) {
    const ValueType &in = expert.forward.types[0];
    const ValueType &res = expert.forward.resultType;
    if (in.shape.size() != 2 || in.shape[0] != kDimT ||
        isSymbolic(in.shape[1]) || in.dtype != DType::F32) {
      rep.error(f.args[0].loc, "argument '" + f.args[0].name + "' of " +
                                   st.owner + " must be [T, D] f32, got " +
                                   formatType(in));
      ok = false;
    } else if (res.shape != in.shape || res.dtype != in.dtype) {
      rep.error(f.result.loc,
                st.owner + " must return its input shape " + formatType(in) +
                    ", but is declared to return " + formatType(res));
      ok = false;
      st.resultDeclOk = false;
    }
  }
  info.expertSignatureOk[expertIdx] = ok;
  if (ok)
    info.expertInput[expertIdx] = expert.forward.types[0];
  checkBody(f, st);
  current = nullptr;
}

void Checker::checkBody(const ast::ForwardDecl &f, FnState &st) {
  execStmts(f.body, st, false);
  if (!st.returned && !st.aborted)
    rep.error(f.loc, "missing 'return' at the end of " + st.what);
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

void Checker::execStmts(const std::vector<ast::StmtPtr> &stmts, FnState &st,
                        bool inRepeat) {
  for (const ast::StmtPtr &s : stmts) {
    if (!s || st.aborted)
      return;
    if (st.returned) {
      rep.error(s->loc, "unreachable statement after 'return'");
      return;
    }
    if (++st.stmtExecutions > kMaxStmtExecutions) {
      st.aborted = true;
      rep.error(s->loc, st.what + " executes more than " +
                            std::to_string(kMaxStmtExecutions) +
                            " statements after unrolling 'repeat'");
      return;
    }
    switch (s->kind) {
    case ast::Stmt::Kind::Assign:
      execAssign(*s, st);
      break;
    case ast::Stmt::Kind::Return:
      if (inRepeat) {
        rep.error(s->loc, "'return' cannot be used inside 'repeat'");
        if (s->value)
          evalExpr(*s->value, st);
        break;
      }
      execReturn(*s, st);
      break;
    case ast::Stmt::Kind::Repeat:
      execRepeat(*s, st);
      break;
    }
  }
}

void Checker::execAssign(const ast::Stmt &s, FnState &st) {
  // Targets: locals only; parameters, config entries, layers and experts
  // keep their meaning throughout a body.
  std::vector<bool> targetOk(s.names.size(), true);
  const auto *params = scopeParamIndex(st);
  for (size_t i = 0; i < s.names.size(); ++i) {
    const std::string &name = s.names[i];
    SourceLoc at = i < s.nameLocs.size() ? s.nameLocs[i] : s.loc;
    std::string what;
    if (const char *meaning = reservedDimMeaning(name)) {
      rep.error(at,
                "'" + name + "' is reserved for the " + meaning + " dimension");
      targetOk[i] = false;
      continue;
    }
    if (params->count(name))
      what = "parameter";
    else if (config.count(name))
      what = "config entry";
    else if (layerIndex.count(name))
      what = "layer";
    else if (st.layer >= 0 && layers[st.layer].experts.count(name))
      what = "expert";
    if (!what.empty()) {
      rep.error(at, "cannot assign to " + what + " '" + name + "'");
      targetOk[i] = false;
    }
  }

  std::vector<Val> vals;
  const ast::Expr *value = s.value.get();
  bool isSplit = value && value->kind == ast::Expr::Kind::Call &&
                 value->text == "split" && !layerIndex.count("split") &&
                 !value->index;
  if (!value) {
    vals.assign(s.names.size(), Val::poison());
  } else if (isSplit) {
    vals = evalOp(*value, st, s.names.size());
  } else {
    Val v = evalExpr(*value, st);
    if (s.names.size() > 1) {
      rep.error(s.loc, "only 'split' returns several values, but " +
                           plural(s.names.size(), "name") + " are assigned");
      v = Val::poison();
    }
    vals.assign(s.names.size(), v);
  }
  vals.resize(s.names.size(), Val::poison());
  for (size_t i = 0; i < s.names.size(); ++i)
    if (targetOk[i])
      st.locals[s.names[i]] = vals[i];
}

void Checker::execReturn(const ast::Stmt &s, FnState &st) {
  st.returned = true;
  if (!s.value)
    return;
  Val v = toTensor(evalExpr(*s.value, st), s.value->loc, st);
  if (v.kind != Val::Tensor)
    return;
  st.fn->result = v.id;
  if (!st.resultDeclOk)
    return;
  const ValueType &t = typeOf(st, v.id);
  const ValueType &declared = st.fn->resultType;
  if (t.shape != declared.shape || t.dtype != declared.dtype)
    rep.error(s.loc, "forward returns " + formatType(t) +
                         " but is declared to return " + formatType(declared));
}

void Checker::execRepeat(const ast::Stmt &s, FnState &st) {
  if (st.kind != ScopeKind::Model) {
    rep.error(s.loc, "'repeat' can only be used in the model forward");
    execStmts(s.body, st, true);
    return;
  }
  int64_t n = 0;
  if (!s.value || !evalInt(*s.value, "repeat count", 1, kMaxDim, n)) {
    // Check the body once for its own errors; counts are unknown now.
    for (LayerInfo &info : layers)
      info.countsUnreliable = true;
    execStmts(s.body, st, true);
    return;
  }
  for (int64_t i = 0; i < n && !st.aborted; ++i) {
    if (++st.stmtExecutions > kMaxStmtExecutions) {
      st.aborted = true;
      rep.error(s.loc, st.what + " executes more than " +
                           std::to_string(kMaxStmtExecutions) +
                           " statements after unrolling 'repeat'");
      return;
    }
    execStmts(s.body, st, true);
  }
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

bool Checker::isConstExpr(const ast::Expr &e, const FnState &st) const {
  using K = ast::Expr::Kind;
  switch (e.kind) {
  case K::Number:
    return true;
  case K::Name:
    return !st.locals.count(e.text) && config.count(e.text);
  case K::Unary:
    return !e.operands.empty() && e.operands[0] &&
           isConstExpr(*e.operands[0], st);
  case K::Binary:
    return e.op != '@' && e.operands.size() == 2 && e.operands[0] &&
           e.operands[1] && isConstExpr(*e.operands[0], st) &&
           isConstExpr(*e.operands[1], st);
  case K::Call:
    if (e.index || !e.named.empty() ||
        (e.text != "sqrt" && e.text != "min" && e.text != "max"))
      return false;
    return std::all_of(
        e.operands.begin(), e.operands.end(),
        [&](const ast::ExprPtr &x) { return x && isConstExpr(*x, st); });
  default:
    return false;
  }
}

Val Checker::evalExpr(const ast::Expr &e, FnState &st) {
  using K = ast::Expr::Kind;
  if (st.aborted)
    return Val::poison();
  switch (e.kind) {
  case K::Number: {
    ConfigValue c;
    if (!evalConst(e, c))
      return Val::poison();
    return Val::number(c);
  }
  case K::Bool:
    rep.error(e.loc, std::string("expected a tensor, got '") +
                         (e.boolean ? "true" : "false") + "'");
    return Val::poison();
  case K::String:
    rep.error(e.loc, "expected a tensor, got the string \"" + e.text + "\"");
    return Val::poison();
  case K::List:
    rep.error(e.loc, "expected a tensor, got a list");
    return Val::poison();
  case K::Name:
    return evalName(e, st);
  case K::Unary:
    return evalUnary(e, st);
  case K::Binary:
    return evalBinary(e, st);
  case K::Call:
    return evalCall(e, st);
  }
  return Val::poison();
}

Val Checker::evalName(const ast::Expr &e, FnState &st) {
  const std::string &name = e.text;
  auto local = st.locals.find(name);
  if (local != st.locals.end())
    return local->second;

  const auto *index = scopeParamIndex(st);
  auto p = index->find(name);
  if (p != index->end()) {
    auto cached = st.paramRefs.find(name);
    if (cached != st.paramRefs.end())
      return Val::tensor(cached->second);
    const Param &param = (*scopeParams(st))[p->second];
    int id = emit(st, OpKind::ParamRef, e.loc, {},
                  {ValueType{param.shape, param.dtype}}, name);
    st.paramRefs[name] = id;
    return Val::tensor(id);
  }

  auto c = config.find(name);
  if (c != config.end()) {
    if (!c->second.ok)
      return Val::poison();
    return Val::number(c->second.value);
  }

  std::string msg;
  if (reservedDimMeaning(name)) {
    msg = "symbolic dimension '" + name + "' can only be used in shapes";
  } else if (layerIndex.count(name)) {
    msg = st.kind == ScopeKind::Model
              ? "layer '" + name + "' must be applied to a value, as in '" +
                    name + "(x)'"
              : "layer '" + name + "' cannot be used inside " + st.owner;
  } else if (st.layer >= 0 && layers[st.layer].experts.count(name)) {
    msg =
        "expert '" + name + "' can only be used as the third argument of 'moe'";
  } else if (st.kind != ScopeKind::Model && modelParams.count(name)) {
    msg = "model parameter '" + name + "' cannot be used in " + st.owner +
          "; layers and experts use only their own parameters";
  } else if (st.kind == ScopeKind::Expert &&
             layers[st.layer].params.count(name)) {
    msg = "parameter '" + name + "' of layer '" + out.layers[st.layer].name +
          "' cannot be used in " + st.owner;
  } else if (st.kind == ScopeKind::Model) {
    for (size_t i = 0; i < layers.size() && msg.empty(); ++i)
      if (layers[i].params.count(name))
        msg = "'" + name + "' is a parameter of layer '" + out.layers[i].name +
              "' and cannot be used in the model forward";
  }
  if (msg.empty()) {
    if (!unknownReported.insert({st.serial, name}).second)
      return Val::poison();
    std::vector<std::string> candidates = constCandidates();
    for (const auto &[n, v] : st.locals)
      candidates.push_back(n);
    for (const auto &[n, i] : *index)
      candidates.push_back(n);
    msg = "unknown name '" + name + "'" + didYouMean(name, candidates);
  }
  rep.error(e.loc, msg);
  return Val::poison();
}

Val Checker::evalUnary(const ast::Expr &e, FnState &st) {
  if (e.operands.empty() || !e.operands[0])
    return Val::poison();
  Val x = evalExpr(*e.operands[0], st);
  if (x.kind == Val::Poison)
    return x;
  if (x.kind == Val::Number)
    return Val::number({-x.num.value, x.num.isInt});
  const ValueType &t = typeOf(st, x.id);
  if (!isFloat(t.dtype)) {
    rep.error(e.loc, "'-' cannot operate on i32 values");
    return Val::poison();
  }
  ValueType result = t;
  return Val::tensor(emit(st, OpKind::Neg, e.loc, {x.id}, {result}));
}

Val Checker::evalBinary(const ast::Expr &e, FnState &st) {
  if (e.operands.size() != 2 || !e.operands[0] || !e.operands[1])
    return Val::poison();
  Val a = evalExpr(*e.operands[0], st);
  Val b = evalExpr(*e.operands[1], st);
  if (a.kind == Val::Poison || b.kind == Val::Poison)
    return Val::poison();
  std::string opName = e.op == '^' ? "**" : std::string(1, e.op);
  if (a.kind == Val::Number && b.kind == Val::Number && e.op != '@') {
    ConfigValue r;
    if (!foldBinary(e.op, a.num, b.num, e.loc, r))
      return Val::poison();
    return Val::number(r);
  }
  if (e.op == '%' || e.op == '^') {
    rep.error(e.loc,
              "'" + opName + "' is only defined on compile-time numbers");
    return Val::poison();
  }
  a = toTensor(a, e.operands[0]->loc, st);
  b = toTensor(b, e.operands[1]->loc, st);
  const ValueType ta = typeOf(st, a.id), tb = typeOf(st, b.id);
  if (!isFloat(ta.dtype) || !isFloat(tb.dtype)) {
    rep.error(e.loc, "'" + opName + "' cannot operate on i32 values");
    return Val::poison();
  }
  OpKind kind = e.op == '@'   ? OpKind::MatMul
                : e.op == '+' ? OpKind::Add
                : e.op == '-' ? OpKind::Sub
                : e.op == '*' ? OpKind::Mul
                              : OpKind::Div;
  Expected<Shape> shape = kind == OpKind::MatMul
                              ? rules::matmul(ta.shape, tb.shape, nullptr)
                              : rules::broadcast(ta.shape, tb.shape);
  if (!shape) {
    rep.error(e.loc, "shape mismatch in '" + opName + "': " + shape.message());
    return Val::poison();
  }
  return Val::tensor(
      emit(st, kind, e.loc, {a.id, b.id}, {ValueType{*shape, DType::F32}}));
}

Val Checker::evalCall(const ast::Expr &e, FnState &st) {
  auto layer = layerIndex.find(e.text);
  if (layer != layerIndex.end())
    return evalLayerApply(e, st, layer->second);
  if (e.index) {
    rep.error(e.loc, "'" + e.text +
                         "' is not a layer; only layers are applied with "
                         "'[k]'");
    return Val::poison();
  }
  // sqrt/min/max of compile-time numbers fold like config expressions.
  if ((e.text == "sqrt" || e.text == "min" || e.text == "max") &&
      isConstExpr(e, st)) {
    ConfigValue c;
    if (!evalConst(e, c))
      return Val::poison();
    return Val::number(c);
  }
  if (e.text == "min") {
    rep.error(e.loc, "'min' is only defined on compile-time numbers");
    return Val::poison();
  }
  std::vector<Val> results = evalOp(e, st, 0);
  return results.empty() ? Val::poison() : results[0];
}

Val Checker::evalLayerApply(const ast::Expr &e, FnState &st, size_t layerIdx) {
  const Layer &layer = out.layers[layerIdx];
  LayerInfo &info = layers[layerIdx];
  const std::string &name = layer.name;
  if (st.kind != ScopeKind::Model) {
    rep.error(e.loc, "layer '" + name + "' cannot be applied inside " +
                         st.owner +
                         "; layers are applied in the model forward");
    return Val::poison();
  }
  if (e.operands.size() != 1 || !e.named.empty() || !e.operands[0]) {
    rep.error(e.loc, "layer '" + name + "' takes exactly one argument, got " +
                         std::to_string(e.operands.size() + e.named.size()));
    info.countsUnreliable = true;
    return Val::poison();
  }
  Val x = toTensor(evalExpr(*e.operands[0], st), e.operands[0]->loc, st);
  int64_t k = 0;
  if (e.index && !evalInt(*e.index, "layer application count", 1, kMaxDim, k)) {
    info.countsUnreliable = true;
    return Val::poison();
  }
  if (!info.countOk)
    return Val::poison();
  if (!e.index) {
    if (info.applied > 0 || info.appliedAll) {
      rep.error(e.loc, "'" + name + "(x)' applies all " +
                           std::to_string(layer.count) +
                           " instances of layer '" + name +
                           "' and cannot be combined with other "
                           "applications of it");
      info.countsUnreliable = true;
      return Val::poison();
    }
    k = layer.count;
    info.appliedAll = true;
  } else if (info.appliedAll) {
    rep.error(e.loc, "layer '" + name + "' is already applied in full by '" +
                         name + "(x)' and cannot be applied again");
    info.countsUnreliable = true;
    return Val::poison();
  } else if (info.applied + k > layer.count) {
    rep.error(e.loc, "layer '" + name + "' applied beyond its " +
                         std::to_string(layer.count) + " instances");
    info.countsUnreliable = true;
    return Val::poison();
  }
  int64_t first = info.applied;
  info.applied += k;
  if (x.kind != Val::Tensor || !info.signatureOk)
    return Val::poison();
  const ValueType t = typeOf(st, x.id);
  if (t.shape != info.activation.shape || t.dtype != info.activation.dtype) {
    rep.error(e.loc, "layer '" + name + "' expects " +
                         formatType(info.activation) + " but is applied to " +
                         formatType(t));
    return Val::poison();
  }
  return Val::tensor(
      emit(st, OpKind::ApplyLayers, e.loc, {x.id}, {t}, name,
           {{"first", AttrValue(first)}, {"count", AttrValue(k)}}));
}

} // namespace mtc::sema
