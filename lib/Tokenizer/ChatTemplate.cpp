//===- ChatTemplate.cpp - Jinja chat templates ----------------------------===//
//
// Part of mtc. A lexer that splits the template into text and tags (applying
// Jinja2's whitespace rules: `-` markers, trim_blocks, lstrip_blocks, the
// dropped trailing newline), a recursive-descent parser with Jinja2's
// operator precedence, and a tree-walking renderer over Python-like values.
// Errors are thrown inside as TemplateError and returned as Status.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplate.h"

#include "lib/Support/JsonString.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace mtc::tok {

namespace {

struct TemplateError {
  std::string message;
  int line = 0;
};

[[noreturn]] void fail(int line, const std::string &message) {
  throw TemplateError{message, line};
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;

struct Value {
  enum Kind { Undefined, None, Bool, Int, Float, Str, ListK, DictK, Ns };
  Kind kind = Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict; // DictK and Ns

  static Value none() {
    Value v;
    v.kind = None;
    return v;
  }
  static Value boolean(bool x) {
    Value v;
    v.kind = Bool;
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v;
    v.kind = Int;
    v.i = x;
    return v;
  }
  static Value real(double x) {
    Value v;
    v.kind = Float;
    v.f = x;
    return v;
  }
  static Value str(std::string x) {
    Value v;
    v.kind = Str;
    v.s = std::move(x);
    return v;
  }
  static Value makeList(List l = {}) {
    Value v;
    v.kind = ListK;
    v.list = std::make_shared<List>(std::move(l));
    return v;
  }
  static Value makeDict(Dict d = {}, Kind k = DictK) {
    Value v;
    v.kind = k;
    v.dict = std::make_shared<Dict>(std::move(d));
    return v;
  }
  bool isNumber() const { return kind == Int || kind == Float || kind == Bool; }
  double number() const {
    return kind == Float ? f : kind == Int ? static_cast<double>(i) : b;
  }
  const Value *find(const std::string &key) const {
    if (!dict)
      return nullptr;
    for (const auto &kv : *dict)
      if (kv.first == key)
        return &kv.second;
    return nullptr;
  }
  void setKey(const std::string &key, Value v) {
    for (auto &kv : *dict)
      if (kv.first == key) {
        kv.second = std::move(v);
        return;
      }
    dict->emplace_back(key, std::move(v));
  }
};

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

std::string pyRepr(const Value &v);

std::string pyStr(const Value &v) {
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
    for (size_t k = 0; k < v.list->size(); ++k)
      s += (k ? ", " : "") + pyRepr((*v.list)[k]);
    return s + "]";
  }
  case Value::DictK:
  case Value::Ns: {
    std::string s = v.kind == Value::Ns ? "<Namespace {" : "{";
    bool first = true;
    for (const auto &kv : *v.dict) {
      s += (first ? "" : ", ") + pyRepr(Value::str(kv.first)) + ": " +
           pyRepr(kv.second);
      first = false;
    }
    return s + (v.kind == Value::Ns ? "}>" : "}");
  }
  }
  return "";
}

std::string pyRepr(const Value &v) {
  if (v.kind != Value::Str)
    return pyStr(v);
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
void toJson(const Value &v, int indent, int depth, std::string &out, int line) {
  auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
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
      toJson((*v.list)[k], indent, depth + 1, out, line);
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
      toJson(Value::str(kv.first), indent, depth + 1, out, line);
      out += ": ";
      toJson(kv.second, indent, depth + 1, out, line);
    }
    if (indent >= 0)
      newline(depth);
    out += '}';
    return;
  }
  }
}

