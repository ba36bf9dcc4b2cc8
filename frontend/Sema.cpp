//===- Sema.cpp - Checking a .mt model ------------------------------------===//
//
// Part of mtc. The declaration side of Sema: the config block, the name spaces
// of the model, parameters, layer and expert headers, the final layer counts
// and the parameter totals. Forward bodies are checked in SemaExpr.cpp.
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"
#include "frontend/SemaInternal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace mtc {

//===----------------------------------------------------------------------===//
// Public helpers of Sema.h
//===----------------------------------------------------------------------===//

const AttrValue *Operation::attr(const std::string &name) const {
  for (const auto &[key, value] : attrs)
    if (key == name)
      return &value;
  return nullptr;
}

int64_t Param::numel() const {
  int64_t n = 1;
  for (Dim d : shape)
    n *= d;
  return n;
}

int64_t Expert::paramsPerExpert() const {
  int64_t n = 0;
  for (const Param &p : params)
    n += p.numel();
  return n;
}

int64_t Layer::paramsPerInstance() const {
  int64_t n = 0;
  for (const Param &p : params)
    n += p.numel();
  for (const Expert &e : experts)
    n += e.count * e.paramsPerExpert();
  return n;
}

int64_t CheckedModel::totalLayerInstances() const {
  int64_t n = 0;
  for (const Layer &l : layers)
    n += l.count;
  return n;
}

int64_t CheckedModel::totalParams() const {
  int64_t n = 0;
  for (const Param &p : params)
    n += p.numel();
  for (const Layer &l : layers)
    n += l.count * l.paramsPerInstance();
  return n;
}

bool checkModel(const ast::Model &model, DiagnosticEngine &diags,
                CheckedModel &out) {
  out = CheckedModel();
  sema::Checker checker(model, diags, out);
  return checker.run();
}

namespace sema {

//===----------------------------------------------------------------------===//
// Reporting and text helpers
//===----------------------------------------------------------------------===//

bool Reporter::error(SourceLoc loc, const std::string &message) {
  lastEmitted = seen.insert({loc.line, loc.col, message}).second;
  if (!lastEmitted)
    return false;
  ++numErrors;
  diags.error(loc, message);
  return true;
}

void Reporter::note(SourceLoc loc, const std::string &message) {
  if (lastEmitted)
    diags.note(loc, message);
}

std::string formatNumber(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
    return buf;
  }
  std::ostringstream os;
  os << v;
  return os.str();
}

namespace {

int precedence(char op) {
  switch (op) {
  case '+':
  case '-':
    return 1;
  case '*':
  case '/':
  case '%':
  case '@':
    return 2;
  case '^':
    return 3;
  default:
    return 4;
  }
}

std::string opSpelling(char op) {
  if (op == '^')
    return "**";
  return std::string(1, op);
}

} // namespace

std::string exprText(const ast::Expr &e) {
  using K = ast::Expr::Kind;
  switch (e.kind) {
  case K::Number:
    return formatNumber(e.number);
  case K::Bool:
    return e.boolean ? "true" : "false";
  case K::String:
    return "\"" + e.text + "\"";
  case K::Name:
    return e.text;
  case K::Unary: {
    if (e.operands.empty() || !e.operands[0])
      return "-?";
    const ast::Expr &x = *e.operands[0];
    bool paren = x.kind == K::Binary;
    return "-" + (paren ? "(" + exprText(x) + ")" : exprText(x));
  }
  case K::Binary: {
    if (e.operands.size() != 2 || !e.operands[0] || !e.operands[1])
      return "?";
    auto side = [&](const ast::Expr &x, bool right) {
      std::string t = exprText(x);
      if (x.kind != K::Binary)
        return t;
      int px = precedence(x.op), pe = precedence(e.op);
      if (px < pe || (right && px == pe))
        return "(" + t + ")";
      return t;
    };
    return side(*e.operands[0], false) + " " + opSpelling(e.op) + " " +
           side(*e.operands[1], true);
  }
  case K::Call: {
    std::string t = e.text;
    if (e.index)
      t += "[" + exprText(*e.index) + "]";
    t += "(";
    bool first = true;
    for (const auto &a : e.operands) {
      if (!first)
        t += ", ";
      first = false;
      t += a ? exprText(*a) : "?";
    }
    for (const auto &n : e.named) {
      if (!first)
        t += ", ";
      first = false;
      t += n.name + " = " + (n.value ? exprText(*n.value) : "?");
    }
    return t + ")";
  }
  case K::List: {
    std::string t = "[";
    for (size_t i = 0; i < e.operands.size(); ++i) {
      if (i)
        t += ", ";
      t += e.operands[i] ? exprText(*e.operands[i]) : "?";
    }
    return t + "]";
  }
  }
  return "?";
}

