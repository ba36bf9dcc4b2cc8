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

Value Renderer::lookup(const std::string &name, int line) {
  uint64_t compared = 0;
  for (size_t k = scopes.size(); k-- > 0;) {
    const Dict &d = *scopes[k].dict;
    for (const auto &kv : d)
      if (kv.first == name) {
        spend((compared + d.size()) * kKeySteps, line);
        return kv.second;
      }
    compared += d.size();
  }
  spend(compared * kKeySteps, line);
  return Value();
}

const Value *Renderer::findKey(const Value &obj, const std::string &key,
                               int line) {
  spend(obj.dict ? obj.dict->size() * kKeySteps : 0, line);
  return obj.find(key);
}

void Renderer::setKey(Value &d, const std::string &key, Value v, int line) {
  spend(d.dict->size() * kKeySteps, line);
  d.setKey(key, std::move(v));
}

void Renderer::assign(const std::string &name, Value v, int line) {
  setKey(scopes.back(), name, std::move(v), line);
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

void Renderer::willGrow(uint64_t a, uint64_t b, int line) {
  if (a > limits.maxOutput || b > limits.maxOutput - a)
    fail(line, "a string exceeds " + describeBytes(limits.maxOutput));
}

void Renderer::spend(uint64_t steps, int line) {
  work = work + steps < work ? UINT64_MAX : work + steps;
  if (work > limits.maxWork)
    fail(line, "rendering takes more than " +
                   withCommas(static_cast<int64_t>(
                       std::min<uint64_t>(limits.maxWork, INT64_MAX))) +
                   " steps (RenderLimits::maxWork: about one per byte made "
                   "or scanned, " +
                   std::to_string(kExprSteps) + " per expression, " +
                   std::to_string(kLoopSteps) + " per loop iteration)");
}

void Renderer::tooBig(int line) const {
  fail(line, "a value holds more than " + describeBytes(limits.maxValueSize) +
                 " (RenderLimits::maxValueSize: its string bytes and " +
                 std::to_string(kItemBytes) + " bytes per item)");
}

void Renderer::reserve(uint64_t items, uint64_t bytes, int line) {
  uint64_t cap = limits.maxValueSize;
  if (items > cap / kItemBytes || bytes > cap - items * kItemBytes)
    tooBig(line);
  spend(items * kItemBytes + bytes, line);
}

void Renderer::push(List &l, Value v, uint64_t &held, int line) {
  uint64_t w = v.weight;
  if (w > limits.maxValueSize || held > limits.maxValueSize - w)
    tooBig(line);
  held += w;
  spend(kItemBytes + (v.kind == Value::Str ? v.s.size() : 0), line);
  l.push_back(std::move(v));
}

void Renderer::account(const Value &v, int line) {
  uint64_t steps = kExprSteps;
  switch (v.kind) {
  case Value::Str:
    if (v.s.size() > limits.maxOutput)
      fail(line, "a string exceeds " + describeBytes(limits.maxOutput));
    steps += v.s.size();
    break;
  case Value::ListK:
  case Value::DictK:
  case Value::Ns: {
    // A namespace's contents change: recount it (its keys are the cost).
    Value fresh;
    const Value *m = &v;
    if (v.kind == Value::Ns) {
      fresh = v;
      fresh.measure();
      m = &fresh;
      steps += v.dict->size();
    }
    if (m->depth > kMaxDepth)
      fail(line, "values nest more than " + std::to_string(kMaxDepth) +
                     " levels deep");
    if (m->weight > limits.maxValueSize)
      tooBig(line);
    break;
  }
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
      assign(n.vars[0], std::move(v), n.line);
    } else {
      Value ns = lookup(n.vars[0], n.line);
      if (ns.kind != Value::Ns)
        fail(n.line, "cannot assign attribute '" + n.vars[1] + "' of '" +
                         n.vars[0] + "' (a " + typeName(ns) +
                         ", not a namespace)");
      // No namespace in a namespace: values stay acyclic.
      if (v.hasNs)
        fail(n.line, "cannot store a namespace in attribute '" + n.vars[1] +
                         "' of namespace '" + n.vars[0] + "'");
      setKey(ns, n.vars[1], std::move(v), n.line);
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

std::shared_ptr<const List> Renderer::iterate(const Value &v, int line) {
  switch (v.kind) {
  case Value::Undefined:
    return std::make_shared<List>();
  case Value::ListK:
    return v.list;
  case Value::DictK: {
    uint64_t bytes = 0;
    for (const auto &kv : *v.dict)
      bytes += kv.first.size();
    reserve(v.dict->size(), bytes, line);
    auto keys = std::make_shared<List>();
    for (const auto &kv : *v.dict)
      keys->push_back(Value::str(kv.first));
    return keys;
  }
  case Value::Str: {
    reserve(cpCount(v.s), v.s.size(), line);
    auto l = std::make_shared<List>();
    for (size_t p = 0; p < v.s.size();) {
      size_t q = utf8Next(v.s, p);
      l->push_back(Value::str(v.s.substr(p, q - p)));
      p = q;
    }
    return l;
  }
  default:
    fail(line, std::string("'") + typeName(v) + "' object is not iterable");
  }
}

void Renderer::bindVars(const std::vector<std::string> &vars, const Value &item,
                        int line) {
  if (vars.size() == 1) {
    assign(vars[0], item, line);
    return;
  }
  std::shared_ptr<const List> parts = iterate(item, line);
  if (parts->size() != vars.size())
    fail(line, "cannot unpack " + std::to_string(parts->size()) +
                   " values into " + std::to_string(vars.size()));
  for (size_t k = 0; k < vars.size(); ++k)
    assign(vars[k], (*parts)[k], line);
}

Flow Renderer::execFor(const Node &n) {
  std::shared_ptr<const List> items = iterate(eval(*n.expr), n.line);
  auto strBytes = [](const Value &v) {
    return v.kind == Value::Str ? v.s.size() : 0;
  };
  if (n.filter) {
    auto kept = std::make_shared<List>();
    uint64_t held = 0;
    for (const Value &item : *items) {
      if (++iterations > limits.maxIterations)
        fail(n.line, "more than " + withCommas(limits.maxIterations) +
                         " loop iterations (RenderLimits::maxIterations)");
      spend(kLoopSteps + strBytes(item), n.line);
      scopes.push_back(Value::makeDict());
      bindVars(n.vars, item, n.line);
      bool keep = truthy(eval(*n.filter));
      scopes.pop_back();
      if (keep)
        push(*kept, item, held, n.line);
    }
    items = std::move(kept);
  }
  if (items->empty()) {
    scopes.push_back(Value::makeDict());
    exec(n.elseBody);
    scopes.pop_back();
    return Flow::Normal;
  }
  int64_t len = static_cast<int64_t>(items->size());
  for (int64_t k = 0; k < len; ++k) {
    if (++iterations > limits.maxIterations)
      fail(n.line, "more than " + withCommas(limits.maxIterations) +
                       " loop iterations (RenderLimits::maxIterations)");
    const Value &item = (*items)[static_cast<size_t>(k)];
    const Value *prev = k > 0 ? &(*items)[static_cast<size_t>(k - 1)] : nullptr;
    const Value *next =
        k + 1 < len ? &(*items)[static_cast<size_t>(k + 1)] : nullptr;
    // The item is copied into the loop variable, previtem and nextitem.
    spend(kLoopSteps + 3 * strBytes(item), n.line);
    Dict loop = {
        {"index", Value::integer(k + 1)},
        {"index0", Value::integer(k)},
        {"revindex", Value::integer(len - k)},
        {"revindex0", Value::integer(len - k - 1)},
        {"first", Value::boolean(k == 0)},
        {"last", Value::boolean(k == len - 1)},
        {"length", Value::integer(len)},
        {"previtem", prev ? *prev : Value()},
        {"nextitem", next ? *next : Value()},
    };
    scopes.push_back(Value::makeDict({{"loop", Value::makeDict(loop)}}));
    bindVars(n.vars, item, n.line);
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
    const Value *v = findKey(obj, key.s, line);
    return v ? *v : Value();
  }
  if (obj.kind == Value::ListK || obj.kind == Value::Str) {
    if (key.kind == Value::Str)
      return Value(); // an attribute of a list or string: undefined
    int64_t i = toInt(key, line, "an index");
    if (obj.kind == Value::Str)
      spend(obj.s.size(), line); // walked to the code point
    if (obj.kind == Value::ListK) {
      int64_t n = static_cast<int64_t>(obj.list->size());
      if (i < 0)
        i += n;
      if (i < 0 || i >= n)
        return Value();
      return (*obj.list)[static_cast<size_t>(i)];
    }
    int64_t n = static_cast<int64_t>(cpCount(obj.s));
    if (i < 0)
      i += n;
    if (i < 0 || i >= n)
      return Value();
    size_t p = cpOffset(obj.s, static_cast<size_t>(i));
    return Value::str(obj.s.substr(p, utf8Next(obj.s, p) - p));
  }
  if (obj.kind == Value::None)
    fail(line, "'None' has no item " + pyRepr(key, limits.maxOutput, line));
  return Value();
}

Value Renderer::slice(const Value &obj, const Expr &e) {
  bool isStr = obj.kind == Value::Str;
  if (!isStr && obj.kind != Value::ListK)
    fail(e.line, std::string("cannot slice a ") + typeName(obj));
  if (isStr)
    spend(obj.s.size(), e.line); // walked (and reversed for a negative step)
  int64_t n = static_cast<int64_t>(isStr ? cpCount(obj.s) : obj.list->size());
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
      i = i < -n ? -1 : i + n;
    if (step > 0)
      return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t start = bound(e.args[1], step > 0 ? 0 : n - 1);
  int64_t stop = bound(e.args[2], step > 0 ? n : -1);
  // The indices start, start + step, ... before stop (Python's slice).
  uint64_t count = 0;
  if (step > 0 && start < stop)
    count = (static_cast<uint64_t>(stop - start) - 1) /
                static_cast<uint64_t>(step) +
            1;
  else if (step < 0 && start > stop)
    count = (static_cast<uint64_t>(start - stop) - 1) /
                (static_cast<uint64_t>(-(step + 1)) + 1) +
            1;
  if (isStr) {
    // A backward slice is a forward one of the reversed string.
    const std::string *src = &obj.s;
    std::string reversed;
    uint64_t stride = static_cast<uint64_t>(step);
    if (step < 0) {
      reversed = cpReverse(obj.s);
      src = &reversed;
      start = n - 1 - start;
      stride = static_cast<uint64_t>(-(step + 1)) + 1;
    }
    std::string out;
    size_t p = cpOffset(*src, static_cast<size_t>(start));
    for (uint64_t k = 0; k < count; ++k) {
      size_t q = utf8Next(*src, p);
      out.append(*src, p, q - p);
      // The next index: stride code points on (stride may pass the end).
      for (uint64_t j = 0; j < stride && p < src->size(); ++j)
        p = utf8Next(*src, p);
    }
    return Value::str(std::move(out));
  }
  if (count > limits.maxValueSize / kItemBytes)
    tooBig(e.line);
  List out;
  out.reserve(static_cast<size_t>(count));
  uint64_t held = 0;
  for (uint64_t k = 0; k < count; ++k)
    push(out, (*obj.list)[static_cast<size_t>(nthIndex(start, k, step))], held,
         e.line);
  return Value::makeList(std::move(out));
}

Value Renderer::repeat(const Value &seq, int64_t times, int line) {
  if (times <= 0)
    return seq.kind == Value::Str ? Value::str("") : Value::makeList();
  uint64_t t = static_cast<uint64_t>(times);
  if (seq.kind == Value::Str) {
    if (!seq.s.empty() && t > limits.maxOutput / seq.s.size())
      fail(line,
           "string repetition exceeds " + describeBytes(limits.maxOutput));
    // Doubling: a few copies of memory, not one append per repetition.
    size_t total = seq.s.size() * static_cast<size_t>(t);
    std::string out;
    out.reserve(total);
    if (total > 0)
      out = seq.s;
    while (out.size() < total)
      out.append(out, 0, std::min(out.size(), total - out.size()));
    return Value::str(std::move(out));
  }
  const List &l = *seq.list;
  if (l.empty()) // [] * 10**15: no loop over the count
    return Value::makeList();
  if (t > limits.maxValueSize / (l.size() * kItemBytes))
    tooBig(line);
  List out;
  uint64_t held = 0;
  for (uint64_t k = 0; k < t; ++k)
    for (const Value &v : l)
      push(out, v, held, line);
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
  if (op == "~") {
    std::string a = str(l, e.line), b = str(r, e.line);
    willGrow(a.size(), b.size(), e.line);
    return Value::str(a + b);
  }
  if (op == "+") {
    if (l.kind == Value::Str && r.kind == Value::Str) {
      willGrow(l.s.size(), r.s.size(), e.line);
      return Value::str(l.s + r.s);
    }
    if (l.kind == Value::ListK && r.kind == Value::ListK) {
      // Checked before the copy: l + l doubling a list is refused here.
      if (l.weight + r.weight - kItemBytes > limits.maxValueSize)
        tooBig(e.line);
      List c;
      c.reserve(l.list->size() + r.list->size());
      uint64_t held = 0;
      for (const List *part : {l.list.get(), r.list.get()})
        for (const Value &v : *part)
          push(c, v, held, e.line);
      return Value::makeList(std::move(c));
    }
  }
  if (op == "*") {
    // str * int, list * int (either way round), bool counting as an int.
    bool ls = l.kind == Value::Str || l.kind == Value::ListK;
    bool rs = r.kind == Value::Str || r.kind == Value::ListK;
    const Value *seq = ls ? &l : rs ? &r : nullptr;
    const Value *n = seq == &l ? &r : &l;
    if (seq && (n->kind == Value::Int || n->kind == Value::Bool))
      return repeat(*seq, toInt(*n, e.line, "a repeat count"), e.line);
  }
  if (!l.isNumber() || !r.isNumber())
    fail(e.line, "unsupported operand types for " + op + ": '" + typeName(l) +
                     "' and '" + typeName(r) + "'");
  return arithmetic(op, l, r, e.line);
}

namespace {

/// Python's float ** float: an error where Python raises (0 to a negative
/// power, a finite result too large for a double, a negative base to a
/// fractional power, which gives a complex number).
double pyPow(double a, double b, int line) {
  if (b == 0)
    return 1.0;
  if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b))
    return std::pow(a, b);
  if (a == 0 && b < 0)
    fail(line, "division by zero: 0.0 cannot be raised to a negative power");
  if (a < 0 && b != std::floor(b))
    fail(line, "a negative number raised to a fractional power is a complex "
               "number (not supported)");
  double r = std::pow(a, b);
  if (std::isinf(r))
    fail(line, "float overflow in ** (the result is beyond the largest "
               "double, about 1.8e308)");
  return r;
}

} // namespace

Value Renderer::arithmetic(const std::string &op, const Value &l,
                           const Value &r, int line) {
  bool ints = l.kind != Value::Float && r.kind != Value::Float;
  auto asInt = [](const Value &v) { return v.kind == Value::Int ? v.i : v.b; };
  if (op == "/") {
    if (r.number() == 0)
      fail(line, "division by zero");
    return Value::real(l.number() / r.number());
  }
  if (ints) {
    int64_t a = asInt(l), b = asInt(r);
    int64_t c = 0;
    auto overflow = [&] {
      fail(line, "integer overflow in " + op + " (beyond 64 bits)");
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
        fail(line, "division by zero");
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
      // A negative exponent gives a float, as in Python.
      if (b < 0)
        return Value::real(
            pyPow(static_cast<double>(a), static_cast<double>(b), line));
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
    // CPython's float divmod: exact remainder by fmod, sign of the divisor.
    if (b == 0)
      fail(line, "division by zero");
    double mod = std::fmod(a, b);
    double div = (a - mod) / b;
    if (mod != 0) {
      if ((b < 0) != (mod < 0)) {
        mod += b;
        div -= 1.0;
      }
    } else {
      mod = std::copysign(0.0, b);
    }
    if (op == "%")
      return Value::real(mod);
    double floordiv;
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > 0.5)
        floordiv += 1.0;
    } else {
      floordiv = std::copysign(0.0, a / b);
    }
    return Value::real(floordiv);
  }
  if (op == "**")
    return Value::real(pyPow(a, b, line));
  fail(line, "unsupported operator " + op);
}