Value fromJson(const nlohmann::json &j) {
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
      l.push_back(fromJson(e));
    return Value::makeList(std::move(l));
  }
  case nlohmann::json::value_t::object: {
    Dict d;
    for (auto it = j.begin(); it != j.end(); ++it)
      d.emplace_back(it.key(), fromJson(it.value()));
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
  if (chars && chars->kind == Value::Str)
    set = codePoints(chars->s);
  auto strip = [&](const std::string &cp) {
    if (chars && chars->kind == Value::Str) {
      for (const std::string &c : set)
        if (c == cp)
          return true;
      return false;
    }
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

//===----------------------------------------------------------------------===//
// Lexer: the template into text and tags
//===----------------------------------------------------------------------===//

enum class PieceKind { Text, Expr, Stmt };
struct Piece {
  PieceKind kind;
  std::string text; // the text, or the tag's inside
  int line;
};

std::vector<Piece> splitTemplate(const std::string &raw) {
  // Jinja2 reads \r\n and \r as \n, and drops one trailing newline
  // (keep_trailing_newline = False).
  std::string src;
  for (size_t k = 0; k < raw.size(); ++k) {
    if (raw[k] == '\r') {
      src += '\n';
      if (k + 1 < raw.size() && raw[k + 1] == '\n')
        ++k;
    } else {
      src += raw[k];
    }
  }
  if (!src.empty() && src.back() == '\n')
    src.pop_back();
  std::vector<Piece> out;
  size_t pos = 0;
  int line = 1;
  bool stripNext = false, trimNewline = false;
  auto countLines = [](const std::string &s, size_t b, size_t e) {
    int n = 0;
    for (size_t k = b; k < e; ++k)
      n += s[k] == '\n';
    return n;
  };
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() &&
           src[open + 1] != '{' && src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open != std::string::npos && open + 1 >= src.size())
      open = std::string::npos;
    size_t textEnd = open == std::string::npos ? src.size() : open;
    std::string text = src.substr(pos, textEnd - pos);
    int textLine = line;
    line += countLines(src, pos, textEnd);
    if (trimNewline && !text.empty() && text[0] == '\n')
      text.erase(0, 1);
    if (stripNext) {
      size_t k = 0;
      while (k < text.size() &&
             std::isspace(static_cast<unsigned char>(text[k])))
        ++k;
      text.erase(0, k);
    }
    stripNext = trimNewline = false;
    if (open == std::string::npos) {
      if (!text.empty())
        out.push_back({PieceKind::Text, text, textLine});
      break;
    }
    char kind = src[open + 1];
    char closeChar = kind == '{' ? '}' : kind;
    size_t inner = open + 2;
    bool stripBefore = false, keepBefore = false;
    if (inner < src.size() && src[inner] == '-') {
      stripBefore = true;
      ++inner;
    } else if (inner < src.size() && src[inner] == '+' && kind != '{') {
      keepBefore = true;
      ++inner;
    }
    std::string closer = std::string(1, closeChar) + "}";
    size_t close = src.find(closer, inner);
    // A string literal may hold the closer; skip quoted parts in tags.
    if (kind != '#') {
      size_t k = inner;
      char quote = 0;
      close = std::string::npos;
      for (; k + 1 < src.size(); ++k) {
        char c = src[k];
        if (quote) {
          if (c == '\\')
            ++k;
          else if (c == quote)
            quote = 0;
        } else if (c == '\'' || c == '"') {
          quote = c;
        } else if (c == closeChar && src[k + 1] == '}') {
          close = k;
          break;
        }
      }
    }
    if (close == std::string::npos)
      fail(line, std::string("unclosed '{") + kind + "' tag");
    size_t innerEnd = close;
    bool stripAfter = false, keepAfter = false;
    if (innerEnd > inner && src[innerEnd - 1] == '-') {
      stripAfter = true;
      --innerEnd;
    } else if (innerEnd > inner && src[innerEnd - 1] == '+' && kind != '{') {
      keepAfter = true;
      --innerEnd;
    }
    if (stripBefore) {
      size_t e = text.size();
      while (e > 0 && std::isspace(static_cast<unsigned char>(text[e - 1])))
        --e;
      text.resize(e);
    } else if (kind != '{' && !keepBefore) {
      // lstrip_blocks: spaces and tabs from the start of the line (in the
      // source) up to the tag.
      size_t k = open;
      while (k > 0 && (src[k - 1] == ' ' || src[k - 1] == '\t' ||
                       src[k - 1] == '\f' || src[k - 1] == '\v'))
        --k;
      if (k == 0 || src[k - 1] == '\n') {
        size_t e = text.size();
        while (e > 0 && text.size() - e < open - k &&
               (text[e - 1] == ' ' || text[e - 1] == '\t' ||
                text[e - 1] == '\f' || text[e - 1] == '\v'))
          --e;
        text.resize(e);
      }
    }
    if (!text.empty())
      out.push_back({PieceKind::Text, text, textLine});
    int tagLine = line;
    line += countLines(src, open, close + 2);
    if (kind != '#')
      out.push_back({kind == '{' ? PieceKind::Expr : PieceKind::Stmt,
                     src.substr(inner, innerEnd - inner), tagLine});
    stripNext = stripAfter;
    trimNewline = kind != '{' && !stripAfter && !keepAfter;
    pos = close + 2;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Expression tokens and AST
//===----------------------------------------------------------------------===//

enum class Tok { Name, String, Int, Float, Op, End };
struct Token {
  Tok kind;
  std::string text;
};

std::vector<Token> lexExpr(const std::string &s, int line) {
  std::vector<Token> toks;
  size_t k = 0;
  while (k < s.size()) {
    char c = s[k];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++k;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = k;
      while (k < s.size() &&
             (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_'))
        ++k;
      toks.push_back({Tok::Name, s.substr(b, k - b)});
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t b = k;
      bool isFloat = false;
      while (k < s.size() &&
             (std::isdigit(static_cast<unsigned char>(s[k])) || s[k] == '_'))
        ++k;
      if (k + 1 < s.size() && s[k] == '.' &&
          std::isdigit(static_cast<unsigned char>(s[k + 1]))) {
        isFloat = true;
        ++k;
        while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])))
          ++k;
      }
      if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
        size_t e = k + 1;
        if (e < s.size() && (s[e] == '+' || s[e] == '-'))
          ++e;
        if (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) {
          isFloat = true;
          k = e;
          while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])))
            ++k;
        }
      }
      std::string num;
      for (size_t q = b; q < k; ++q)
        if (s[q] != '_')
          num += s[q];
      toks.push_back({isFloat ? Tok::Float : Tok::Int, num});
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string v;
      ++k;
      bool closed = false;
      while (k < s.size()) {
        char d = s[k++];
        if (d == c) {
          closed = true;
          break;
        }
        if (d == '\\' && k < s.size()) {
          char e = s[k++];
          switch (e) {
          case 'n':
            v += '\n';
            break;
          case 't':
            v += '\t';
            break;
          case 'r':
            v += '\r';
            break;
          case '\\':
            v += '\\';
            break;
          case '\'':
            v += '\'';
            break;
          case '"':
            v += '"';
            break;
          case '\n':
            break;
          default:
            v += '\\';
            v += e;
          }
          continue;
        }
        v += d;
      }
      if (!closed)
        fail(line, "unterminated string literal");
      toks.push_back({Tok::String, v});
      continue;
    }
    static const char *ops[] = {
        "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
        ">",  "(",  ")",  "[",  "]",  "{",  "}", ",", ".", ":", "|", "="};
    bool matched = false;
    for (const char *op : ops) {
      size_t n = std::strlen(op);
      if (s.compare(k, n, op) == 0) {
        toks.push_back({Tok::Op, op});
        k += n;
        matched = true;
        break;
      }
    }
    if (!matched)
      fail(line, std::string("unexpected character '") + c + "'");
  }
  toks.push_back({Tok::End, ""});
  return toks;
}

