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

// Python's repr of a float: the shortest round-tripping digits, ".0" when
// integral.
std::string floatRepr(double x) {
  if (std::isnan(x))
    return "nan";
  if (std::isinf(x))
    return x > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, x);
    if (std::strtod(buf, nullptr) == x)
      break;
  }
  std::string s = buf;
  // Python switches to exponent form at 1e16 and below 1e-4.
  if (s.find_first_of(".en") == std::string::npos)
    s += ".0";
  size_t e = s.find('e');
  if (e != std::string::npos) {
    // %g gives e+16 / e-05; Python gives e+16 / e-05 as well.
    std::string mant = s.substr(0, e), ex = s.substr(e + 1);
    char sign = ex[0];
    ex = ex.substr(1);
    while (ex.size() > 2 && ex[0] == '0')
      ex.erase(0, 1);
    s = mant + "e" + sign + ex;
  }
  return s;
}

std::string pyStr(const Value &v, size_t limit, int line) {
  auto grown = [&](const std::string &s) {
    if (s.size() > limit)
      fail(line, "a string exceeds " + describeBytes(limit));
  };
  switch (v.kind) {
  case Value::Undefined:
    return "";
  case Value::None:
    return "None";
  case Value::Bool:
    return v.b ? "True" : "False";
  case Value::Int:
    return std::to_string(v.i);
  case Value::Float:
    return floatRepr(v.f);
  case Value::Str:
    return v.s;
  case Value::ListK: {
    std::string s = "[";
    for (size_t k = 0; k < v.list->size(); ++k) {
      s += (k ? ", " : "") + pyRepr((*v.list)[k], limit, line);
      grown(s);
    }
    return s + "]";
  }
  case Value::DictK:
  case Value::Ns: {
    std::string s = v.kind == Value::Ns ? "<Namespace {" : "{";
    bool first = true;
    for (const auto &kv : *v.dict) {
      s += (first ? "" : ", ") + pyRepr(Value::str(kv.first)) + ": " +
           pyRepr(kv.second, limit, line);
      grown(s);
      first = false;
    }
    return s + (v.kind == Value::Ns ? "}>" : "}");
  }
  }
  return "";
}

std::string pyRepr(const Value &v, size_t limit, int line) {
  if (v.kind != Value::Str)
    return pyStr(v, limit, line);
  bool hasSingle = v.s.find('\'') != std::string::npos;
  bool hasDouble = v.s.find('"') != std::string::npos;
  char q = hasSingle && !hasDouble ? '"' : '\'';
  std::string s(1, q);
  for (unsigned char c : v.s) {
    if (c == '\\')
      s += "\\\\";
    else if (c == '\n')
      s += "\\n";
    else if (c == '\r')
      s += "\\r";
    else if (c == '\t')
      s += "\\t";
    else if (c == static_cast<unsigned char>(q))
      s += std::string("\\") + q;
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      s += buf;
    } else
      s += static_cast<char>(c);
  }
  return s + q;
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

bool equal(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.kind == Value::Float || b.kind == Value::Float)
      return a.number() == b.number();
    return (a.kind == Value::Int ? a.i : a.b) ==
           (b.kind == Value::Int ? b.i : b.b);
  }
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case Value::Undefined:
  case Value::None:
    return true;
  case Value::Str:
    return a.s == b.s;
  case Value::ListK:
    if (a.list->size() != b.list->size())
      return false;
    for (size_t k = 0; k < a.list->size(); ++k)
      if (!equal((*a.list)[k], (*b.list)[k]))
        return false;
    return true;
  case Value::DictK:
    if (a.dict->size() != b.dict->size())
      return false;
    for (const auto &kv : *a.dict) {
      const Value *o = b.find(kv.first);
      if (!o || !equal(kv.second, *o))
        return false;
    }
    return true;
  case Value::Ns:
    return a.dict == b.dict;
  default:
    return false;
  }
}

// UTF-8 helpers for Python's len / iteration / strip over code points.
size_t utf8Next(const std::string &s, size_t pos) {
  unsigned char c = static_cast<unsigned char>(s[pos]);
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  return std::min(s.size(), pos + n);
}

uint32_t utf8At(const std::string &s, size_t pos, size_t end) {
  unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80)
    return c;
  uint32_t cp = c < 0xE0 ? c & 0x1F : c < 0xF0 ? c & 0x0F : c & 0x07;
  for (size_t k = pos + 1; k < end; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3F);
  return cp;
}

std::vector<std::string> codePoints(const std::string &s) {
  std::vector<std::string> out;
  for (size_t p = 0; p < s.size();) {
    size_t q = utf8Next(s, p);
    out.push_back(s.substr(p, q - p));
    p = q;
  }
  return out;
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
  std::vector<std::string> cps = codePoints(s);
  std::vector<std::string> set;
  if (chars && chars->kind == Value::Str) {
    set = codePoints(chars->s);
    std::sort(set.begin(), set.end());
  }
  auto strip = [&](const std::string &cp) {
    if (chars && chars->kind == Value::Str)
      return std::binary_search(set.begin(), set.end(), cp);
    return pySpace(utf8At(cp, 0, cp.size()));
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip(cps[b]))
      ++b;
  if (right)
    while (e > b && strip(cps[e - 1]))
      --e;
  std::string out;
  for (size_t k = b; k < e; ++k)
    out += cps[k];
  return out;
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

size_t findText(const std::string &hay, const std::string &needle,
                size_t from) {
  size_t n = hay.size(), m = needle.size();
  if (m == 0)
    return from <= n ? from : std::string::npos;
  if (from >= n || n - from < m)
    return std::string::npos;
  // Knuth-Morris-Pratt: fail[k] is the length of the longest proper border
  // of needle[0, k].
  std::vector<size_t> border(m, 0);
  for (size_t k = 1, b = 0; k < m; ++k) {
    while (b > 0 && needle[k] != needle[b])
      b = border[b - 1];
    if (needle[k] == needle[b])
      ++b;
    border[k] = b;
  }
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
