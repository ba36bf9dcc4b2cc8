//===- ChatTemplateBuiltins.cpp - Jinja functions, filters, tests ---------===//
//
// Part of mtc. What a chat template may call: the global functions
// (raise_exception, range, namespace, dict), the methods of strings and
// dicts, the filters and the tests (ChatTemplate.h lists them).
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplateInternal.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace mtc::tok::jinja {

Value Renderer::callFunction(const Expr &e) {
  const std::string &fn = e.args[0]->name;
  std::vector<Value> a = evalArgs(e, 1);
  if (fn == "raise_exception")
    throw TemplateError{"template raised: " +
                            (a.empty() ? std::string() : str(a[0], e.line)),
                        -1};
  if (fn == "range") {
    int64_t start = 0, stop = 0, step = 1;
    if (a.size() == 1)
      stop = toInt(a[0], e.line, "range()'s argument");
    else if (a.size() >= 2) {
      start = toInt(a[0], e.line, "range()'s argument");
      stop = toInt(a[1], e.line, "range()'s argument");
      if (a.size() >= 3)
        step = toInt(a[2], e.line, "range()'s argument");
    }
    if (step == 0)
      fail(e.line, "range() step cannot be zero");
    // The length, counted before anything is made.
    uint64_t count = 0;
    if (step > 0 && start < stop)
      count = (static_cast<uint64_t>(stop) - static_cast<uint64_t>(start) - 1) /
                  static_cast<uint64_t>(step) +
              1;
    else if (step < 0 && start > stop)
      count = (static_cast<uint64_t>(start) - static_cast<uint64_t>(stop) - 1) /
                  (static_cast<uint64_t>(-(step + 1)) + 1) +
              1;
    int64_t most = std::min<int64_t>(kMaxRange, limits.maxIterations);
    if (count > static_cast<uint64_t>(most))
      fail(e.line, "range() of " +
                       withCommas(static_cast<int64_t>(
                           std::min<uint64_t>(count, INT64_MAX))) +
                       " items: more than " + withCommas(most) +
                       (most == kMaxRange
                            ? " (Jinja2's sandbox, as transformers uses it)"
                            : " (RenderLimits::maxIterations)"));
    reserve(count, 0, e.line);
    List l;
    l.reserve(static_cast<size_t>(count));
    for (uint64_t k = 0; k < count; ++k)
      l.push_back(Value::integer(nthIndex(start, k, step)));
    return Value::makeList(std::move(l));
  }
  if (fn == "namespace" || fn == "dict") {
    Dict d;
    for (const auto &[k, v] : e.kwargs)
      d.emplace_back(k, eval(*v));
    if (!a.empty())
      fail(e.line, fn + "() takes keyword arguments only here");
    if (fn == "namespace")
      for (const auto &[k, v] : d)
        if (v.hasNs)
          fail(e.line, "cannot store a namespace in attribute '" + k +
                           "' of a namespace");
    return Value::makeDict(std::move(d),
                           fn == "namespace" ? Value::Ns : Value::DictK);
  }
  Value v = lookup(fn, e.line);
  if (v.kind == Value::Undefined)
    fail(e.line, "'" + fn + "' is undefined (not a supported function)");
  fail(e.line, "'" + fn + "' is not callable");
}

std::string Renderer::replaceText(const std::string &s, const std::string &from,
                                  const std::string &to, int64_t count,
                                  int line) {
  std::string out;
  if (from.empty()) {
    // Python inserts before every code point and at the end.
    int64_t done = 0;
    for (size_t p = 0;; ++done) {
      if (count >= 0 && done >= count)
        return out.append(s, p, std::string::npos);
      out += to;
      grown(out, line);
      spend(kKeySteps, line);
      if (p == s.size())
        return out;
      size_t q = utf8Next(s, p);
      out.append(s, p, q - p);
      p = q;
    }
  }
  TextFinder finder(from);
  size_t p = 0;
  for (int64_t done = 0;; ++done) {
    size_t q =
        (count < 0 || done < count) ? finder.find(s, p) : std::string::npos;
    if (q == std::string::npos)
      return out.append(s, p, std::string::npos);
    out.append(s, p, q - p);
    out += to;
    grown(out, line);
    spend(kKeySteps, line);
    p = q + from.size();
  }
}

Value Renderer::dictItems(const Value &d, int line) {
  List l;
  uint64_t held = 0;
  for (const auto &kv : *d.dict) {
    List pair = {Value::str(kv.first), kv.second};
    spend(kv.first.size() + kItemBytes, line);
    push(l, Value::makeList(std::move(pair)), held, line);
  }
  return Value::makeList(std::move(l));
}

namespace {

/// Python's int() of a decimal string: optional whitespace and sign, digits
/// with single underscores between them. False when \p t is not one; an
/// overflow of int64 sets \p overflow.
bool parsePyInt(const std::string &t, int64_t &out, bool &overflow) {
  size_t k = 0, n = t.size();
  bool neg = false;
  if (k < n && (t[k] == '+' || t[k] == '-'))
    neg = t[k++] == '-';
  if (k == n)
    return false;
  uint64_t v = 0;
  bool digit = false;
  overflow = false;
  for (; k < n; ++k) {
    char c = t[k];
    if (c == '_' && digit && k + 1 < n && t[k + 1] >= '0' && t[k + 1] <= '9')
      continue;
    if (c < '0' || c > '9')
      return false;
    digit = true;
    if (v > (UINT64_MAX - 9) / 10)
      overflow = true;
    else
      v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > (neg ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX)))
    overflow = true;
  if (!overflow)
    out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

/// Python's float() of a string (whitespace stripped already): a decimal
/// number with optional underscores between digits, inf, infinity or nan
/// in any case, with an optional sign. Not hexadecimal, which strtod reads.
bool parsePyFloat(const std::string &t, double &out) {
  std::string clean;
  size_t k = 0, n = t.size();
  if (k < n && (t[k] == '+' || t[k] == '-'))
    clean += t[k++];
  std::string word;
  for (size_t j = k; j < n; ++j)
    word += static_cast<char>(std::tolower(static_cast<unsigned char>(t[j])));
  if (word == "inf" || word == "infinity" || word == "nan") {
    out = std::strtod((clean + word).c_str(), nullptr);
    return true;
  }
  // digits [. digits] [e [sign] digits], at least one digit in the mantissa.
  auto digits = [&](bool &any) {
    while (k < n) {
      char c = t[k];
      if (c >= '0' && c <= '9') {
        clean += c;
        any = true;
        ++k;
      } else if (c == '_' && any && k + 1 < n && t[k + 1] >= '0' &&
                 t[k + 1] <= '9' && t[k - 1] != '_') {
        ++k;
      } else {
        break;
      }
    }
  };
  bool intPart = false, fracPart = false;
  digits(intPart);
  if (k < n && t[k] == '.') {
    clean += t[k++];
    digits(fracPart);
  }
  if (!intPart && !fracPart)
    return false;
  if (k < n && (t[k] == 'e' || t[k] == 'E')) {
    clean += t[k++];
    if (k < n && (t[k] == '+' || t[k] == '-'))
      clean += t[k++];
    bool expPart = false;
    digits(expPart);
    if (!expPart)
      return false;
  }
  if (k != n)
    return false;
  out = std::strtod(clean.c_str(), nullptr);
  return true;
}

} // namespace

Value Renderer::toIntFilter(const Value &v, const Value &dflt, int line) {
  auto overflow = [&] {
    fail(line, "integer overflow in the int filter (beyond 64 bits)");
  };
  // Finite floats within int64 truncate; NaN is the default; others overflow
  // (Jinja2 gives a Python integer, or raises for an infinity).
  auto fromFloat = [&](double d, bool infIsDefault) {
    if (std::isnan(d) || (infIsDefault && std::isinf(d)))
      return dflt;
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
      overflow();
    return Value::integer(static_cast<int64_t>(d));
  };
  switch (v.kind) {
  case Value::Int:
    return v;
  case Value::Bool:
    return Value::integer(v.b);
  case Value::Float:
    return fromFloat(v.f, false);
  case Value::Str: {
    // int(s), else int(float(s)) (Jinja2's "42.23"|int), else the default.
    std::string t = pyStrip(v.s, true, true, nullptr);
    int64_t i = 0;
    bool over = false;
    if (parsePyInt(t, i, over)) {
      if (over)
        overflow();
      return Value::integer(i);
    }
    double d = 0;
    if (parsePyFloat(t, d))
      return fromFloat(d, true);
    return dflt;
  }
  default:
    return dflt;
  }
}

Value Renderer::toFloatFilter(const Value &v, const Value &dflt) {
  if (v.isNumber())
    return Value::real(v.number());
  double d = 0;
  if (v.kind == Value::Str &&
      parsePyFloat(pyStrip(v.s, true, true, nullptr), d))
    return Value::real(d);
  return dflt;
}

Value Renderer::callMethod(const Expr &e) {
  const Expr &attr = *e.args[0];
  Value obj = eval(*attr.args[0]);
  const std::string &m = attr.name;
  std::vector<Value> a = evalArgs(e, 1);
  auto strArg = [&](size_t k) -> std::string {
    if (k >= a.size() || a[k].kind != Value::Str)
      fail(e.line, "'" + m + "' needs a string argument");
    return a[k].s;
  };
  if (obj.kind == Value::Str) {
    const std::string &s = obj.s;
    spend(s.size(), e.line); // every string method scans its string
    if (m == "strip" || m == "lstrip" || m == "rstrip") {
      const Value *chars = a.empty() ? nullptr : &a[0];
      return Value::str(pyStrip(s, m != "rstrip", m != "lstrip", chars));
    }
    if (m == "upper")
      return Value::str(asciiMap(s, 0));
    if (m == "lower")
      return Value::str(asciiMap(s, 1));
    if (m == "capitalize")
      return Value::str(asciiMap(s, 2));
    if (m == "title")
      return Value::str(asciiMap(s, 3));
    if (m == "startswith" || m == "endswith") {
      std::vector<const std::string *> cands;
      if (!a.empty() && a[0].kind == Value::ListK) {
        spend(a[0].weight, e.line);
        for (const Value &v : *a[0].list)
          if (v.kind == Value::Str)
            cands.push_back(&v.s);
      } else {
        strArg(0);
        cands.push_back(&a[0].s);
      }
      for (const std::string *c : cands)
        if (s.size() >= c->size() &&
            (m == "startswith"
                 ? s.compare(0, c->size(), *c) == 0
                 : s.compare(s.size() - c->size(), c->size(), *c) == 0))
          return Value::boolean(true);
      return Value::boolean(false);
    }
    if (m == "replace") {
      std::string from = strArg(0), to = strArg(1);
      int64_t count = a.size() > 2 ? toInt(a[2], e.line, "count") : -1;
      return Value::str(replaceText(s, from, to, count, e.line));
    }
    if (m == "split") {
      Value sep = kwarg(e, "sep", a, 0, Value::none());
      int64_t maxsplit = toInt(kwarg(e, "maxsplit", a, 1, Value::integer(-1)),
                               e.line, "maxsplit");
      List parts;
      uint64_t held = 0;
      auto part = [&](size_t from, size_t to) {
        push(parts, Value::str(s.substr(from, to - from)), held, e.line);
      };
      if (sep.kind == Value::None || sep.kind == Value::Undefined) {
        // Runs of whitespace separate; none at either end. With maxsplit,
        // the rest after the last split keeps its trailing whitespace.
        size_t p = 0;
        auto spaceAt = [&](size_t at, size_t &next) {
          next = utf8Next(s, at);
          return pySpace(utf8At(s, at, next));
        };
        while (true) {
          size_t q;
          while (p < s.size() && spaceAt(p, q))
            p = q;
          if (p >= s.size())
            break;
          if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
            part(p, s.size());
            break;
          }
          size_t w = p;
          while (w < s.size() && !spaceAt(w, q))
            w = q;
          part(p, w);
          p = w;
        }
        return Value::makeList(std::move(parts));
      }
      if (sep.kind != Value::Str || sep.s.empty())
        fail(e.line, "split() separator must be a non-empty string");
      TextFinder finder(sep.s);
      size_t p = 0;
      while (true) {
        size_t q =
            (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit)
                ? finder.find(s, p)
                : std::string::npos;
        if (q == std::string::npos) {
          part(p, s.size());
          break;
        }
        part(p, q);
        p = q + sep.s.size();
      }
      return Value::makeList(std::move(parts));
    }
  }
  if (obj.kind == Value::DictK || obj.kind == Value::Ns) {
    if (m == "items")
      return dictItems(obj, e.line);
    if (m == "keys" || m == "values") {
      List l;
      uint64_t held = 0;
      for (const auto &kv : *obj.dict)
        push(l, m == "keys" ? Value::str(kv.first) : kv.second, held, e.line);
      return Value::makeList(std::move(l));
    }
    if (m == "get") {
      if (a.empty())
        fail(e.line, "get() needs a key");
      const Value *v =
          a[0].kind == Value::Str ? findKey(obj, a[0].s, e.line) : nullptr;
      return v ? *v : (a.size() > 1 ? a[1] : Value::none());
    }
  }
  if (obj.kind == Value::Undefined)
    fail(e.line, "cannot call '" + m + "' of an undefined value");
  fail(e.line,
       std::string("unsupported method '") + m + "' of a " + typeName(obj));
}