namespace {

size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

} // namespace

std::string closestName(const std::string &name,
                        const std::vector<std::string> &candidates) {
  std::string best;
  size_t bestDist = 3;
  std::vector<std::string> sorted = candidates;
  std::sort(sorted.begin(), sorted.end());
  for (const std::string &c : sorted) {
    if (c == name)
      continue;
    // Length difference alone bounds the distance: skip cheaply.
    size_t lenDiff = c.size() > name.size() ? c.size() - name.size()
                                            : name.size() - c.size();
    if (lenDiff >= bestDist)
      continue;
    size_t d = editDistance(name, c);
    // Do not suggest a completely different short name ('x' for 'y').
    if (d < bestDist && d < std::max(name.size(), c.size())) {
      best = c;
      bestDist = d;
    }
  }
  return best;
}

std::string didYouMean(const std::string &name,
                       const std::vector<std::string> &candidates) {
  std::string best = closestName(name, candidates);
  if (best.empty())
    return "";
  return "; did you mean '" + best + "'?";
}

std::string plural(size_t n, const char *word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string formatType(const ValueType &t) {
  std::string s = formatShape(t.shape);
  if (t.dtype != DType::F32)
    s += std::string(" ") + dtypeName(t.dtype);
  return s;
}

const char *reservedDimMeaning(const std::string &name) {
  if (name == "B")
    return "batch";
  if (name == "S")
    return "sequence";
  if (name == "T")
    return "expert token";
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Compile-time numbers
//===----------------------------------------------------------------------===//

namespace {

bool isIntegral(double v) { return std::isfinite(v) && v == std::floor(v); }

/// Stores \p v as an exact integer, or fails on overflow.
bool intResult(int64_t v, bool overflowed, ConfigValue &out) {
  if (overflowed || v > kMaxExactInt || v < -kMaxExactInt)
    return false;
  out = {static_cast<double>(v), true};
  return true;
}

/// Integer power by squaring; false on overflow.
bool intPow(int64_t base, int64_t exp, int64_t &out) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result))
        return false;
    }
    exp >>= 1;
    if (exp && __builtin_mul_overflow(base, base, &base))
      return false;
  }
  out = result;
  return true;
}

} // namespace

std::vector<std::string> Checker::constCandidates() const {
  std::vector<std::string> names;
  for (const auto &[name, slot] : config)
    names.push_back(name);
  return names;
}

bool Checker::isNonConstName(const std::string &name) const {
  // The AST, not the checked model: config entries are evaluated first.
  for (const auto &p : model.params)
    if (p.name == name)
      return true;
  for (const auto &l : model.layers)
    if (l.name == name)
      return true;
  if (!current)
    return false;
  if (current->locals.count(name))
    return true;
  if (const auto *index = scopeParamIndex(*current))
    if (index->count(name))
      return true;
  if (current->layer >= 0 && layers[current->layer].experts.count(name))
    return true;
  return false;
}

