//===- ChatTemplateBuiltins.cpp - Jinja functions, filters, tests ---------===//
//
// Part of mtc. What a chat template may call: the global functions
// (raise_exception, range, namespace, dict), the methods of strings and
// dicts, the filters and the tests (ChatTemplate.h lists them).
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplateInternal.h"

#include <algorithm>

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
    List l;
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (static_cast<int64_t>(l.size()) >= limits.maxIterations)
        fail(e.line, "range() is too long");
      l.push_back(Value::integer(i));
      if (__builtin_add_overflow(i, step, &i))
        break;
    }
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
  Value v = lookup(fn);
  if (v.kind == Value::Undefined)
    fail(e.line, "'" + fn + "' is undefined (not a supported function)");
  fail(e.line, "'" + fn + "' is not callable");
}

std::string Renderer::replaceText(const std::string &s, const std::string &from,
                                  const std::string &to, int64_t count,
                                  int line) {
  std::string out;
  size_t p = 0;
  for (int64_t done = 0;; ++done) {
    size_t q =
        (count < 0 || done < count) ? findText(s, from, p) : std::string::npos;
    if (q == std::string::npos)
      return out + s.substr(p);
    out += s.substr(p, q - p) + to;
    grown(out, line);
    p = q + from.size();
  }
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
      std::vector<std::string> cands;
      if (!a.empty() && a[0].kind == Value::ListK) {
        for (const Value &v : *a[0].list)
          if (v.kind == Value::Str)
            cands.push_back(v.s);
      } else {
        cands.push_back(strArg(0));
      }
      for (const std::string &c : cands)
        if (s.size() >= c.size() &&
            (m == "startswith"
                 ? s.compare(0, c.size(), c) == 0
                 : s.compare(s.size() - c.size(), c.size(), c) == 0))
          return Value::boolean(true);
      return Value::boolean(false);
    }
    if (m == "replace") {
      std::string from = strArg(0), to = strArg(1);
      int64_t count = a.size() > 2 ? toInt(a[2], e.line, "count") : -1;
      std::string out;
      if (from.empty()) {
        // Python inserts between every code point.
        std::vector<std::string> cps = codePoints(s);
        int64_t done = 0;
        for (size_t k = 0; k <= cps.size(); ++k) {
          if (count < 0 || done < count) {
            out += to;
            ++done;
            grown(out, e.line);
          }
          if (k < cps.size())
            out += cps[k];
        }
        return Value::str(out);
      }
      return Value::str(replaceText(s, from, to, count, e.line));
    }
    if (m == "split") {
      Value sep = kwarg(e, "sep", a, 0, Value::none());
      int64_t maxsplit = toInt(kwarg(e, "maxsplit", a, 1, Value::integer(-1)),
                               e.line, "maxsplit");
      List parts;
      if (sep.kind == Value::None || sep.kind == Value::Undefined) {
        std::vector<std::string> cps = codePoints(s);
        size_t k = 0;
        while (k < cps.size()) {
          while (k < cps.size() && pySpace(utf8At(cps[k], 0, cps[k].size())))
            ++k;
          if (k >= cps.size())
            break;
          std::string w;
          if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
            for (; k < cps.size(); ++k)
              w += cps[k];
            // Python strips trailing whitespace only when splitting.
            parts.push_back(Value::str(w));
            break;
          }
          while (k < cps.size() && !pySpace(utf8At(cps[k], 0, cps[k].size())))
            w += cps[k++];
          parts.push_back(Value::str(w));
        }
        return Value::makeList(std::move(parts));
      }
      if (sep.kind != Value::Str || sep.s.empty())
        fail(e.line, "split() separator must be a non-empty string");
      size_t p = 0;
      while (true) {
        size_t q =
            (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit)
                ? findText(s, sep.s, p)
                : std::string::npos;
        if (q == std::string::npos) {
          parts.push_back(Value::str(s.substr(p)));
          break;
        }
        parts.push_back(Value::str(s.substr(p, q - p)));
        p = q + sep.s.size();
      }
      return Value::makeList(std::move(parts));
    }
  }
  if (obj.kind == Value::DictK || obj.kind == Value::Ns) {
    if (m == "items" || m == "keys" || m == "values") {
      List l;
      for (const auto &kv : *obj.dict) {
        if (m == "items")
          l.push_back(Value::makeList({Value::str(kv.first), kv.second}));
        else if (m == "keys")
          l.push_back(Value::str(kv.first));
        else
          l.push_back(kv.second);
      }
      return Value::makeList(std::move(l));
    }
    if (m == "get") {
      if (a.empty())
        fail(e.line, "get() needs a key");
      const Value *v = a[0].kind == Value::Str ? obj.find(a[0].s) : nullptr;
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
  if (f == "trim")
    return Value::str(
        pyStrip(str(v, e.line), true, true, a.empty() ? nullptr : &a[0]));
  if (f == "length" || f == "count") {
    if (v.kind == Value::Str)
      return Value::integer(static_cast<int64_t>(codePoints(v.s).size()));
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
  if (f == "int") {
    if (v.kind == Value::Int)
      return v;
    // In the range of int64 (NaN fails both tests), else the default.
    if (v.kind == Value::Float && v.f > -9223372036854775808.0 &&
        v.f < 9223372036854775808.0)
      return Value::integer(static_cast<int64_t>(v.f));
    if (v.kind == Value::Bool)
      return Value::integer(v.b);
    if (v.kind == Value::Str) {
      try {
        size_t used = 0;
        std::string t = pyStrip(v.s, true, true, nullptr);
        int64_t i = std::stoll(t, &used);
        if (used == t.size())
          return Value::integer(i);
      } catch (...) {
      }
    }
    return a.empty() ? Value::integer(0) : a[0];
  }
  if (f == "float") {
    if (v.isNumber())
      return Value::real(v.number());
    if (v.kind == Value::Str) {
      char *end = nullptr;
      std::string t = pyStrip(v.s, true, true, nullptr);
      double d = std::strtod(t.c_str(), &end);
      if (!t.empty() && end == t.c_str() + t.size())
        return Value::real(d);
    }
    return a.empty() ? Value::real(0) : a[0];
  }
  if (f == "first" || f == "last") {
    List l = iterate(v, e.line);
    if (l.empty())
      return Value();
    return f == "first" ? l.front() : l.back();
  }
  if (f == "reverse") {
    if (v.kind == Value::Str) {
      std::vector<std::string> cps = codePoints(v.s);
      std::string s;
      for (size_t k = cps.size(); k-- > 0;)
        s += cps[k];
      return Value::str(s);
    }
    List l = iterate(v, e.line);
    std::reverse(l.begin(), l.end());
    return Value::makeList(std::move(l));
  }
  if (f == "list") {
    return Value::makeList(iterate(v, e.line));
  }
  if (f == "join") {
    std::string sep = a.empty() ? "" : str(a[0], e.line);
    std::string s;
    List l = iterate(v, e.line);
    for (size_t k = 0; k < l.size(); ++k) {
      s += (k ? sep : "") + str(l[k], e.line);
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
    List l;
    for (const auto &kv : *v.dict)
      l.push_back(Value::makeList({Value::str(kv.first), kv.second}));
    return Value::makeList(std::move(l));
  }
  if (f == "replace") {
    if (a.size() < 2)
      fail(e.line, "'replace' needs two arguments");
    std::string s = str(v, e.line), from = str(a[0], e.line),
                to = str(a[1], e.line);
    if (from.empty())
      return Value::str(s);
    return Value::str(replaceText(s, from, to, -1, e.line));
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
    return equal(v, a[0]);
  }
  fail(e.line, "unsupported Jinja test '" + t + "'");
}

} // namespace mtc::tok::jinja
