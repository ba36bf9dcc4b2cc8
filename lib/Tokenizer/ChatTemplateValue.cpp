//===- ChatTemplateValue.cpp - Jinja values -------------------------------===//
//
// Part of mtc. The chat-template engine's Python-like values: their str and
// repr, json.dumps (tojson), conversion from the context JSON, equality, and
// the code-point helpers behind len, iteration and strip.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplateInternal.h"

#include "lib/Support/JsonString.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace mtc::tok::jinja {

const char *typeName(const Value &v) {
  switch (v.kind) {
  case Value::Undefined:
    return "undefined";
  case Value::None:
    return "NoneType";
  case Value::Bool:
    return "bool";
  case Value::Int:
    return "int";
  case Value::Float:
    return "float";
  case Value::Str:
    return "str";
  case Value::ListK:
    return "list";
  case Value::DictK:
    return "dict";
  case Value::Ns:
    return "Namespace";
  }
  return "?";
}

bool truthy(const Value &v) {
  switch (v.kind) {
  case Value::Undefined:
  case Value::None:
    return false;
  case Value::Bool:
    return v.b;
  case Value::Int:
    return v.i != 0;
  case Value::Float:
    return v.f != 0;
  case Value::Str:
    return !v.s.empty();
  case Value::ListK:
    return !v.list->empty();
  case Value::DictK:
    return !v.dict->empty();
  case Value::Ns:
    return true;
  }
  return false;
}

// Python's repr of a float: the shortest digits that read back as the same
// double, in positional notation when the decimal point falls within 16
// digits of them (1e-4 <= |x| < 1e16), else d.ddde+XX; ".0" when integral.
std::string floatRepr(double x) {
  if (std::isnan(x))
    return "nan";
  if (std::isinf(x))
    return x > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 0; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec, x);
    if (std::strtod(buf, nullptr) == x)
      break;
  }
  // buf is [-]d[.ddd]e(+|-)XX.
  const char *p = buf;
  std::string sign;
  if (*p == '-') {
    sign = "-";
    ++p;
  }
  std::string digits;
  for (; *p != 'e'; ++p)
    if (*p != '.')
      digits += *p;
  int exp = std::atoi(p + 1);
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  int ndigits = static_cast<int>(digits.size());
  int decpt = exp + 1; // x = 0.digits * 10^decpt
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0)
      return sign + "0." + std::string(static_cast<size_t>(-decpt), '0') +
             digits;
    if (decpt >= ndigits)
      return sign + digits +
             std::string(static_cast<size_t>(decpt - ndigits), '0') + ".0";
    return sign + digits.substr(0, static_cast<size_t>(decpt)) + "." +
           digits.substr(static_cast<size_t>(decpt));
  }
  std::string e = std::to_string(exp < 0 ? -exp : exp);
  if (e.size() < 2)
    e = "0" + e;
  return sign + digits.substr(0, 1) +
         (ndigits > 1 ? "." + digits.substr(1) : "") + "e" +
         (exp < 0 ? "-" : "+") + e;
}

namespace {

// Appends Python's str(v) (repr: repr(v)) to out; an error at \p line when
// out passes \p limit bytes.
void appendPy(std::string &out, const Value &v, bool repr, size_t limit,
              int line) {
  auto check = [&] {
    if (out.size() > limit)
      fail(line, "a string exceeds " + describeBytes(limit));
  };
  switch (v.kind) {
  case Value::Undefined:
    return;
  case Value::None:
    out += "None";
    return;
  case Value::Bool:
    out += v.b ? "True" : "False";
    return;
  case Value::Int:
    out += std::to_string(v.i);
    return;
  case Value::Float:
    out += floatRepr(v.f);
    return;
  case Value::Str: {
    if (!repr) {
      out += v.s;
      check();
      return;
    }
    bool hasSingle = v.s.find('\'') != std::string::npos;
    bool hasDouble = v.s.find('"') != std::string::npos;
    char q = hasSingle && !hasDouble ? '"' : '\'';
    static const char hex[] = "0123456789abcdef";
    out.reserve(out.size() + v.s.size() + 2);
    out += q;
    for (char ch : v.s) {
      unsigned char c = static_cast<unsigned char>(ch);
      if (c >= 0x20 && c != 0x7f && ch != '\\' && ch != q) {
        out += ch;
        continue;
      }
      out += '\\';
      if (ch == '\\' || ch == q)
        out += ch;
      else if (ch == '\n')
        out += 'n';
      else if (ch == '\r')
        out += 'r';
      else if (ch == '\t')
        out += 't';
      else {
        out += 'x';
        out += hex[c >> 4];
        out += hex[c & 15];
      }
    }
    out += q;
    check();
    return;
  }
  case Value::ListK:
    out += '[';
    for (size_t k = 0; k < v.list->size(); ++k) {
      if (k)
        out += ", ";
      appendPy(out, (*v.list)[k], true, limit, line);
      check();
    }
    out += ']';
    return;
  case Value::DictK:
  case Value::Ns: {
    out += v.kind == Value::Ns ? "<Namespace {" : "{";
    bool first = true;
    for (const auto &kv : *v.dict) {
      if (!first)
        out += ", ";
      first = false;
      appendPy(out, Value::str(kv.first), true, limit, line);
      out += ": ";
      appendPy(out, kv.second, true, limit, line);
      check();
    }
    out += v.kind == Value::Ns ? "}>" : "}";
    return;
  }
  }
}

} // namespace