bool Checker::foldBinary(char opChar, const ConfigValue &a,
                         const ConfigValue &b, SourceLoc loc,
                         ConfigValue &out) {
  std::string op = "'" + opSpelling(opChar) + "'";
  if ((opChar == '/' || opChar == '%') && b.value == 0) {
    rep.error(loc,
              "division by zero" + std::string(opChar == '%' ? " in '%'" : ""));
    return false;
  }
  if (a.isInt && b.isInt) {
    int64_t ia = static_cast<int64_t>(a.value);
    int64_t ib = static_cast<int64_t>(b.value);
    int64_t r = 0;
    bool overflow = false;
    bool exact = true;
    switch (opChar) {
    case '+':
      overflow = __builtin_add_overflow(ia, ib, &r);
      break;
    case '-':
      overflow = __builtin_sub_overflow(ia, ib, &r);
      break;
    case '*':
      overflow = __builtin_mul_overflow(ia, ib, &r);
      break;
    case '/':
      exact = ia % ib == 0;
      r = exact ? ia / ib : 0;
      break;
    case '%':
      // The sign follows the divisor, as in Python.
      r = ia % ib;
      if (r != 0 && ((r < 0) != (ib < 0)))
        r += ib;
      break;
    case '^':
      exact = ib >= 0;
      if (exact)
        overflow = !intPow(ia, ib, r);
      break;
    default:
      rep.error(loc, "unsupported operator " + op);
      return false;
    }
    if (exact) {
      if (!intResult(r, overflow, out)) {
        rep.error(loc, "integer overflow in " + op);
        return false;
      }
      return true;
    }
  }
  double x = a.value, y = b.value, r = 0;
  switch (opChar) {
  case '+':
    r = x + y;
    break;
  case '-':
    r = x - y;
    break;
  case '*':
    r = x * y;
    break;
  case '/':
    r = x / y;
    break;
  case '%':
    r = x - y * std::floor(x / y);
    break;
  case '^':
    r = std::pow(x, y);
    break;
  default:
    rep.error(loc, "unsupported operator " + op);
    return false;
  }
  if (!std::isfinite(r)) {
    rep.error(loc, "result of " + op + " is not a finite number");
    return false;
  }
  out = {r, false};
  return true;
}

