//===- ChatTemplateRender.cpp - Jinja renderer ----------------------------===//
//
// Part of mtc. Walks a chat template's statement tree: output, if, for
// (loop variables, filters, else), set, break and continue, and evaluates
// expressions: names in scope, attributes, items, slices, operators and
// comparisons with Python's semantics. Calls, filters and tests are in
// ChatTemplateBuiltins.cpp.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplateInternal.h"

#include <algorithm>
#include <cmath>

namespace mtc::tok::jinja {

Flow Renderer::exec(const Body &body) {
  for (const Node &n : body) {
    Flow f = execNode(n);
    if (f != Flow::Normal)
      return f;
  }
  return Flow::Normal;
}

Value Renderer::lookup(const std::string &name) const {
  for (size_t k = scopes.size(); k-- > 0;)
    if (const Value *v = scopes[k].find(name))
      return *v;
  return Value();
}

void Renderer::assign(const std::string &name, Value v) {
  scopes.back().setKey(name, std::move(v));
}

void Renderer::emit(const std::string &s, int line) {
  spend(s.size(), line);
  if (s.size() > limits.maxOutput || out.size() + s.size() > limits.maxOutput)
    fail(line, "the rendered text exceeds " + describeBytes(limits.maxOutput));
  out += s;
}

void Renderer::grown(const std::string &s, int line) {
  if (s.size() > limits.maxOutput)
    fail(line, "a string exceeds " + describeBytes(limits.maxOutput));
}

void Renderer::spend(uint64_t steps, int line) {
  work = work + steps < work ? UINT64_MAX : work + steps;
  if (work > limits.maxWork)
    fail(line, "rendering takes more than " + std::to_string(limits.maxWork) +
                   " steps (expressions, loop iterations and the bytes and "
                   "items they make)");
}

void Renderer::account(const Value &v, int line) {
  uint64_t steps = 1;
  switch (v.kind) {
  case Value::Str:
    if (v.s.size() > limits.maxOutput)
      fail(line, "a string exceeds " + describeBytes(limits.maxOutput));
    steps += v.s.size();
    break;
  case Value::ListK:
  case Value::DictK:
  case Value::Ns:
    if (v.nesting() > kMaxDepth)
      fail(line, "values nest more than " + std::to_string(kMaxDepth) +
                     " levels deep");
    if (v.size() > limits.maxValueSize)
      fail(line, "a value holds more than " +
                     std::to_string(limits.maxValueSize) +
                     " items and string bytes");
    steps += v.kind == Value::ListK ? v.list->size() : v.dict->size();
    break;
  default:
    break;
  }
  spend(steps, line);
}

Flow Renderer::execNode(const Node &n) {
  switch (n.kind) {
  case Node::Text:
    emit(n.text, n.line);
    return Flow::Normal;
  case Node::Output:
    emit(str(eval(*n.expr), n.line), n.line);
    return Flow::Normal;
  case Node::If:
    for (const auto &[cond, body] : n.branches)
      if (!cond || truthy(eval(*cond)))
        return exec(body);
    return Flow::Normal;
  case Node::Set: {
    Value v = eval(*n.expr);
    if (n.vars.size() == 1) {
      assign(n.vars[0], std::move(v));
    } else {
      Value ns = lookup(n.vars[0]);
      if (ns.kind != Value::Ns)
        fail(n.line, "cannot assign attribute '" + n.vars[1] + "' of '" +
                         n.vars[0] + "' (a " + typeName(ns) +
                         ", not a namespace)");
      // No namespace in a namespace: values stay acyclic.
      if (v.hasNs)
        fail(n.line, "cannot store a namespace in attribute '" + n.vars[1] +
                         "' of namespace '" + n.vars[0] + "'");
      ns.setKey(n.vars[1], std::move(v));
    }
    return Flow::Normal;
  }
  case Node::Break:
    return Flow::Break;
  case Node::Continue:
    return Flow::Continue;
  case Node::For:
    return execFor(n);
  }
  return Flow::Normal;
}

List Renderer::iterate(const Value &v, int line) {
  spend(v.kind == Value::ListK   ? v.list->size()
        : v.kind == Value::DictK ? v.dict->size()
        : v.kind == Value::Str   ? v.s.size()
                                 : 0,
        line);
  switch (v.kind) {
  case Value::Undefined:
    return {};
  case Value::ListK:
    return *v.list;
  case Value::DictK: {
    List keys;
    for (const auto &kv : *v.dict)
      keys.push_back(Value::str(kv.first));
    return keys;
  }
  case Value::Str: {
    List l;
    for (std::string &cp : codePoints(v.s))
      l.push_back(Value::str(std::move(cp)));
    return l;
  }
  default:
    fail(line, std::string("'") + typeName(v) + "' object is not iterable");
  }
}

void Renderer::bindVars(const std::vector<std::string> &vars, const Value &item,
                        int line) {
  if (vars.size() == 1) {
    assign(vars[0], item);
    return;
  }
  List parts = iterate(item, line);
  if (parts.size() != vars.size())
    fail(line, "cannot unpack " + std::to_string(parts.size()) +
                   " values into " + std::to_string(vars.size()));
  for (size_t k = 0; k < vars.size(); ++k)
    assign(vars[k], parts[k]);
}

Flow Renderer::execFor(const Node &n) {
  List items = iterate(eval(*n.expr), n.line);
  if (n.filter) {
    List kept;
    for (const Value &item : items) {
      scopes.push_back(Value::makeDict());
      bindVars(n.vars, item, n.line);
      bool keep = truthy(eval(*n.filter));
      scopes.pop_back();
      if (keep)
        kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    scopes.push_back(Value::makeDict());
    exec(n.elseBody);
    scopes.pop_back();
    return Flow::Normal;
  }
  int64_t len = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < len; ++k) {
    if (++iterations > limits.maxIterations)
      fail(n.line, "more than " + withCommas(limits.maxIterations) +
                       " loop iterations");
    spend(16, n.line);
    Dict loop = {
        {"index", Value::integer(k + 1)},
        {"index0", Value::integer(k)},
        {"revindex", Value::integer(len - k)},
        {"revindex0", Value::integer(len - k - 1)},
        {"first", Value::boolean(k == 0)},
        {"last", Value::boolean(k == len - 1)},
        {"length", Value::integer(len)},
        {"previtem", k > 0 ? items[k - 1] : Value()},
        {"nextitem", k + 1 < len ? items[k + 1] : Value()},
    };
    scopes.push_back(Value::makeDict({{"loop", Value::makeDict(loop)}}));
    bindVars(n.vars, items[k], n.line);
    Flow f = exec(n.body);
    scopes.pop_back();
    if (f == Flow::Break)
      break;
  }
  return Flow::Normal;
}

int64_t Renderer::toInt(const Value &v, int line, const char *what) {
  if (v.kind == Value::Int)
    return v.i;
  if (v.kind == Value::Bool)
    return v.b;
  fail(line, std::string(what) + " must be an integer, not " + typeName(v));
}

Value Renderer::item(const Value &obj, const Value &key, int line) {
  if (obj.kind == Value::Undefined)
    fail(line, "cannot index an undefined value with " +
                   pyRepr(key, limits.maxOutput, line));
  if (obj.kind == Value::DictK || obj.kind == Value::Ns) {
    if (key.kind != Value::Str)
      return Value();
    const Value *v = obj.find(key.s);
    return v ? *v : Value();
  }
  if (obj.kind == Value::ListK || obj.kind == Value::Str) {
    if (key.kind == Value::Str)
      return Value(); // an attribute of a list or string: undefined
    int64_t i = toInt(key, line, "an index");
    if (obj.kind == Value::ListK) {
      int64_t n = static_cast<int64_t>(obj.list->size());
      if (i < 0)
        i += n;
      if (i < 0 || i >= n)
        return Value();
      return (*obj.list)[static_cast<size_t>(i)];
    }
    std::vector<std::string> cps = codePoints(obj.s);
    int64_t n = static_cast<int64_t>(cps.size());
    if (i < 0)
      i += n;
    if (i < 0 || i >= n)
      return Value();
    return Value::str(cps[static_cast<size_t>(i)]);
  }
  if (obj.kind == Value::None)
    fail(line, "'None' has no item " + pyRepr(key, limits.maxOutput, line));
  return Value();
}

Value Renderer::slice(const Value &obj, const Expr &e) {
  std::vector<Value> src;
  bool isStr = obj.kind == Value::Str;
  if (isStr) {
    for (std::string &cp : codePoints(obj.s))
      src.push_back(Value::str(std::move(cp)));
  } else if (obj.kind == Value::ListK) {
    src = *obj.list;
  } else {
    fail(e.line, std::string("cannot slice a ") + typeName(obj));
  }
  int64_t n = static_cast<int64_t>(src.size());
  int64_t step = 1;
  if (e.args[3]) {
    Value s = eval(*e.args[3]);
    if (s.kind != Value::None)
      step = toInt(s, e.line, "a slice step");
  }
  if (step == 0)
    fail(e.line, "slice step cannot be zero");
  auto bound = [&](const ExprP &x, int64_t dflt) {
    if (!x)
      return dflt;
    Value v = eval(*x);
    if (v.kind == Value::None)
      return dflt;
    int64_t i = toInt(v, e.line, "a slice index");
    if (i < 0)
      i += n;
    if (step > 0)
      return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t start = bound(e.args[1], step > 0 ? 0 : n - 1);
  int64_t stop = bound(e.args[2], step > 0 ? n : -1);
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    out.push_back(src[static_cast<size_t>(i)]);
    if (__builtin_add_overflow(i, step, &i))
      break;
  }
  if (isStr) {
    std::string s;
    for (const Value &v : out)
      s += v.s;
    return Value::str(s);
  }
  return Value::makeList(std::move(out));
}

Value Renderer::evalBinary(const Expr &e) {
  const std::string &op = e.op;
  if (op == "and") {
    Value l = eval(*e.args[0]);
    return truthy(l) ? eval(*e.args[1]) : l;
  }
  if (op == "or") {
    Value l = eval(*e.args[0]);
    return truthy(l) ? l : eval(*e.args[1]);
  }
  Value l = eval(*e.args[0]), r = eval(*e.args[1]);
  if (op == "~")
    return Value::str(str(l, e.line) + str(r, e.line));
  if (op == "+") {
    if (l.kind == Value::Str && r.kind == Value::Str)
      return Value::str(l.s + r.s);
    if (l.kind == Value::ListK && r.kind == Value::ListK) {
      if (l.list->size() + r.list->size() > limits.maxValueSize)
        fail(e.line, "a value holds more than " +
                         std::to_string(limits.maxValueSize) +
                         " items and string bytes");
      List c = *l.list;
      c.insert(c.end(), r.list->begin(), r.list->end());
      return Value::makeList(std::move(c));
    }
  }
  if (op == "*") {
    const Value *s = l.kind == Value::Str   ? &l
                     : r.kind == Value::Str ? &r
                                            : nullptr;
    const Value *n = s == &l ? &r : &l;
    if (s && (n->kind == Value::Int || n->kind == Value::Bool)) {
      std::string out;
      int64_t times = toInt(*n, e.line, "a repeat count");
      if (times > 0 && !s->s.empty() &&
          static_cast<uint64_t>(times) > limits.maxOutput / s->s.size())
        fail(e.line,
             "string repetition exceeds " + describeBytes(limits.maxOutput));
      for (int64_t k = 0; k < times; ++k)
        out += s->s;
      return Value::str(out);
    }
  }
  if (!l.isNumber() || !r.isNumber())
    fail(e.line, "unsupported operand types for " + op + ": '" + typeName(l) +
                     "' and '" + typeName(r) + "'");
  bool ints = l.kind != Value::Float && r.kind != Value::Float;
  auto asInt = [](const Value &v) { return v.kind == Value::Int ? v.i : v.b; };
  if (op == "/") {
    if (r.number() == 0)
      fail(e.line, "division by zero");
    return Value::real(l.number() / r.number());
  }
  if (ints) {
    int64_t a = asInt(l), b = asInt(r);
    int64_t c = 0;
    auto overflow = [&] {
      fail(e.line, "integer overflow in " + op + " (beyond 64 bits)");
    };
    if (op == "+") {
      if (__builtin_add_overflow(a, b, &c))
        overflow();
      return Value::integer(c);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(a, b, &c))
        overflow();
      return Value::integer(c);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(a, b, &c))
        overflow();
      return Value::integer(c);
    }
    if (op == "//" || op == "%") {
      if (b == 0)
        fail(e.line, "division by zero");
      if (a == INT64_MIN && b == -1) {
        if (op == "%")
          return Value::integer(0);
        overflow();
      }
      int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {
        --q;
        m += b;
      }
      return Value::integer(op == "//" ? q : m);
    }
    if (op == "**") {
      if (b < 0)
        return Value::real(std::pow(static_cast<double>(a), b));
      if (a == 0 || a == 1)
        return Value::integer(b == 0 ? 1 : a);
      if (a == -1)
        return Value::integer(b % 2 ? -1 : 1);
      int64_t p = 1;
      for (int64_t k = 0; k < b; ++k) // |a| >= 2: overflows by k = 63
        if (__builtin_mul_overflow(p, a, &p))
          overflow();
      return Value::integer(p);
    }
  }
  double a = l.number(), b = r.number();
  if (op == "+")
    return Value::real(a + b);
  if (op == "-")
    return Value::real(a - b);
  if (op == "*")
    return Value::real(a * b);
  if (op == "//" || op == "%") {
    if (b == 0)
      fail(e.line, "division by zero");
    double q = std::floor(a / b);
    return Value::real(op == "//" ? q : a - q * b);
  }
  if (op == "**")
    return Value::real(std::pow(a, b));
  fail(e.line, "unsupported operator " + op);
}