struct Expr;
using ExprP = std::shared_ptr<Expr>;
struct Expr {
  enum Kind {
    Lit,
    Name,
    Attr,    // args[0].name
    Item,    // args[0][args[1]]
    Slice,   // args[0][args[1]:args[2]:args[3]] (null = omitted)
    Call,    // args[0](args[1..], kwargs)
    Filter,  // args[0] | name(args[1..], kwargs)
    Test,    // args[0] is [not] name(args[1..]); op "not" when negated
    Unary,   // op args[0]
    Binary,  // args[0] op args[1]
    Compare, // args[0] ops[0] args[1] ops[1] args[2] ...
    Cond,    // args[0] if args[1] else args[2] (args[2] may be null)
    ListLit,
    DictLit // args: k0, v0, k1, v1, ...
  } kind;
  Value lit;
  std::string name, op;
  std::vector<std::string> ops;
  std::vector<ExprP> args;
  std::vector<std::pair<std::string, ExprP>> kwargs;
  int line = 0;
};

class ExprParser {
public:
  ExprParser(std::vector<Token> toks, int line)
      : toks(std::move(toks)), line(line) {}

  ExprP parseExpression(bool allowCond = true) {
    ExprP e = parseOr();
    if (allowCond && isName("if")) {
      ++pos;
      ExprP cond = parseOr();
      ExprP other;
      if (isName("else")) {
        ++pos;
        other = parseExpression();
      }
      e = make(Expr::Cond, {e, cond, other});
    }
    return e;
  }

