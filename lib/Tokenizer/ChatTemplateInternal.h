//===- ChatTemplateInternal.h - Jinja engine internals ----------*- C++ -*-===//
//
// Part of mtc. What the parts of the chat-template engine share; included by
// the ChatTemplate*.cpp files only (not a public header). One file per stage:
//
//   ChatTemplateLexer.cpp   the template into text and tags (Jinja2's
//                           whitespace rules), a tag's inside into tokens
//   ChatTemplateExpr.cpp    tokens into an expression tree (precedence
//                           climbing over one table of binary operators)
//   ChatTemplateParser.cpp  tags into a tree of statements (Node)
//   ChatTemplateRender.cpp  the statement tree walked over Python-like values;
//                           ChatTemplateBuiltins.cpp holds its functions,
//                           methods, filters and tests
//   ChatTemplateValue.cpp   the values: Python's str/repr, json.dumps,
//                           equality, code-point helpers
//   ChatTemplate.cpp        the public ChatTemplate (parse, render)
//
// Errors are thrown inside as TemplateError and returned as Status by
// ChatTemplate.cpp. Untrusted templates are bounded: the parsers refuse
// nesting past kMaxDepth (expression trees as they are built), the renderer
// spends RenderLimits::maxWork for all it makes, copies and scans (the cost
// model is described at Renderer), checks lists and strings built from data
// before or while they grow, checks every expression's result
// (Renderer::account) and refuses a namespace inside a namespace, so values
// are acyclic. A value's cached size and depth miss only what a namespace
// inside it gained after it was made (at most one value of kMaxDepth levels
// per attribute), and printing is bounded as it goes.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_TOKENIZER_CHATTEMPLATEINTERNAL_H
#define MTC_LIB_TOKENIZER_CHATTEMPLATEINTERNAL_H

#include "lib/Tokenizer/ChatTemplate.h"

#include <nlohmann/json_fwd.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mtc::tok::jinja {

/// How deep expressions, blocks and values may nest (Jinja2 has Python's
/// recursion limit); deeper is an error, so no recursion overflows the stack.
constexpr int kMaxDepth = 200;

/// What each value counts for in the size of the list or dict that holds
/// it, beside its string bytes: about the memory one item takes, so that
/// RenderLimits::maxValueSize bounds memory, not only a count.
constexpr uint64_t kItemBytes = 128;

/// The longest range(): Jinja2's sandbox (MAX_RANGE, which transformers'
/// ImmutableSandboxedEnvironment keeps) refuses longer ones.
constexpr int64_t kMaxRange = 100000;

/// An error at template line \p line (-1: no line, e.g. raise_exception).
struct TemplateError {
  std::string message;
  int line = 0;
};

/// Throws TemplateError{message, line}.
[[noreturn]] inline void fail(int line, const std::string &message) {
  throw TemplateError{message, line};
}

//===----------------------------------------------------------------------===//
// Values (ChatTemplateValue.cpp)
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
  /// kItemBytes for the value itself plus its string bytes, dict keys and
  /// nested values in full (saturating); levels of lists and dicts (0: a
  /// scalar); whether a namespace is in it. Set when a list or dict is made
  /// (measure(), from the cached weights of its items); a namespace's own
  /// contents change, so size() and nesting() recount it.
  uint64_t weight = kItemBytes;
  int depth = 0;
  bool hasNs = false;

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
    v.weight = kItemBytes + v.s.size();
    return v;
  }
  static Value makeList(List l = {}) {
    Value v;
    v.kind = ListK;
    v.list = std::make_shared<List>(std::move(l));
    v.measure();
    return v;
  }
  static Value makeDict(Dict d = {}, Kind k = DictK) {
    Value v;
    v.kind = k;
    v.dict = std::make_shared<Dict>(std::move(d));
    v.measure();
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
  /// Sets weight, depth and hasNs of a list or dict from its items' cached
  /// ones (a constant time per item; for a namespace item, what it held
  /// when that copy of it was made).
  void measure() {
    weight = kItemBytes;
    depth = 1;
    hasNs = kind == Ns;
    auto add = [&](uint64_t w) {
      weight = weight + w < weight ? UINT64_MAX : weight + w;
    };
    auto item = [&](const Value &c) {
      add(c.weight);
      depth = std::max(depth, c.depth + 1);
      hasNs = hasNs || c.hasNs;
    };
    if (list)
      for (const Value &c : *list)
        item(c);
    if (dict)
      for (const auto &kv : *dict) {
        add(kv.first.size());
        item(kv.second);
      }
  }
  /// The weight; a namespace's counted now (it holds no namespace).
  uint64_t size() const {
    if (kind != Ns)
      return weight;
    Value copy = *this;
    copy.measure();
    return copy.weight;
  }
  /// The depth; a namespace's counted now.
  int nesting() const {
    if (kind != Ns)
      return depth;
    Value copy = *this;
    copy.measure();
    return copy.depth;
  }
  /// Sets \p key of a dict (measure() is not rerun).
  void setKey(const std::string &key, Value v) {
    for (auto &kv : *dict)
      if (kv.first == key) {
        kv.second = std::move(v);
        return;
      }
    dict->emplace_back(key, std::move(v));
  }
};