std::string pyStr(const Value &v, size_t limit, int line) {
  if (v.kind == Value::Str)
    return v.s;
  std::string out;
  appendPy(out, v, false, limit, line);
  return out;
}

std::string pyRepr(const Value &v, size_t limit, int line) {
  std::string out;
  appendPy(out, v, true, limit, line);
  return out;
}

// json.dumps(x, ensure_ascii=False, indent=indent).
void toJson(const Value &v, int indent, int depth, std::string &out, int line,
            size_t limit) {
  auto newline = [&](int d) {
    size_t spaces = static_cast<size_t>(indent) * static_cast<size_t>(d);
    if (spaces >= limit || out.size() + 1 + spaces > limit)
      fail(line, "the JSON text exceeds " + describeBytes(limit));
    out += '\n';
    out.append(spaces, ' ');
  };
  switch (v.kind) {
  case Value::Undefined:
  case Value::None:
    out += "null";
    return;
  case Value::Bool:
    out += v.b ? "true" : "false";
    return;
  case Value::Int:
    out += std::to_string(v.i);
    return;
  case Value::Float:
    out += std::isnan(v.f)   ? "NaN"
           : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity")
                             : floatRepr(v.f);
    return;
  case Value::Str:
    appendJsonString(out, v.s);
    if (out.size() > limit)
      fail(line, "the JSON text exceeds " + describeBytes(limit));
    return;
  case Value::ListK: {
    if (v.list->empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t k = 0; k < v.list->size(); ++k) {
      if (k)
        out += indent >= 0 ? "," : ", ";
      if (indent >= 0)
        newline(depth + 1);
      toJson((*v.list)[k], indent, depth + 1, out, line, limit);
    }
    if (indent >= 0)
      newline(depth);
    out += ']';
    return;
  }
  case Value::DictK:
  case Value::Ns: {
    if (v.dict->empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (const auto &kv : *v.dict) {
      if (!first)
        out += indent >= 0 ? "," : ", ";
      first = false;
      if (indent >= 0)
        newline(depth + 1);
      toJson(Value::str(kv.first), indent, depth + 1, out, line, limit);
      out += ": ";
      toJson(kv.second, indent, depth + 1, out, line, limit);
    }
    if (indent >= 0)
      newline(depth);
    out += '}';
    return;
  }
  }
}

Value fromJson(const nlohmann::json &j, int depth) {
  if (depth > kMaxDepth)
    fail(-1, "the context nests more than " + std::to_string(kMaxDepth) +
                 " levels deep");
  switch (j.type()) {
  case nlohmann::json::value_t::null:
    return Value::none();
  case nlohmann::json::value_t::boolean:
    return Value::boolean(j.get<bool>());
  case nlohmann::json::value_t::number_integer:
    return Value::integer(j.get<int64_t>());
  case nlohmann::json::value_t::number_unsigned:
    if (j.get<uint64_t>() > uint64_t(INT64_MAX))
      fail(-1, "the context holds the integer " +
                   std::to_string(j.get<uint64_t>()) +
                   ", beyond 64 bits (integers here are 64-bit)");
    return Value::integer(static_cast<int64_t>(j.get<uint64_t>()));
  case nlohmann::json::value_t::number_float:
    return Value::real(j.get<double>());
  case nlohmann::json::value_t::string:
    return Value::str(j.get<std::string>());
  case nlohmann::json::value_t::array: {
    List l;
    for (const auto &e : j)
      l.push_back(fromJson(e, depth + 1));
    return Value::makeList(std::move(l));
  }
  case nlohmann::json::value_t::object: {
    Dict d;
    for (auto it = j.begin(); it != j.end(); ++it)
      d.emplace_back(it.key(), fromJson(it.value(), depth + 1));
    return Value::makeDict(std::move(d));
  }
  default:
    return Value::none();
  }
}

namespace {

// Python's ordering of an int and a float, exact (-1: i < f; 2: f is NaN).
int compareIntFloat(int64_t i, double f) {
  if (std::isnan(f))
    return 2;
  if (f >= 9223372036854775808.0)
    return -1;
  if (f < -9223372036854775808.0)
    return 1;
  double t = std::trunc(f);
  int64_t ti = static_cast<int64_t>(t);
  if (i != ti)
    return i < ti ? -1 : 1;
  return f > t ? -1 : f < t ? 1 : 0;
}

} // namespace

int compareNumbers(const Value &a, const Value &b) {
  auto asInt = [](const Value &v) -> int64_t {
    return v.kind == Value::Int ? v.i : v.b;
  };
  bool fa = a.kind == Value::Float, fb = b.kind == Value::Float;
  if (!fa && !fb) {
    int64_t x = asInt(a), y = asInt(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (fa && fb)
    return a.f < b.f ? -1 : a.f > b.f ? 1 : a.f == b.f ? 0 : 2;
  if (fb)
    return compareIntFloat(asInt(a), b.f);
  int c = compareIntFloat(asInt(b), a.f);
  return c == 2 ? 2 : -c;
}

bool equal(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber())
    return compareNumbers(a, b) == 0;
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case Value::Undefined:
  case Value::None:
    return true;
  case Value::Str:
    return a.s == b.s;
  case Value::ListK:
    if (a.list == b.list)
      return true;
    if (a.list->size() != b.list->size())
      return false;
    for (size_t k = 0; k < a.list->size(); ++k)
      if (!equal((*a.list)[k], (*b.list)[k]))
        return false;
    return true;
  case Value::DictK: {
    if (a.dict == b.dict)
      return true;
    const Dict &x = *a.dict, &y = *b.dict;
    if (x.size() != y.size())
      return false;
    // Keys in the same order (the usual case) compare in one pass; others
    // by key after sorting, never a search per key.
    bool sameOrder = true;
    for (size_t k = 0; k < x.size() && sameOrder; ++k)
      sameOrder = x[k].first == y[k].first;
    std::vector<const std::pair<std::string, Value> *> px, py;
    if (!sameOrder) {
      for (size_t k = 0; k < x.size(); ++k) {
        px.push_back(&x[k]);
        py.push_back(&y[k]);
      }
      auto byKey = [](const auto *l, const auto *r) {
        return l->first < r->first;
      };
      std::sort(px.begin(), px.end(), byKey);
      std::sort(py.begin(), py.end(), byKey);
    }
    for (size_t k = 0; k < x.size(); ++k) {
      const auto &l = sameOrder ? x[k] : *px[k];
      const auto &r = sameOrder ? y[k] : *py[k];
      if (l.first != r.first || !equal(l.second, r.second))
        return false;
    }
    return true;
  }
  case Value::Ns:
    return a.dict == b.dict;
  default:
    return false;
  }
}

// UTF-8 helpers for Python's len / iteration / strip over code points.
uint32_t utf8At(const std::string &s, size_t pos, size_t end) {
  unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80)
    return c;
  uint32_t cp = c < 0xE0 ? c & 0x1F : c < 0xF0 ? c & 0x0F : c & 0x07;
  for (size_t k = pos + 1; k < end; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3F);
  return cp;
}