  const Token &peek() const { return toks[pos]; }
  bool isName(const char *n) const {
    return toks[pos].kind == Tok::Name && toks[pos].text == n;
  }
  bool isOp(const char *o) const {
    return toks[pos].kind == Tok::Op && toks[pos].text == o;
  }
  bool atEnd() const { return toks[pos].kind == Tok::End; }
  void expectOp(const char *o) {
    if (!isOp(o))
      fail(line, std::string("expected '") + o + "', found " + describe());
    ++pos;
  }
  std::string expectName() {
    if (peek().kind != Tok::Name)
      fail(line, "expected a name, found " + describe());
    return toks[pos++].text;
  }
  std::string describe() const {
    if (atEnd())
      return "the end of the tag";
    return "'" + peek().text + "'";
  }
  void expectEnd() {
    if (!atEnd())
      fail(line, "unexpected " + describe());
  }
  size_t pos = 0;

private:
  ExprP make(Expr::Kind k, std::vector<ExprP> args = {}) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->args = std::move(args);
    e->line = line;
    return e;
  }

  ExprP parseOr() {
    ExprP l = parseAnd();
    while (isName("or")) {
      ++pos;
      ExprP e = make(Expr::Binary, {l, parseAnd()});
      e->op = "or";
      l = e;
    }
    return l;
  }
  ExprP parseAnd() {
    ExprP l = parseNot();
    while (isName("and")) {
      ++pos;
      ExprP e = make(Expr::Binary, {l, parseNot()});
      e->op = "and";
      l = e;
    }
    return l;
  }
  ExprP parseNot() {
    if (isName("not")) {
      ++pos;
      ExprP e = make(Expr::Unary, {parseNot()});
      e->op = "not";
      return e;
    }
    return parseCompare();
  }
  ExprP parseCompare() {
    ExprP first = parseConcat();
    ExprP cmp;
    while (true) {
      std::string op;
      if (peek().kind == Tok::Op && (isOp("==") || isOp("!=") || isOp("<") ||
                                     isOp(">") || isOp("<=") || isOp(">="))) {
        op = toks[pos++].text;
      } else if (isName("in")) {
        ++pos;
        op = "in";
      } else if (isName("not") && toks[pos + 1].kind == Tok::Name &&
                 toks[pos + 1].text == "in") {
        pos += 2;
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Compare, {first});
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parseConcat());
    }
    return cmp ? cmp : first;
  }
  ExprP parseConcat() {
    ExprP l = parseMath1();
    while (isOp("~")) {
      ++pos;
      ExprP e = make(Expr::Binary, {l, parseMath1()});
      e->op = "~";
      l = e;
    }
    return l;
  }
  ExprP parseMath1() {
    ExprP l = parseMath2();
    while (isOp("+") || isOp("-")) {
      std::string op = toks[pos++].text;
      ExprP e = make(Expr::Binary, {l, parseMath2()});
      e->op = op;
      l = e;
    }
    return l;
  }
  ExprP parseMath2() {
    ExprP l = parsePow();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      std::string op = toks[pos++].text;
      ExprP e = make(Expr::Binary, {l, parsePow()});
      e->op = op;
      l = e;
    }
    return l;
  }
  ExprP parsePow() {
    ExprP l = parseUnary(true);
    while (isOp("**")) {
      ++pos;
      ExprP e = make(Expr::Binary, {l, parseUnary(true)});
      e->op = "**";
      l = e;
    }
    return l;
  }
  ExprP parseUnary(bool withFilter) {
    ExprP node;
    if (isOp("-") || isOp("+")) {
      std::string op = toks[pos++].text;
      node = make(Expr::Unary, {parseUnary(false)});
      node->op = op;
    } else {
      node = parsePostfix(parsePrimary());
    }
    if (withFilter)
      node = parseFilterExpr(node);
    return node;
  }
  void parseArgs(ExprP call) {
    // After '('.
    while (!isOp(")")) {
      if (peek().kind == Tok::Name && toks[pos + 1].kind == Tok::Op &&
          toks[pos + 1].text == "=") {
        std::string key = toks[pos].text;
        pos += 2;
        call->kwargs.emplace_back(key, parseExpression());
      } else {
        if (!call->kwargs.empty())
          fail(line, "positional argument after a keyword argument");
        call->args.push_back(parseExpression());
      }
      if (!isOp(","))
        break;
      ++pos;
    }
    expectOp(")");
  }
  ExprP parsePrimary() {
    const Token &t = peek();
    if (t.kind == Tok::String) {
      std::string s = t.text;
      ++pos;
      // Adjacent literals concatenate.
      while (peek().kind == Tok::String)
        s += toks[pos++].text;
      ExprP e = make(Expr::Lit);
      e->lit = Value::str(s);
      return e;
    }
    if (t.kind == Tok::Int) {
      ++pos;
      ExprP e = make(Expr::Lit);
      try {
        e->lit = Value::integer(std::stoll(t.text));
      } catch (...) {
        fail(line, "integer literal " + t.text + " is out of range");
      }
      return e;
    }
    if (t.kind == Tok::Float) {
      ++pos;
      ExprP e = make(Expr::Lit);
      e->lit = Value::real(std::strtod(t.text.c_str(), nullptr));
      return e;
    }
    if (t.kind == Tok::Name) {
      ++pos;
      ExprP e = make(Expr::Lit);
      if (t.text == "true" || t.text == "True")
        e->lit = Value::boolean(true);
      else if (t.text == "false" || t.text == "False")
        e->lit = Value::boolean(false);
      else if (t.text == "none" || t.text == "None")
        e->lit = Value::none();
      else {
        e->kind = Expr::Name;
        e->name = t.text;
      }
      return e;
    }
    if (isOp("(")) {
      ++pos;
      ExprP e = parseExpression();
      if (isOp(",")) {
        // A tuple: a list here.
        ExprP l = make(Expr::ListLit, {e});
        while (isOp(",")) {
          ++pos;
          if (isOp(")"))
            break;
          l->args.push_back(parseExpression());
        }
        e = l;
      }
      expectOp(")");
      return e;
    }
    if (isOp("[")) {
      ++pos;
      ExprP l = make(Expr::ListLit);
      while (!isOp("]")) {
        l->args.push_back(parseExpression());
        if (!isOp(","))
          break;
        ++pos;
      }
      expectOp("]");
      return l;
    }
    if (isOp("{")) {
      ++pos;
      ExprP d = make(Expr::DictLit);
      while (!isOp("}")) {
        d->args.push_back(parseExpression());
        expectOp(":");
        d->args.push_back(parseExpression());
        if (!isOp(","))
          break;
        ++pos;
      }
      expectOp("}");
      return d;
    }
    fail(line, "unexpected " + describe() + " in an expression");
  }
  ExprP parsePostfix(ExprP node) {
    while (true) {
      if (isOp(".")) {
        ++pos;
        ExprP e = make(Expr::Attr, {node});
        if (peek().kind == Tok::Int) {
          e->kind = Expr::Item;
          ExprP idx = make(Expr::Lit);
          idx->lit = Value::integer(std::stoll(toks[pos++].text));
          e->args.push_back(idx);
        } else {
          e->name = expectName();
        }
        node = e;
      } else if (isOp("[")) {
        ++pos;
        ExprP parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!isOp(":") && !isOp("]"))
            parts[k] = parseExpression();
          if (k < 2 && isOp(":")) {
            slice = true;
            ++pos;
          } else {
            break;
          }
        }
        expectOp("]");
        if (slice)
          node = make(Expr::Slice, {node, parts[0], parts[1], parts[2]});
        else
          node = make(Expr::Item, {node, parts[0]});
      } else if (isOp("(")) {
        ++pos;
        ExprP call = make(Expr::Call, {node});
        parseArgs(call);
        node = call;
      } else {
        return node;
      }
    }
  }
  ExprP parseFilterExpr(ExprP node) {
    while (true) {
      if (isOp("|")) {
        ++pos;
        ExprP f = make(Expr::Filter, {node});
        f->name = expectName();
        if (isOp("(")) {
          ++pos;
          parseArgs(f);
        }
        node = f;
      } else if (isName("is")) {
        ++pos;
        ExprP t = make(Expr::Test, {node});
        if (isName("not")) {
          ++pos;
          t->op = "not";
        }
        t->name = expectName();
        if (isOp("(")) {
          ++pos;
          parseArgs(t);
        } else if (peek().kind == Tok::String || peek().kind == Tok::Int ||
                   peek().kind == Tok::Float) {
          t->args.push_back(parsePrimary());
        }
        node = t;
      } else if (isOp("(")) {
        ++pos;
        ExprP call = make(Expr::Call, {node});
        parseArgs(call);
        node = call;
      } else {
        return node;
      }
    }
  }

  std::vector<Token> toks;
  int line;
};

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