/// start + k * step, for a k whose result is known to be within int64 (an
/// item of a range or slice): computed modulo 2^64, as k * step alone may
/// overflow (range(-2**63, 2**63 - 1, 2**62)).
inline int64_t nthIndex(int64_t start, uint64_t k, int64_t step) {
  return static_cast<int64_t>(static_cast<uint64_t>(start) +
                              k * static_cast<uint64_t>(step));
}

/// Python's type name of \p v ("str", "NoneType", ...).
const char *typeName(const Value &v);
/// Jinja2's truth value.
bool truthy(const Value &v);
/// Python's repr of a float.
std::string floatRepr(double x);
/// Python's str(v) (undefined prints as nothing); an error at \p line when
/// the text of a list or dict would pass \p limit bytes (a value's cached
/// size misses what a namespace inside it gained after it was made).
std::string pyStr(const Value &v, size_t limit = SIZE_MAX, int line = 0);
/// Python's repr(v), bounded as pyStr.
std::string pyRepr(const Value &v, size_t limit = SIZE_MAX, int line = 0);
/// Appends json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0:
/// none) to \p out; an error at \p line when out would pass \p limit bytes.
void toJson(const Value &v, int indent, int depth, std::string &out, int line,
            size_t limit);
/// A JSON value as a template value (\p depth: its level; an error past
/// kMaxDepth).
Value fromJson(const nlohmann::json &j, int depth = 0);

/// Finds a fixed, non-empty string in texts in time linear in their lengths
/// (Knuth-Morris-Pratt, the table built once for every search).
class TextFinder {
public:
  explicit TextFinder(std::string needle);
  /// The first occurrence in \p hay at or after \p from, or
  /// std::string::npos.
  size_t find(const std::string &hay, size_t from = 0) const;
  size_t size() const { return needle.size(); }

private:
  std::string needle;
  std::vector<size_t> border; // border[k]: longest proper border of [0, k]
};

/// "64 MiB" for whole MiB, else "N bytes".
std::string describeBytes(uint64_t n);
/// 10000000 as "10,000,000".
std::string withCommas(int64_t n);
/// Python's ==.
bool equal(const Value &a, const Value &b);
/// Python's ordering of two numbers (bool, int, float), exact between int
/// and float: -1, 0, 1, or 2 when unordered (a NaN).
int compareNumbers(const Value &a, const Value &b);
/// The byte after the UTF-8 code point at \p pos (its lead byte gives its
/// length, whatever follows).
inline size_t utf8Next(const std::string &s, size_t pos) {
  unsigned char c = static_cast<unsigned char>(s[pos]);
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  return std::min(s.size(), pos + n);
}
/// The code point at [pos, end).
uint32_t utf8At(const std::string &s, size_t pos, size_t end);
/// The number of code points of \p s (Python's len).
size_t cpCount(const std::string &s);
/// The byte where code point \p index of \p s starts (s.size() past the
/// end).
size_t cpOffset(const std::string &s, size_t index);
/// \p s with its code points in reverse order (Python's s[::-1]).
std::string cpReverse(const std::string &s);
/// Python's str.isspace for one code point.
bool pySpace(uint32_t c);
/// str.strip / lstrip / rstrip, with \p chars (code points) or whitespace;
/// linear in the lengths, no copy per code point.
std::string pyStrip(const std::string &s, bool left, bool right,
                    const Value *chars);
/// ASCII case mapping; \p mode 0: upper, 1: lower, 2: capitalize, 3: title.
std::string asciiMap(std::string s, int mode);

//===----------------------------------------------------------------------===//
// Lexer (ChatTemplateLexer.cpp)
//===----------------------------------------------------------------------===//

enum class PieceKind { Text, Expr, Stmt };
struct Piece {
  PieceKind kind;
  std::string text; // the text, or the tag's inside
  int line;
};