bool Checker::evalConst(const ast::Expr &e, ConfigValue &out) {
  using K = ast::Expr::Kind;
  switch (e.kind) {
  case K::Number:
    if (!std::isfinite(e.number)) {
      rep.error(e.loc, "number is out of range");
      return false;
    }
    if (e.isInt && std::fabs(e.number) > static_cast<double>(kMaxExactInt)) {
      rep.error(e.loc, "integer " + formatNumber(e.number) + " is too large");
      return false;
    }
    out = {e.number, e.isInt && isIntegral(e.number)};
    return true;
  case K::Bool:
    rep.error(e.loc, std::string("expected a number, got '") +
                         (e.boolean ? "true" : "false") + "'");
    return false;
  case K::String:
    rep.error(e.loc, "expected a number, got the string \"" + e.text + "\"");
    return false;
  case K::List:
    rep.error(e.loc, "expected a number, got a list");
    return false;
  case K::Name: {
    auto it = config.find(e.text);
    if (it != config.end()) {
      if (!it->second.evaluated) {
        rep.error(e.loc, "config entry '" + e.text +
                             "' is used before its definition");
        rep.note(it->second.loc, "'" + e.text + "' is defined here");
        return false;
      }
      if (!it->second.ok)
        return false;
      out = it->second.value;
      return true;
    }
    if (reservedDimMeaning(e.text)) {
      rep.error(e.loc, "symbolic dimension '" + e.text +
                           "' cannot be used in a compile-time expression");
      return false;
    }
    if (isNonConstName(e.text)) {
      rep.error(e.loc, "'" + e.text + "' is not a compile-time constant");
      return false;
    }
    if (unknownReported.insert({current ? current->serial : 0, e.text}).second)
      rep.error(e.loc, "unknown name '" + e.text + "'" +
                           didYouMean(e.text, constCandidates()));
    return false;
  }
  case K::Unary: {
    if (e.operands.empty() || !e.operands[0])
      return false;
    ConfigValue x;
    if (!evalConst(*e.operands[0], x))
      return false;
    out = {-x.value, x.isInt};
    return true;
  }
  case K::Binary: {
    if (e.operands.size() != 2 || !e.operands[0] || !e.operands[1])
      return false;
    if (e.op == '@') {
      rep.error(e.loc, "'@' cannot be used in a compile-time expression");
      return false;
    }
    ConfigValue a, b;
    bool okA = evalConst(*e.operands[0], a);
    bool okB = evalConst(*e.operands[1], b);
    if (!okA || !okB)
      return false;
    return foldBinary(e.op, a, b, e.loc, out);
  }
  case K::Call: {
    static const std::vector<std::string> functions = {"sqrt", "min", "max"};
    bool known = std::find(functions.begin(), functions.end(), e.text) !=
                 functions.end();
    if (!known || e.index) {
      if (layerIndex.count(e.text) || isNonConstName(e.text))
        rep.error(e.loc, "'" + e.text + "' is not a compile-time constant");
      else
        rep.error(e.loc, "unknown function '" + e.text +
                             "' in a compile-time expression" +
                             didYouMean(e.text, functions));
      return false;
    }
    size_t want = e.text == "sqrt" ? 1 : 2;
    if (e.operands.size() != want || !e.named.empty()) {
      rep.error(e.loc, "'" + e.text + "' expects " + std::to_string(want) +
                           (want == 1 ? " argument" : " arguments") + ", got " +
                           std::to_string(e.operands.size() + e.named.size()));
      return false;
    }
    std::vector<ConfigValue> args(want);
    bool ok = true;
    for (size_t i = 0; i < want; ++i)
      ok = (e.operands[i] && evalConst(*e.operands[i], args[i])) && ok;
    if (!ok)
      return false;
    if (e.text == "sqrt") {
      if (args[0].value < 0) {
        rep.error(e.loc,
                  "sqrt of the negative number " + formatNumber(args[0].value));
        return false;
      }
      double r = std::sqrt(args[0].value);
      out = {r, args[0].isInt && isIntegral(r) && r * r == args[0].value};
      return true;
    }
    bool isMin = e.text == "min";
    const ConfigValue &pick =
        (args[0].value < args[1].value) == isMin ? args[0] : args[1];
    out = {pick.value, args[0].isInt && args[1].isInt};
    return true;
  }
  }
  return false;
}

bool Checker::evalInt(const ast::Expr &e, const char *what, int64_t minValue,
                      int64_t maxValue, int64_t &out) {
  ConfigValue v;
  if (!evalConst(e, v))
    return false;
  // A literal is shown once ("dimension 3.5 is not ..."), a name or an
  // expression with its value ("dimension 'head_dim' is 3.5, ...").
  bool literal = e.kind == ast::Expr::Kind::Number;
  std::string subject =
      std::string(what) + (literal ? "" : " '" + exprText(e) + "'");
  std::string value = formatNumber(v.value);
  if (!isIntegral(v.value)) {
    rep.error(e.loc, literal ? subject + " " + value + " is not an integer"
                             : subject + " is " + value + ", not an integer");
    return false;
  }
  if (v.value < static_cast<double>(minValue)) {
    std::string req = minValue == 1 ? "must be positive"
                      : minValue == 0
                          ? "must not be negative"
                          : "must be at least " + std::to_string(minValue);
    rep.error(e.loc, subject + " " + req + ", got " + value);
    return false;
  }
  if (v.value > static_cast<double>(maxValue)) {
    rep.error(e.loc, subject + " is " + value + ", larger than the limit " +
                         std::to_string(maxValue));
    return false;
  }
  out = static_cast<int64_t>(v.value);
  return true;
}