struct Node;
using Body = std::vector<Node>;
struct Node {
  enum Kind { Text, Output, If, For, Set, Break, Continue } kind = Text;
  std::string text;
  ExprP expr; // Output, Set value, For iterable
  std::vector<std::pair<ExprP, Body>> branches; // If (null cond: else)
  std::vector<std::string> vars; // For targets; Set: name[, attr]
  ExprP filter;                  // For ... if cond
  Body body, elseBody;           // For
  int line = 0;
};

Node makeNode(Node::Kind k) {
  Node n;
  n.kind = k;
  return n;
}

class TemplateParser {
public:
  explicit TemplateParser(std::vector<Piece> pieces)
      : pieces(std::move(pieces)) {}

  Body parseAll() {
    Body b = parseBody({});
    if (idx < pieces.size()) {
      const Piece &p = pieces[idx];
      fail(p.line, "unexpected '{% " + firstWord(p.text) + " %}'");
    }
    return b;
  }

private:
  static std::string firstWord(const std::string &s) {
    size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos)
      return "";
    size_t e = b;
    while (e < s.size() &&
           (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_'))
      ++e;
    return s.substr(b, e - b);
  }

  // Parses nodes until a statement whose first word is in \p stops (left
  // unconsumed) or the end.
  Body parseBody(const std::vector<std::string> &stops) {
    Body body;
    while (idx < pieces.size()) {
      const Piece &p = pieces[idx];
      if (p.kind == PieceKind::Text) {
        Node n = makeNode(Node::Text);
        n.text = p.text;
        n.line = p.line;
        body.push_back(std::move(n));
        ++idx;
        continue;
      }
      if (p.kind == PieceKind::Expr) {
        ExprParser ep(lexExpr(p.text, p.line), p.line);
        Node n = makeNode(Node::Output);
        n.expr = ep.parseExpression();
        ep.expectEnd();
        n.line = p.line;
        body.push_back(std::move(n));
        ++idx;
        continue;
      }
      std::string word = firstWord(p.text);
      for (const std::string &s : stops)
        if (word == s)
          return body;
      body.push_back(parseStatement(word));
    }
    return body;
  }

  void expectTag(const std::string &word, int openLine,
                 const std::string &opener) {
    if (idx >= pieces.size())
      fail(openLine,
           "'{% " + opener + " %}' has no '{% " + word + " %}' to close it");
    ++idx;
  }

  Node parseStatement(const std::string &word) {
    const Piece &p = pieces[idx];
    int line = p.line;
    ExprParser ep(lexExpr(p.text, line), line);
    ep.pos = 1; // after the keyword
    if (word == "if") {
      Node n = makeNode(Node::If);
      n.line = line;
      ExprP cond = ep.parseExpression();
      ep.expectEnd();
      ++idx;
      while (true) {
        Body b = parseBody({"elif", "else", "endif"});
        n.branches.emplace_back(cond, std::move(b));
        if (idx >= pieces.size())
          fail(line, "'{% if %}' has no '{% endif %}' to close it");
        std::string w = firstWord(pieces[idx].text);
        int l = pieces[idx].line;
        ExprParser ep2(lexExpr(pieces[idx].text, l), l);
        ep2.pos = 1;
        ++idx;
        if (w == "endif") {
          ep2.expectEnd();
          break;
        }
        if (w == "else") {
          ep2.expectEnd();
          Body eb = parseBody({"endif", "elif", "else"});
          if (idx >= pieces.size() || firstWord(pieces[idx].text) != "endif")
            fail(line, "'{% if %}' has no '{% endif %}' to close it");
          ++idx;
          n.branches.emplace_back(nullptr, std::move(eb));
          break;
        }
        cond = ep2.parseExpression();
        ep2.expectEnd();
      }
      return n;
    }
    if (word == "for") {
      Node n = makeNode(Node::For);
      n.line = line;
      n.vars.push_back(ep.expectName());
      while (ep.isOp(",")) {
        ++ep.pos;
        n.vars.push_back(ep.expectName());
      }
      if (!ep.isName("in"))
        fail(line, "expected 'in' in '{% for %}'");
      ++ep.pos;
      n.expr = ep.parseExpression(false);
      if (ep.isName("if")) {
        ++ep.pos;
        n.filter = ep.parseExpression(false);
      }
      if (ep.isName("recursive"))
        fail(line, "unsupported Jinja construct: recursive loops");
      ep.expectEnd();
      ++idx;
      n.body = parseBody({"endfor", "else"});
      if (idx >= pieces.size())
        fail(line, "'{% for %}' has no '{% endfor %}' to close it");
      if (firstWord(pieces[idx].text) == "else") {
        ++idx;
        n.elseBody = parseBody({"endfor"});
        if (idx >= pieces.size())
          fail(line, "'{% for %}' has no '{% endfor %}' to close it");
      }
      ++idx;
      return n;
    }
    if (word == "set") {
      Node n = makeNode(Node::Set);
      n.line = line;
      n.vars.push_back(ep.expectName());
      if (ep.isOp(".")) {
        ++ep.pos;
        n.vars.push_back(ep.expectName());
      }
      if (ep.isOp(","))
        fail(line, "unsupported Jinja construct: '{% set %}' with several "
                   "targets");
      if (ep.atEnd())
        fail(line, "unsupported Jinja construct: block '{% set %}'");
      ep.expectOp("=");
      n.expr = ep.parseExpression();
      ep.expectEnd();
      ++idx;
      return n;
    }
    if (word == "break" || word == "continue") {
      ep.expectEnd();
      ++idx;
      Node n = makeNode(word == "break" ? Node::Break : Node::Continue);
      n.line = line;
      return n;
    }
    if (word == "generation") {
      ep.expectEnd();
      ++idx;
      Body b = parseBody({"endgeneration"});
      if (idx >= pieces.size())
        fail(line,
             "'{% generation %}' has no '{% endgeneration %}' to close it");
      ++idx;
      Node n = makeNode(Node::If);
      n.line = line;
      ExprP always = std::make_shared<Expr>();
      always->kind = Expr::Lit;
      always->lit = Value::boolean(true);
      n.branches.emplace_back(always, std::move(b));
      return n;
    }
    if (word == "endif" || word == "endfor" || word == "elif" ||
        word == "else" || word == "endgeneration")
      fail(line, "unexpected '{% " + word + " %}'");
    if (word.empty())
      fail(line, "empty '{% %}' tag");
    fail(line, "unsupported Jinja construct: '{% " + word + " %}'");
  }

  std::vector<Piece> pieces;
  size_t idx = 0;
};

//===----------------------------------------------------------------------===//
// Rendering
//===----------------------------------------------------------------------===//

enum class Flow { Normal, Break, Continue };

constexpr size_t kMaxOutput = size_t(64) << 20;
constexpr int64_t kMaxIterations = 10'000'000;

class Renderer {
public:
  explicit Renderer(Value globals) { scopes.push_back(std::move(globals)); }