bool Renderer::compare(const std::string &op, const Value &l, const Value &r,
                       int line) {
  spend(l.size() + r.size(), line);
  if (op == "==")
    return equal(l, r);
  if (op == "!=")
    return !equal(l, r);
  if (op == "in" || op == "not in") {
    bool in = false;
    if (r.kind == Value::Str) {
      if (l.kind != Value::Str)
        fail(line, std::string("'in <string>' requires a string, not ") +
                       typeName(l));
      in = findText(r.s, l.s) != std::string::npos;
    } else if (r.kind == Value::ListK) {
      for (const Value &v : *r.list)
        in = in || equal(l, v);
    } else if (r.kind == Value::DictK || r.kind == Value::Ns) {
      in = l.kind == Value::Str && r.find(l.s);
    } else if (r.kind == Value::Undefined) {
      fail(line, "'in' an undefined value");
    } else {
      fail(line, std::string("argument of type '") + typeName(r) +
                     "' is not iterable");
    }
    return op == "in" ? in : !in;
  }
  int c;
  if (l.isNumber() && r.isNumber())
    c = l.number() < r.number() ? -1 : l.number() > r.number() ? 1 : 0;
  else if (l.kind == Value::Str && r.kind == Value::Str)
    c = l.s.compare(r.s) < 0 ? -1 : l.s.compare(r.s) > 0 ? 1 : 0;
  else
    fail(line, "'" + op + "' is not supported between '" + typeName(l) +
                   "' and '" + typeName(r) + "'");
  if (op == "<")
    return c < 0;
  if (op == ">")
    return c > 0;
  if (op == "<=")
    return c <= 0;
  return c >= 0;
}