bool Checker::evalDim(const ast::Expr &e, DimContext where,
                      const std::string &owner, Dim &out) {
  if (e.kind == ast::Expr::Kind::Name && reservedDimMeaning(e.text)) {
    Dim d = symbolicDimByName(e.text);
    switch (where) {
    case DimContext::Param:
      rep.error(e.loc, "'" + e.text + "' cannot be used in the shape of " +
                           owner + "; parameter shapes are static");
      return false;
    case DimContext::Model:
    case DimContext::Layer:
      if (d == kDimT) {
        rep.error(e.loc, "'T' can only be used in an expert forward");
        return false;
      }
      break;
    case DimContext::Expert:
      if (d != kDimT) {
        rep.error(e.loc, "'" + e.text +
                             "' cannot be used in an expert forward, whose "
                             "tokens are [T, D]");
        return false;
      }
      break;
    }
    out = d;
    return true;
  }
  int64_t v;
  if (!evalInt(e, "dimension", 1, kMaxDim, v))
    return false;
  out = v;
  return true;
}

bool Checker::evalShape(const ast::ShapeDecl &s, DimContext where,
                        const std::string &owner, Shape &out) {
  out.clear();
  bool ok = true;
  for (const auto &d : s.dims) {
    Dim v = 0;
    if (!d || !evalDim(*d, where, owner, v)) {
      ok = false;
      v = 1;
    }
    out.push_back(v);
  }
  return ok;
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

namespace {

struct Decl {
  std::string name;
  SourceLoc loc;
  const char *kind; ///< "config entry", "parameter", "layer", "expert"
  const void *node;
};

bool locBefore(const Decl &a, const Decl &b) {
  return std::tie(a.loc.line, a.loc.col) < std::tie(b.loc.line, b.loc.col);
}

} // namespace

void Checker::checkDeclarations() {
  // Reports clashes within one name space, in source order, at the later
  // declaration. \p outer holds the names of enclosing spaces that must not be
  // reused (config entries and layers); \p space receives the new names.
  auto declare = [&](std::vector<Decl> decls,
                     std::map<std::string, Decl> &space,
                     const std::map<std::string, Decl> *outer) {
    std::stable_sort(decls.begin(), decls.end(), locBefore);
    for (const Decl &d : decls) {
      if (const char *meaning = reservedDimMeaning(d.name)) {
        rep.error(d.loc, "'" + d.name + "' is reserved for the " + meaning +
                             " dimension");
        skipped.insert(d.node);
        continue;
      }
      const Decl *prev = nullptr;
      auto it = space.find(d.name);
      if (it != space.end())
        prev = &it->second;
      if (!prev && outer) {
        auto o = outer->find(d.name);
        if (o != outer->end() && std::string(o->second.kind) != "parameter")
          prev = &o->second;
      }
      if (!prev) {
        space.emplace(d.name, d);
        continue;
      }
      if (std::string(prev->kind) == d.kind && prev->node != d.node)
        rep.error(d.loc,
                  "duplicate " + std::string(d.kind) + " '" + d.name + "'");
      else
        rep.error(d.loc, std::string(d.kind) + " '" + d.name +
                             "' conflicts with " + prev->kind + " '" + d.name +
                             "'");
      rep.note(prev->loc, "'" + d.name + "' was first declared here");
      skipped.insert(d.node);
    }
  };

  std::vector<Decl> globals;
  for (const auto &c : model.config)
    globals.push_back({c.name, c.loc, "config entry", &c});
  for (const auto &p : model.params)
    globals.push_back({p.name, p.loc, "parameter", &p});
  for (const auto &l : model.layers)
    globals.push_back({l.name, l.loc, "layer", &l});
  std::map<std::string, Decl> globalSpace;
  declare(globals, globalSpace, nullptr);

  for (const auto &l : model.layers) {
    if (skipped.count(&l))
      continue;
    std::vector<Decl> locals;
    for (const auto &p : l.params)
      locals.push_back({p.name, p.loc, "parameter", &p});
    for (const auto &x : l.experts)
      locals.push_back({x.name, x.loc, "expert", &x});
    std::map<std::string, Decl> layerSpace;
    declare(locals, layerSpace, &globalSpace);
    for (const auto &x : l.experts) {
      if (skipped.count(&x))
        continue;
      std::vector<Decl> expertDecls;
      for (const auto &p : x.params)
        expertDecls.push_back({p.name, p.loc, "parameter", &p});
      std::map<std::string, Decl> expertSpace;
      declare(expertDecls, expertSpace, &globalSpace);
    }
  }
}

void Checker::checkConfig() {
  for (const auto &c : model.config) {
    if (skipped.count(&c))
      continue;
    ConfigSlot &slot = config[c.name];
    slot.loc = c.loc;
  }
  for (const auto &c : model.config) {
    if (skipped.count(&c))
      continue;
    ConfigValue v;
    bool ok = c.value && evalConst(*c.value, v);
    ConfigSlot &slot = config[c.name];
    slot.evaluated = true;
    slot.ok = ok;
    slot.value = v;
    if (ok)
      out.config.push_back({c.name, v});
  }
}

void Checker::checkParam(const ast::ParamDecl &decl, Param &p) {
  p.name = decl.name;
  p.loc = decl.loc;
  p.init = decl.init;
  p.dtype = decl.shape.dtype.value_or(DType::F32);
  bool shapeOk = evalShape(decl.shape, DimContext::Param,
                           "parameter '" + decl.name + "'", p.shape);
  if (p.dtype == DType::I32) {
    SourceLoc at = decl.shape.dtypeLoc.line ? decl.shape.dtypeLoc : decl.loc;
    rep.error(at, "parameter '" + decl.name + "' must be f32 or bf16, got i32");
  }
  if (shapeOk) {
    int64_t n = 1;
    bool overflow = false;
    for (Dim d : p.shape)
      overflow = overflow || __builtin_mul_overflow(n, d, &n);
    if (overflow || n > (int64_t(1) << 48))
      rep.error(decl.loc, "parameter '" + decl.name + "' of shape " +
                              formatShape(p.shape) + " is too large");
  }

  const char *initName = "zeros";
  size_t expected = 0;
  const char *argNames = "";
  switch (decl.init) {
  case ast::InitKind::Zeros:
    break;
  case ast::InitKind::Ones:
    initName = "ones";
    break;
  case ast::InitKind::Normal:
    initName = "normal";
    expected = 1;
    argNames = " (std)";
    break;
  case ast::InitKind::ScaledNormal:
    initName = "scaled_normal";
    expected = 1;
    argNames = " (std)";
    break;
  case ast::InitKind::Uniform:
    initName = "uniform";
    expected = 2;
    argNames = " (lo, hi)";
    break;
  }
  SourceLoc initLoc = decl.initLoc.line ? decl.initLoc : decl.loc;
  if (decl.initArgs.size() != expected) {
    rep.error(initLoc, "initializer '" + std::string(initName) + "' expects " +
                           std::to_string(expected) +
                           (expected == 1 ? " argument" : " arguments") +
                           argNames + ", got " +
                           std::to_string(decl.initArgs.size()));
    return;
  }
  std::vector<ConfigValue> args(expected);
  bool ok = true;
  for (size_t i = 0; i < expected; ++i)
    ok = (decl.initArgs[i] && evalConst(*decl.initArgs[i], args[i])) && ok;
  if (!ok)
    return;
  if (expected >= 1)
    p.initA = args[0].value;
  if (expected == 2)
    p.initB = args[1].value;
  if (expected == 1 && p.initA < 0)
    rep.error(decl.initArgs[0]->loc,
              "standard deviation of '" + std::string(initName) +
                  "' must not be negative, got " + formatNumber(p.initA));
  if (expected == 2 && p.initA > p.initB)
    rep.error(initLoc, "'uniform' bounds must satisfy lo <= hi, got " +
                           formatNumber(p.initA) + " and " +
                           formatNumber(p.initB));
}

void Checker::checkLayerHeaders() {
  for (const auto &l : model.layers) {
    if (skipped.count(&l))
      continue;
    layerIndex[l.name] = out.layers.size();
    out.layers.emplace_back();
    layers.emplace_back();
    Layer &layer = out.layers.back();
    LayerInfo &info = layers.back();
    info.decl = &l;
    layer.name = l.name;
    layer.loc = l.loc;
    int64_t count = 0;
    info.countOk =
        l.count && evalInt(*l.count, "layer count", 1, kMaxDim, count);
    layer.count = info.countOk ? count : 0;
    for (const auto &p : l.params) {
      if (skipped.count(&p))
        continue;
      info.params[p.name] = layer.params.size();
      layer.params.emplace_back();
      checkParam(p, layer.params.back());
    }
    for (const auto &x : l.experts) {
      if (skipped.count(&x))
        continue;
      info.experts[x.name] = layer.experts.size();
      layer.experts.emplace_back();
      Expert &expert = layer.experts.back();
      expert.name = x.name;
      expert.loc = x.loc;
      int64_t n = 0;
      if (x.count && evalInt(*x.count, "expert count", 1, kMaxDim, n))
        expert.count = n;
      info.expertParams.emplace_back();
      for (const auto &p : x.params) {
        if (skipped.count(&p))
          continue;
        info.expertParams.back()[p.name] = expert.params.size();
        expert.params.emplace_back();
        checkParam(p, expert.params.back());
      }
    }
    info.expertSignatureOk.assign(layer.experts.size(), false);
    info.expertInput.assign(layer.experts.size(), ValueType());
  }
}

void Checker::checkFinalCounts() {
  if (!modelForwardOk)
    return;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerInfo &info = layers[i];
    const Layer &layer = out.layers[i];
    if (!info.countOk || info.countsUnreliable || info.applied >= layer.count)
      continue;
    std::string applied =
        info.applied == 0 ? "none" : std::to_string(info.applied);
    rep.error(layer.loc, "layer '" + layer.name + "' has " +
                             std::to_string(layer.count) + " instances but " +
                             applied + (info.applied == 1 ? " is" : " are") +
                             " applied");
  }
}