bool Renderer::compare(const std::string &op, const Value &l, const Value &r,
                       int line) {
  // Equality walks both values (a namespace compares by identity).
  spend(l.weight + r.weight, line);
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
      in = TextFinder(l.s).find(r.s) != std::string::npos;
    } else if (r.kind == Value::ListK) {
      for (const Value &v : *r.list)
        in = in || equal(l, v);
    } else if (r.kind == Value::DictK || r.kind == Value::Ns) {
      in = l.kind == Value::Str && findKey(r, l.s, line);
    } else if (r.kind == Value::Undefined) {
      fail(line, "'in' an undefined value");
    } else {
      fail(line, std::string("argument of type '") + typeName(r) +
                     "' is not iterable");
    }
    return op == "in" ? in : !in;
  }
  int c;
  if (l.isNumber() && r.isNumber()) {
    c = compareNumbers(l, r);
    if (c == 2) // NaN: every ordering is false
      return false;
  } else if (l.kind == Value::Str && r.kind == Value::Str) {
    int k = l.s.compare(r.s);
    c = k < 0 ? -1 : k > 0 ? 1 : 0;
  } else {
    fail(line, "'" + op + "' is not supported between '" + typeName(l) +
                   "' and '" + typeName(r) + "'");
  }
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
    return lookup(e.name, e.line);
  case Expr::Attr: {
    Value obj = eval(*e.args[0]);
    if (obj.kind == Value::Undefined)
      fail(e.line,
           "cannot read attribute '" + e.name + "' of an undefined value");
    if (obj.kind == Value::DictK || obj.kind == Value::Ns) {
      const Value *v = findKey(obj, e.name, e.line);
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
      setKey(d, key.s, eval(*e.args[k + 1]), e.line);
    }
    d.measure();
    return d;
  }
  }
  return Value();
}

} // namespace mtc::tok::jinja