size_t cpCount(const std::string &s) {
  size_t n = 0;
  for (size_t p = 0; p < s.size(); p = utf8Next(s, p))
    ++n;
  return n;
}

size_t cpOffset(const std::string &s, size_t index) {
  size_t p = 0;
  for (size_t k = 0; k < index && p < s.size(); ++k)
    p = utf8Next(s, p);
  return p;
}

std::string cpReverse(const std::string &s) {
  // Each code point [p, q) lands at [n - q, n - p), its bytes in order.
  size_t n = s.size();
  std::string r(n, '\0');
  for (size_t p = 0; p < n;) {
    size_t q = utf8Next(s, p);
    if (q == p + 1)
      r[n - q] = s[p];
    else
      std::memcpy(&r[n - q], s.data() + p, q - p);
    p = q;
  }
  return r;
}

// Python's str.isspace.
bool pySpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// str.strip / lstrip / rstrip, with \p chars (code points) or whitespace.
std::string pyStrip(const std::string &s, bool left, bool right,
                    const Value *chars) {
  bool given = chars && chars->kind == Value::Str;
  std::vector<std::string_view> set;
  if (given) {
    const std::string &c = chars->s;
    for (size_t p = 0; p < c.size();) {
      size_t q = utf8Next(c, p);
      set.emplace_back(c.data() + p, q - p);
      p = q;
    }
    std::sort(set.begin(), set.end());
  }
  auto strip = [&](size_t p, size_t q) {
    if (given)
      return std::binary_search(set.begin(), set.end(),
                                std::string_view(s.data() + p, q - p));
    unsigned char c = static_cast<unsigned char>(s[p]);
    if (c < 0x80)
      return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
    return pySpace(utf8At(s, p, q));
  };
  size_t b = 0, e = s.size();
  if (left)
    for (size_t q; b < s.size() && strip(b, q = utf8Next(s, b));)
      b = q;
  if (right) {
    // The end of the last code point kept, found walking forward (code
    // points are delimited from the start).
    e = b;
    for (size_t p = b, q; p < s.size(); p = q) {
      q = utf8Next(s, p);
      if (!strip(p, q))
        e = q;
    }
  }
  return s.substr(b, e - b);
}