/// Splits \p raw into text, `{{ }}` and `{% %}` pieces (comments dropped),
/// with Jinja2's whitespace control, trim_blocks and lstrip_blocks applied.
std::vector<Piece> splitTemplate(const std::string &raw);

enum class Tok { Name, String, Int, Float, Op, End };
struct Token {
  Tok kind;
  std::string text;
};

/// The tokens of a tag's inside \p s (at template line \p line), ending with
/// Tok::End.
std::vector<Token> lexExpr(const std::string &s, int line);

//===----------------------------------------------------------------------===//
// Expressions (ChatTemplateExpr.cpp)
//===----------------------------------------------------------------------===//

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
  /// Levels of the tree under this node (1: a leaf); at most kMaxDepth,
  /// checked as the parser builds it, so that no recursion over the tree
  /// (rendering, destruction) runs deeper.
  int depth = 1;
};

struct BinaryOp;

/// Parses expressions from the tokens of one tag. The template parser reads
/// the keywords of a statement through the token accessors and sets pos.
class ExprParser {
public:
  ExprParser(std::vector<Token> toks, int line)
      : toks(std::move(toks)), line(line) {}

  /// An expression; with \p allowCond, `a if c else b` too.
  ExprP parseExpression(bool allowCond = true);

  const Token &peek() const { return toks[pos]; }
  bool isName(const char *n) const {
    return toks[pos].kind == Tok::Name && toks[pos].text == n;
  }
  bool isOp(const char *o) const {
    return toks[pos].kind == Tok::Op && toks[pos].text == o;
  }
  bool atEnd() const { return toks[pos].kind == Tok::End; }
  void expectOp(const char *o);
  std::string expectName();
  /// The current token for a message: 'x' or "the end of the tag".
  std::string describe() const;
  void expectEnd();

  /// The current token.
  size_t pos = 0;

private:
  /// Counts the parser's nesting while alive; an error past kMaxDepth.
  struct Nest {
    explicit Nest(ExprParser &p);
    ~Nest();
    ExprParser &p;
  };
  int nesting = 0;

  ExprP parseConditional(bool allowCond);
  const BinaryOp *binaryOp(size_t &width) const;
  ExprP make(Expr::Kind k, std::vector<ExprP> args = {});
  /// Appends \p child to \p parent's arguments (keyword \p key when not
  /// empty); an error when \p parent would nest past kMaxDepth.
  void adopt(Expr &parent, ExprP child, const std::string &key = "");
  ExprP parseBinary(int minPrec);
  ExprP parseUnary(bool withFilter);
  void parseArgs(ExprP call);
  ExprP parsePrimary();
  ExprP parsePostfix(ExprP node);
  ExprP parseFilterExpr(ExprP node);

  std::vector<Token> toks;
  int line;
};

//===----------------------------------------------------------------------===//
// Statements (ChatTemplateParser.cpp)
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

/// The statement tree of a template's pieces.
Body parseTemplate(std::vector<Piece> pieces);

//===----------------------------------------------------------------------===//
// Rendering (ChatTemplateRender.cpp, ChatTemplateBuiltins.cpp)
//===----------------------------------------------------------------------===//

enum class Flow { Normal, Break, Continue };

/// Steps (RenderLimits::maxWork) each expression evaluated costs, beside the
/// string bytes of its result: about the nanoseconds it takes, as one step
/// is about one byte made or scanned, or one nanosecond of work.
constexpr uint64_t kExprSteps = 64;
/// Steps each loop iteration costs (its `loop` variable and scope), beside
/// the string bytes of the items it copies.
constexpr uint64_t kLoopSteps = 512;
/// Steps per dict key compared (names looked up, attributes, assignments)
/// and per replacement a str.replace makes.
constexpr uint64_t kKeySteps = 4;

/// Walks a statement tree, appending to out, within \p limits. Scopes are
/// dicts; the first holds the context's variables.
///
/// The cost model: every operation spends steps (spend()) for what it makes
/// and scans before or as it does it: string bytes made, copied or scanned
/// (a string filter or method scans its input once more), kItemBytes per
/// list or dict item made, kKeySteps per dict key compared, kExprSteps per
/// expression, kLoopSteps per loop iteration, a container's size when it is
/// printed or walked. So maxWork bounds both the time and the memory a
/// rendering takes (one step is about a nanosecond); a list, dict or string
/// built from data is checked against maxValueSize or maxOutput before or
/// while it grows.
class Renderer {
public:
  Renderer(Value globals, const RenderLimits &limits) : limits(limits) {
    scopes.push_back(std::move(globals));
  }