  std::string out;

  Flow exec(const Body &body) {
    for (const Node &n : body) {
      Flow f = execNode(n);
      if (f != Flow::Normal)
        return f;
    }
    return Flow::Normal;
  }

private:
  std::vector<Value> scopes; // dicts
  int64_t iterations = 0;

  Value lookup(const std::string &name) const {
    for (size_t k = scopes.size(); k-- > 0;)
      if (const Value *v = scopes[k].find(name))
        return *v;
    return Value();
  }
  void assign(const std::string &name, Value v) {
    scopes.back().setKey(name, std::move(v));
  }

  void emit(const std::string &s, int line) {
    out += s;
    if (out.size() > kMaxOutput)
      fail(line, "the rendered text exceeds 64 MiB");
  }

  Flow execNode(const Node &n) {
    switch (n.kind) {
    case Node::Text:
      emit(n.text, n.line);
      return Flow::Normal;
    case Node::Output:
      emit(pyStr(eval(*n.expr)), n.line);
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

  List iterate(const Value &v, int line) {
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

  void bindVars(const std::vector<std::string> &vars, const Value &item,
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

  Flow execFor(const Node &n) {
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
      if (++iterations > kMaxIterations)
        fail(n.line, "more than 10,000,000 loop iterations");
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

  static int64_t toInt(const Value &v, int line, const char *what) {
    if (v.kind == Value::Int)
      return v.i;
    if (v.kind == Value::Bool)
      return v.b;
    fail(line, std::string(what) + " must be an integer, not " + typeName(v));
  }

  Value item(const Value &obj, const Value &key, int line) {
    if (obj.kind == Value::Undefined)
      fail(line, "cannot index an undefined value with " + pyRepr(key));
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
      fail(line, "'None' has no item " + pyRepr(key));
    return Value();
  }

  Value slice(const Value &obj, const Expr &e) {
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
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
      out.push_back(src[static_cast<size_t>(i)]);
    if (isStr) {
      std::string s;
      for (const Value &v : out)
        s += v.s;
      return Value::str(s);
    }
    return Value::makeList(std::move(out));
  }

  Value evalBinary(const Expr &e) {
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
      return Value::str(pyStr(l) + pyStr(r));
    if (op == "+") {
      if (l.kind == Value::Str && r.kind == Value::Str)
        return Value::str(l.s + r.s);
      if (l.kind == Value::ListK && r.kind == Value::ListK) {
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
        if (times > 0 && s->s.size() * static_cast<size_t>(times) > kMaxOutput)
          fail(e.line, "string repetition exceeds 64 MiB");
        for (int64_t k = 0; k < times; ++k)
          out += s->s;
        return Value::str(out);
      }
    }
    if (!l.isNumber() || !r.isNumber())
      fail(e.line, "unsupported operand types for " + op + ": '" + typeName(l) +
                       "' and '" + typeName(r) + "'");
    bool ints = l.kind != Value::Float && r.kind != Value::Float;
    auto asInt = [](const Value &v) {
      return v.kind == Value::Int ? v.i : v.b;
    };
    if (op == "/") {
      if (r.number() == 0)
        fail(e.line, "division by zero");
      return Value::real(l.number() / r.number());
    }
    if (ints) {
      int64_t a = asInt(l), b = asInt(r);
      if (op == "+")
        return Value::integer(a + b);
      if (op == "-")
        return Value::integer(a - b);
      if (op == "*")
        return Value::integer(a * b);
      if (op == "//" || op == "%") {
        if (b == 0)
          fail(e.line, "division by zero");
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
        int64_t p = 1;
        for (int64_t k = 0; k < b && k < 64; ++k)
          p *= a;
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

  bool compare(const std::string &op, const Value &l, const Value &r,
               int line) {
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
        in = r.s.find(l.s) != std::string::npos;
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

  std::vector<Value> evalArgs(const Expr &e, size_t from) {
    std::vector<Value> a;
    for (size_t k = from; k < e.args.size(); ++k)
      a.push_back(eval(*e.args[k]));
    return a;
  }
  Value kwarg(const Expr &e, const std::string &key,
              const std::vector<Value> &pos, size_t idx, Value dflt) {
    for (const auto &[k, v] : e.kwargs)
      if (k == key)
        return eval(*v);
    return idx < pos.size() ? pos[idx] : dflt;
  }

  Value callFunction(const Expr &e) {
    const std::string &fn = e.args[0]->name;
    std::vector<Value> a = evalArgs(e, 1);
    if (fn == "raise_exception")
      throw TemplateError{
          "template raised: " + (a.empty() ? std::string() : pyStr(a[0])), -1};
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
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (static_cast<int64_t>(l.size()) >= kMaxIterations)
          fail(e.line, "range() is too long");
        l.push_back(Value::integer(i));
      }
      return Value::makeList(std::move(l));
    }
    if (fn == "namespace" || fn == "dict") {
      Dict d;
      for (const auto &[k, v] : e.kwargs)
        d.emplace_back(k, eval(*v));
      if (!a.empty())
        fail(e.line, fn + "() takes keyword arguments only here");
      return Value::makeDict(std::move(d),
                             fn == "namespace" ? Value::Ns : Value::DictK);
    }
    Value v = lookup(fn);
    if (v.kind == Value::Undefined)
      fail(e.line, "'" + fn + "' is undefined (not a supported function)");
    fail(e.line, "'" + fn + "' is not callable");
  }

  Value callMethod(const Expr &e) {
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
            }
            if (k < cps.size())
              out += cps[k];
          }
          return Value::str(out);
        }
        size_t p = 0;
        int64_t done = 0;
        while (true) {
          size_t q =
              (count < 0 || done < count) ? s.find(from, p) : std::string::npos;
          if (q == std::string::npos) {
            out += s.substr(p);
            break;
          }
          out += s.substr(p, q - p) + to;
          p = q + from.size();
          ++done;
        }
        return Value::str(out);
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
            if (maxsplit >= 0 &&
                static_cast<int64_t>(parts.size()) >= maxsplit) {
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
                  ? s.find(sep.s, p)
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

  Value applyFilter(const Expr &e) {
    Value v = eval(*e.args[0]);
    std::vector<Value> a = evalArgs(e, 1);
    const std::string &f = e.name;
    if (f == "trim")
      return Value::str(
          pyStrip(pyStr(v), true, true, a.empty() ? nullptr : &a[0]));
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
      int indent = ind.kind == Value::None
                       ? -1
                       : static_cast<int>(toInt(ind, e.line, "indent"));
      std::string out;
      toJson(v, indent, 0, out, e.line);
      return Value::str(out);
    }
    if (f == "upper" || f == "lower" || f == "capitalize" || f == "title")
      return Value::str(asciiMap(pyStr(v), f == "upper"        ? 0
                                           : f == "lower"      ? 1
                                           : f == "capitalize" ? 2
                                                               : 3));
    if (f == "string")
      return Value::str(pyStr(v));
    if (f == "safe")
      return v;
    if (f == "int") {
      if (v.kind == Value::Int)
        return v;
      if (v.kind == Value::Float)
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
      std::string sep = a.empty() ? "" : pyStr(a[0]);
      std::string s;
      List l = iterate(v, e.line);
      for (size_t k = 0; k < l.size(); ++k)
        s += (k ? sep : "") + pyStr(l[k]);
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
        fail(e.line,
             std::string("'items' needs a mapping, not ") + typeName(v));
      List l;
      for (const auto &kv : *v.dict)
        l.push_back(Value::makeList({Value::str(kv.first), kv.second}));
      return Value::makeList(std::move(l));
    }
    if (f == "replace") {
      if (a.size() < 2)
        fail(e.line, "'replace' needs two arguments");
      std::string s = pyStr(v), from = pyStr(a[0]), to = pyStr(a[1]), out;
      if (from.empty())
        return Value::str(s);
      size_t p = 0;
      while (true) {
        size_t q = s.find(from, p);
        if (q == std::string::npos) {
          out += s.substr(p);
          break;
        }
        out += s.substr(p, q - p) + to;
        p = q + from.size();
      }
      return Value::str(out);
    }
    fail(e.line, "unsupported Jinja filter '" + f + "'");
  }

  bool applyTest(const Expr &e) {
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

public:
  Value eval(const Expr &e) {
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
      if (v.kind == Value::Int || v.kind == Value::Bool)
        return Value::integer(e.op == "-" ? -(v.kind == Value::Int ? v.i : v.b)
                                          : (v.kind == Value::Int ? v.i : v.b));
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
      return d;
    }
    }
    return Value();
  }
};

} // namespace

struct ChatTemplate::Impl {
  std::string name, source;
  Body body;
};

Expected<ChatTemplate> ChatTemplate::parse(std::string_view source,
                                           const std::string &name) {
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  impl->source = std::string(source);
  try {
    impl->body = TemplateParser(splitTemplate(impl->source)).parseAll();
  } catch (const TemplateError &e) {
    return Status::error(name + ": line " + std::to_string(e.line) + ": " +
                         e.message);
  }
  ChatTemplate t;
  t.impl = std::move(impl);
  return t;
}

Expected<std::string> ChatTemplate::render(std::string_view contextJson) const {
  nlohmann::json ctx;
  try {
    ctx = nlohmann::json::parse(contextJson);
  } catch (const nlohmann::json::exception &e) {
    return Status::error(impl->name + ": malformed context JSON: " + e.what());
  }
  if (!ctx.is_object())
    return Status::error(impl->name + ": the context must be a JSON object");
  Renderer r(fromJson(ctx));
  try {
    Flow f = r.exec(impl->body);
    (void)f;
  } catch (const TemplateError &e) {
    if (e.line < 0)
      return Status::error(impl->name + ": " + e.message);
    return Status::error(impl->name + ": line " + std::to_string(e.line) +
                         ": " + e.message);
  }
  return std::move(r.out);
}

const std::string &ChatTemplate::name() const { return impl->name; }
const std::string &ChatTemplate::source() const { return impl->source; }

} // namespace mtc::tok