Value Renderer::applyFilter(const Expr &e) {
  Value v = eval(*e.args[0]);
  std::vector<Value> a = evalArgs(e, 1);
  const std::string &f = e.name;
  if (v.kind == Value::Str)
    spend(v.s.size(), e.line); // every string filter scans its string
  if (f == "trim")
    return Value::str(
        pyStrip(str(v, e.line), true, true, a.empty() ? nullptr : &a[0]));
  if (f == "length" || f == "count") {
    if (v.kind == Value::Str)
      return Value::integer(static_cast<int64_t>(cpCount(v.s)));
    if (v.kind == Value::ListK)
      return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.kind == Value::DictK || v.kind == Value::Ns)
      return Value::integer(static_cast<int64_t>(v.dict->size()));
    if (v.kind == Value::Undefined)
      return Value::integer(0);
    fail(e.line,
         std::string("object of type '") + typeName(v) + "' has no len()");
  }
  if (f == "tojson") {
    Value ind = kwarg(e, "indent", a, 0, Value::none());
    int indent = -1;
    if (ind.kind != Value::None) {
      // json.dumps indents by max(indent, 0) spaces per level.
      int64_t n = toInt(ind, e.line, "indent");
      indent = static_cast<int>(std::clamp<int64_t>(
          n, 0,
          static_cast<int64_t>(std::min<size_t>(limits.maxOutput, 1 << 30))));
    }
    std::string out;
    spend(v.weight, e.line);
    toJson(v, indent, 0, out, e.line, limits.maxOutput);
    return Value::str(out);
  }
  if (f == "upper" || f == "lower" || f == "capitalize" || f == "title")
    return Value::str(asciiMap(str(v, e.line), f == "upper"        ? 0
                                               : f == "lower"      ? 1
                                               : f == "capitalize" ? 2
                                                                   : 3));
  if (f == "string")
    return Value::str(str(v, e.line));
  if (f == "safe")
    return v;
  if (f == "int")
    return toIntFilter(v, kwarg(e, "default", a, 0, Value::integer(0)), e.line);
  if (f == "float")
    return toFloatFilter(v, kwarg(e, "default", a, 0, Value::real(0)));
  if (f == "first" || f == "last") {
    if (v.kind == Value::Str) {
      if (v.s.empty())
        return Value();
      size_t p = f == "first" ? 0 : cpOffset(v.s, cpCount(v.s) - 1);
      return Value::str(v.s.substr(p, utf8Next(v.s, p) - p));
    }
    std::shared_ptr<const List> l = iterate(v, e.line);
    if (l->empty())
      return Value();
    return f == "first" ? l->front() : l->back();
  }
  if (f == "reverse" || f == "list") {
    if (v.kind == Value::Str && f == "reverse")
      return Value::str(cpReverse(v.s));
    std::shared_ptr<const List> l = iterate(v, e.line);
    List out;
    out.reserve(l->size());
    uint64_t held = 0;
    for (size_t k = 0; k < l->size(); ++k)
      push(out, (*l)[f == "reverse" ? l->size() - 1 - k : k], held, e.line);
    return Value::makeList(std::move(out));
  }
  if (f == "join") {
    std::string sep = a.empty() ? "" : str(a[0], e.line);
    std::string s;
    std::shared_ptr<const List> l = iterate(v, e.line);
    spend(v.kind == Value::ListK ? v.weight : 0, e.line);
    for (size_t k = 0; k < l->size(); ++k) {
      if (k)
        s += sep;
      s += str((*l)[k], e.line);
      grown(s, e.line);
    }
    return Value::str(s);
  }
  if (f == "default" || f == "d") {
    Value dflt = a.empty() ? Value::str("") : a[0];
    bool boolean = truthy(kwarg(e, "boolean", a, 1, Value::boolean(false)));
    if (v.kind == Value::Undefined || (boolean && !truthy(v)))
      return dflt;
    return v;
  }
  if (f == "items") {
    if (v.kind == Value::Undefined)
      return Value::makeList();
    if (v.kind != Value::DictK && v.kind != Value::Ns)
      fail(e.line, std::string("'items' needs a mapping, not ") + typeName(v));
    return dictItems(v, e.line);
  }
  if (f == "replace") {
    // Jinja2's do_replace: str(s).replace(str(old), str(new), count).
    if (a.size() < 2)
      fail(e.line, "'replace' needs two arguments");
    std::string s = str(v, e.line), from = str(a[0], e.line),
                to = str(a[1], e.line);
    Value count = kwarg(e, "count", a, 2, Value::none());
    return Value::str(replaceText(
        s, from, to,
        count.kind == Value::None ? -1 : toInt(count, e.line, "count"),
        e.line));
  }
  fail(e.line, "unsupported Jinja filter '" + f + "'");
}