  /// The rendered text so far.
  std::string out;

  /// Executes \p body; Break/Continue when a loop statement stopped it.
  Flow exec(const Body &body);
  /// The value of \p e.
  Value eval(const Expr &e);

private:
  const RenderLimits &limits;
  std::vector<Value> scopes; // dicts
  int64_t iterations = 0;
  uint64_t work = 0; // steps spent (RenderLimits::maxWork)

  /// Adds \p steps to the work; an error past maxWork.
  void spend(uint64_t steps, int line);
  /// Checks the result of an expression against the limits (string length,
  /// value size and depth) and spends kExprSteps and its string bytes.
  void account(const Value &v, int line);
  /// The error for a value larger than maxValueSize.
  [[noreturn]] void tooBig(int line) const;
  /// Before making \p items items holding \p bytes string bytes: an error
  /// when they would pass maxValueSize; spends them.
  void reserve(uint64_t items, uint64_t bytes, int line);
  /// Appends \p v to \p l, a list being built whose size so far is \p held:
  /// an error when it would pass maxValueSize; spends the item.
  void push(List &l, Value v, uint64_t &held, int line);
  /// The value named \p name in scope, spending the keys compared.
  Value lookup(const std::string &name, int line);
  /// The value at \p key of dict or namespace \p obj (null if none),
  /// spending the keys compared.
  const Value *findKey(const Value &obj, const std::string &key, int line);
  /// Sets \p key of dict \p d, spending the keys compared.
  void setKey(Value &d, const std::string &key, Value v, int line);
  /// pyStr(v) bounded by maxOutput; a list or dict spends its size first
  /// (printing one walks all of it).
  std::string str(const Value &v, int line) {
    if (v.kind == Value::ListK || v.kind == Value::DictK || v.kind == Value::Ns)
      spend(v.weight, line);
    return pyStr(v, limits.maxOutput, line);
  }
  /// An error when \p s, a string being built, passes maxOutput.
  void grown(const std::string &s, int line);
  /// An error when a string of \p a + \p b bytes would pass maxOutput.
  void willGrow(uint64_t a, uint64_t b, int line);
  /// \p s with its first \p count occurrences (every one when negative) of
  /// \p from replaced by \p to, as Python's str.replace (an empty \p from
  /// matches before every code point and at the end), bounded like grown().
  std::string replaceText(const std::string &s, const std::string &from,
                          const std::string &to, int64_t count, int line);
  /// eval without the accounting.
  Value evalNode(const Expr &e);

  // ChatTemplateRender.cpp: statements, operators, indexing.
  void assign(const std::string &name, Value v, int line);
  void emit(const std::string &s, int line);
  Flow execNode(const Node &n);
  /// The items a for loop (or a filter) walks over \p v: a list's own
  /// items (not copied), a dict's keys, a string's code points.
  std::shared_ptr<const List> iterate(const Value &v, int line);
  void bindVars(const std::vector<std::string> &vars, const Value &item,
                int line);
  Flow execFor(const Node &n);
  static int64_t toInt(const Value &v, int line, const char *what);
  Value item(const Value &obj, const Value &key, int line);
  Value slice(const Value &obj, const Expr &e);
  Value evalBinary(const Expr &e);
  Value arithmetic(const std::string &op, const Value &l, const Value &r,
                   int line);
  Value repeat(const Value &seq, int64_t times, int line);
  bool compare(const std::string &op, const Value &l, const Value &r, int line);
  std::vector<Value> evalArgs(const Expr &e, size_t from);
  Value kwarg(const Expr &e, const std::string &key,
              const std::vector<Value> &pos, size_t idx, Value dflt);

  // ChatTemplateBuiltins.cpp: functions, methods, filters, tests.
  Value callFunction(const Expr &e);
  Value callMethod(const Expr &e);
  Value applyFilter(const Expr &e);
  bool applyTest(const Expr &e);
  /// [key, value] pairs of dict \p d (the items filter and method).
  Value dictItems(const Value &d, int line);
  /// The int filter: Jinja2's do_int with 64-bit integers.
  Value toIntFilter(const Value &v, const Value &dflt, int line);
  /// The float filter: Python's float() of a string, else \p dflt.
  Value toFloatFilter(const Value &v, const Value &dflt);
};

} // namespace mtc::tok::jinja

#endif // MTC_LIB_TOKENIZER_CHATTEMPLATEINTERNAL_H