std::string asciiMap(std::string s, int mode) {
  // mode 0: upper, 1: lower, 2: capitalize, 3: title
  bool startWord = true;
  for (size_t k = 0; k < s.size(); ++k) {
    char &c = s[k];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    bool up = mode == 0 || (mode == 2 && k == 0) || (mode == 3 && startWord);
    if (mode == 1 || (mode == 2 && k > 0) || (mode == 3 && !startWord)) {
      if (c >= 'A' && c <= 'Z')
        c = static_cast<char>(c - 'A' + 'a');
    } else if (up && c >= 'a' && c <= 'z') {
      c = static_cast<char>(c - 'a' + 'A');
    }
    startWord = !alpha;
  }
  return s;
}

TextFinder::TextFinder(std::string n) : needle(std::move(n)) {
  size_t m = needle.size();
  border.assign(m, 0);
  for (size_t k = 1, b = 0; k < m; ++k) {
    while (b > 0 && needle[k] != needle[b])
      b = border[b - 1];
    if (needle[k] == needle[b])
      ++b;
    border[k] = b;
  }
}

size_t TextFinder::find(const std::string &hay, size_t from) const {
  size_t n = hay.size(), m = needle.size();
  if (m == 0)
    return from <= n ? from : std::string::npos;
  if (m == 1)
    return hay.find(needle[0], from);
  if (from >= n || n - from < m)
    return std::string::npos;
  for (size_t k = from, q = 0; k < n; ++k) {
    while (q > 0 && hay[k] != needle[q])
      q = border[q - 1];
    if (hay[k] == needle[q])
      ++q;
    if (q == m)
      return k + 1 - m;
  }
  return std::string::npos;
}

std::string describeBytes(uint64_t n) {
  if (n % (uint64_t(1) << 20) == 0)
    return std::to_string(n >> 20) + " MiB";
  return std::to_string(n) + " bytes";
}

std::string withCommas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -(n + 1) + uint64_t(1) : n);
  std::string out;
  for (size_t k = 0; k < digits.size(); ++k) {
    if (k && (digits.size() - k) % 3 == 0)
      out += ',';
    out += digits[k];
  }
  return n < 0 ? "-" + out : out;
}

} // namespace mtc::tok::jinja