bool Renderer::applyTest(const Expr &e) {
  const std::string &t = e.name;
  // `is defined` must not fail on undefined intermediate attributes.
  Value v = eval(*e.args[0]);
  std::vector<Value> a = evalArgs(e, 1);
  if (t == "defined")
    return v.kind != Value::Undefined;
  if (t == "undefined")
    return v.kind == Value::Undefined;
  if (t == "none")
    return v.kind == Value::None;
  if (t == "string")
    return v.kind == Value::Str;
  if (t == "number")
    return v.kind == Value::Int || v.kind == Value::Float;
  if (t == "integer")
    return v.kind == Value::Int;
  if (t == "float")
    return v.kind == Value::Float;
  if (t == "boolean")
    return v.kind == Value::Bool;
  if (t == "true")
    return v.kind == Value::Bool && v.b;
  if (t == "false")
    return v.kind == Value::Bool && !v.b;
  if (t == "mapping")
    return v.kind == Value::DictK || v.kind == Value::Ns;
  if (t == "iterable")
    return v.kind == Value::ListK || v.kind == Value::DictK ||
           v.kind == Value::Str;
  if (t == "sequence")
    return v.kind == Value::ListK || v.kind == Value::DictK ||
           v.kind == Value::Str;
  if (t == "even" || t == "odd") {
    int64_t i = toInt(v, e.line, "the value of 'even'/'odd'");
    return ((i % 2) == 0) == (t == "even");
  }
  if (t == "equalto" || t == "eq" || t == "sameas") {
    if (a.empty())
      fail(e.line, "'" + t + "' needs an argument");
    spend(v.weight + a[0].weight, e.line); // equality walks both
    return equal(v, a[0]);
  }
  fail(e.line, "unsupported Jinja test '" + t + "'");
}

} // namespace mtc::tok::jinja