std::vector<Value> Renderer::evalArgs(const Expr &e, size_t from) {
  std::vector<Value> a;
  for (size_t k = from; k < e.args.size(); ++k)
    a.push_back(eval(*e.args[k]));
  return a;
}

Value Renderer::kwarg(const Expr &e, const std::string &key,
                      const std::vector<Value> &pos, size_t idx, Value dflt) {
  for (const auto &[k, v] : e.kwargs)
    if (k == key)
      return eval(*v);
  return idx < pos.size() ? pos[idx] : dflt;
}

Value Renderer::eval(const Expr &e) {
  Value v = evalNode(e);
  account(v, e.line);
  return v;
}

Value Renderer::evalNode(const Expr &e) {
  switch (e.kind) {
  case Expr::Lit:
    return e.lit;
  case Expr::Name:
    return lookup(e.name);
  case Expr::Attr: {
    Value obj = eval(*e.args[0]);
    if (obj.kind == Value::Undefined)
      fail(e.line,
           "cannot read attribute '" + e.name + "' of an undefined value");
    if (obj.kind == Value::DictK || obj.kind == Value::Ns) {
      const Value *v = obj.find(e.name);
      return v ? *v : Value();
    }
    if (obj.kind == Value::None)
      fail(e.line, "'None' has no attribute '" + e.name + "'");
    return Value();
  }
  case Expr::Item:
    return item(eval(*e.args[0]), eval(*e.args[1]), e.line);
  case Expr::Slice:
    return slice(eval(*e.args[0]), e);
  case Expr::Call:
    if (e.args[0]->kind == Expr::Name)
      return callFunction(e);
    if (e.args[0]->kind == Expr::Attr)
      return callMethod(e);
    fail(e.line, "this value is not callable");
  case Expr::Filter:
    return applyFilter(e);
  case Expr::Test: {
    bool r = applyTest(e);
    return Value::boolean(e.op == "not" ? !r : r);
  }
  case Expr::Unary: {
    Value v = eval(*e.args[0]);
    if (e.op == "not")
      return Value::boolean(!truthy(v));
    if (v.kind == Value::Int || v.kind == Value::Bool) {
      int64_t i = v.kind == Value::Int ? v.i : v.b;
      if (e.op == "-" && i == INT64_MIN)
        fail(e.line, "integer overflow in - (beyond 64 bits)");
      return Value::integer(e.op == "-" ? -i : i);
    }
    if (v.kind == Value::Float)
      return Value::real(e.op == "-" ? -v.f : v.f);
    fail(e.line,
         "bad operand type for unary " + e.op + ": '" + typeName(v) + "'");
  }
  case Expr::Binary:
    return evalBinary(e);
  case Expr::Compare: {
    Value l = eval(*e.args[0]);
    for (size_t k = 0; k < e.ops.size(); ++k) {
      Value r = eval(*e.args[k + 1]);
      if (!compare(e.ops[k], l, r, e.line))
        return Value::boolean(false);
      l = std::move(r);
    }
    return Value::boolean(true);
  }
  case Expr::Cond:
    if (truthy(eval(*e.args[1])))
      return eval(*e.args[0]);
    return e.args[2] ? eval(*e.args[2]) : Value();
  case Expr::ListLit: {
    List l;
    for (const ExprP &x : e.args)
      l.push_back(eval(*x));
    return Value::makeList(std::move(l));
  }
  case Expr::DictLit: {
    Value d = Value::makeDict();
    for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
      Value key = eval(*e.args[k]);
      if (key.kind != Value::Str)
        fail(e.line, "dict keys must be strings here");
      d.setKey(key.s, eval(*e.args[k + 1]));
    }
    d.measure();
    return d;
  }
  }
  return Value();
}

} // namespace mtc::tok::jinja