void Checker::checkTotals() {
  // Overflow-checked version of CheckedModel::totalParams.
  auto sumParams = [](const std::vector<Param> &ps, int64_t &n) {
    for (const Param &p : ps) {
      int64_t k = 1;
      for (Dim d : p.shape)
        if (d < 0 || __builtin_mul_overflow(k, d, &k))
          return false;
      if (__builtin_add_overflow(n, k, &n))
        return false;
    }
    return true;
  };
  int64_t total = 0;
  bool ok = sumParams(out.params, total);
  for (const Layer &l : out.layers) {
    int64_t perInstance = 0;
    ok = ok && sumParams(l.params, perInstance);
    for (const Expert &x : l.experts) {
      int64_t perExpert = 0, all = 0;
      ok = ok && sumParams(x.params, perExpert) &&
           !__builtin_mul_overflow(perExpert, x.count, &all) &&
           !__builtin_add_overflow(perInstance, all, &perInstance);
    }
    int64_t layerTotal = 0;
    ok = ok && !__builtin_mul_overflow(perInstance, l.count, &layerTotal) &&
         !__builtin_add_overflow(total, layerTotal, &total);
  }
  if (!ok)
    rep.error(model.loc, "model '" + model.name + "' has too many parameters");
}

bool Checker::run() {
  unsigned before = rep.count();
  out.name = model.name;
  checkDeclarations();
  checkConfig();
  for (const auto &p : model.params) {
    if (skipped.count(&p))
      continue;
    modelParams[p.name] = out.params.size();
    out.params.emplace_back();
    checkParam(p, out.params.back());
  }
  checkLayerHeaders();
  for (size_t i = 0; i < out.layers.size(); ++i) {
    for (size_t x = 0; x < out.layers[i].experts.size(); ++x)
      checkExpertForward(i, x);
    checkLayerForward(i);
  }
  checkModelForward();
  checkFinalCounts();
  checkTotals();
  return rep.count() == before;
}

} // namespace sema
} // namespace mtc
