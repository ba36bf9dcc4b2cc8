//===- Regex.cpp - The regex subset of tokenizer pre-tokenizers -----------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/Regex.h"

#include "lib/Tokenizer/Unicode.h"

#include <cctype>
#include <cstring>
#include <type_traits>

namespace mtc::tok {

namespace {

enum class Kind : uint8_t {
  Char,
  Class,
  Any,
  Group,
  Repeat,
  Look,
  LineStart,
  LineEnd,
  TextStart,
  TextEnd,
  TextEndNewline,
  WordBoundary,
  NotWordBoundary,
};

enum class Mode : uint8_t { Greedy, Lazy, Possessive };

/// One item of a character class.
struct ClassItem {
  enum Type : uint8_t { Range, Categories, Space, Word, Digit, Hex } type;
  bool negated = false;
  bool inClass = false;    // Word: \w inside [...] (no Latin-1 quirk)
  uint32_t lo = 0, hi = 0; // Range
  uint32_t mask = 0;       // Categories: bit i = Category i
};

struct CharClass {
  bool negated = false;
  bool ci = false;
  std::vector<ClassItem> items;
};

struct Node {
  Kind kind;
  uint32_t ch = 0;
  bool ci = false;
  int cls = -1;
  std::vector<std::vector<int>> alts = {}; // Group, Look
  int child = -1;                          // Repeat
  int min = 0, max = -1;                   // Repeat; max < 0: unbounded
  Mode mode = Mode::Greedy;
  bool negative = false; // Look
};

uint32_t foldCase(uint32_t c) {
  if (c >= 'A' && c <= 'Z')
    return c + 32;
  if (c == 0x17F)
    return 's';
  if (c == 0x212A)
    return 'k';
  return c;
}

bool itemMatches(const ClassItem &it, uint32_t c) {
  bool m = false;
  switch (it.type) {
  case ClassItem::Range:
    m = c >= it.lo && c <= it.hi;
    break;
  case ClassItem::Categories:
    m = (it.mask >> static_cast<int>(category(c))) & 1u;
    break;
  case ClassItem::Space:
    m = isWhiteSpace(c);
    break;
  case ClassItem::Word:
    m = it.inClass ? isClassWordChar(c) : isWordChar(c);
    break;
  case ClassItem::Digit:
    m = category(c) == Category::Nd;
    break;
  case ClassItem::Hex:
    m = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
        (c >= 'A' && c <= 'F');
    break;
  }
  return m != it.negated;
}

bool classContains(const CharClass &cc, uint32_t c) {
  auto any = [&](uint32_t x) {
    for (const ClassItem &it : cc.items)
      if (itemMatches(it, x))
        return true;
    return false;
  };
  bool m = any(c);
  if (!m && cc.ci) {
    uint32_t f = foldCase(c);
    m = (f != c && any(f)) || (f >= 'a' && f <= 'z' && any(f - 32)) ||
        (f == 's' && any(0x17F)) || (f == 'k' && any(0x212A));
  }
  return m != cc.negated;
}

uint32_t categoryMask(std::initializer_list<Category> cs) {
  uint32_t m = 0;
  for (Category c : cs)
    m |= 1u << static_cast<int>(c);
  return m;
}

/// The categories of a property name (normalized: lowercase, without ' ', '_'
/// and '-'), or 0 when it is not a general category.
uint32_t propertyMask(const std::string &name) {
  using C = Category;
  struct Entry {
    const char *names[3];
    std::initializer_list<Category> cats;
  };
  static const Entry table[] = {
      {{"l", "letter", nullptr}, {C::Lu, C::Ll, C::Lt, C::Lm, C::Lo}},
      {{"l&", "lc", "casedletter"}, {C::Lu, C::Ll, C::Lt}},
      {{"lu", "uppercaseletter", nullptr}, {C::Lu}},
      {{"ll", "lowercaseletter", nullptr}, {C::Ll}},
      {{"lt", "titlecaseletter", nullptr}, {C::Lt}},
      {{"lm", "modifierletter", nullptr}, {C::Lm}},
      {{"lo", "otherletter", nullptr}, {C::Lo}},
      {{"m", "mark", "combiningmark"}, {C::Mn, C::Mc, C::Me}},
      {{"mn", "nonspacingmark", nullptr}, {C::Mn}},
      {{"mc", "spacingmark", nullptr}, {C::Mc}},
      {{"me", "enclosingmark", nullptr}, {C::Me}},
      {{"n", "number", nullptr}, {C::Nd, C::Nl, C::No}},
      {{"nd", "decimalnumber", nullptr}, {C::Nd}},
      {{"nl", "letternumber", nullptr}, {C::Nl}},
      {{"no", "othernumber", nullptr}, {C::No}},
      {{"p", "punctuation", nullptr},
       {C::Pc, C::Pd, C::Ps, C::Pe, C::Pi, C::Pf, C::Po}},
      {{"pc", "connectorpunctuation", nullptr}, {C::Pc}},
      {{"pd", "dashpunctuation", nullptr}, {C::Pd}},
      {{"ps", "openpunctuation", nullptr}, {C::Ps}},
      {{"pe", "closepunctuation", nullptr}, {C::Pe}},
      {{"pi", "initialpunctuation", nullptr}, {C::Pi}},
      {{"pf", "finalpunctuation", nullptr}, {C::Pf}},
      {{"po", "otherpunctuation", nullptr}, {C::Po}},
      {{"s", "symbol", nullptr}, {C::Sm, C::Sc, C::Sk, C::So}},
      {{"sm", "mathsymbol", nullptr}, {C::Sm}},
      {{"sc", "currencysymbol", nullptr}, {C::Sc}},
      {{"sk", "modifiersymbol", nullptr}, {C::Sk}},
      {{"so", "othersymbol", nullptr}, {C::So}},
      {{"z", "separator", nullptr}, {C::Zs, C::Zl, C::Zp}},
      {{"zs", "spaceseparator", nullptr}, {C::Zs}},
      {{"zl", "lineseparator", nullptr}, {C::Zl}},
      {{"zp", "paragraphseparator", nullptr}, {C::Zp}},
      {{"c", "other", nullptr}, {C::Cc, C::Cf, C::Cs, C::Co, C::Cn}},
      {{"cc", "control", nullptr}, {C::Cc}},
      {{"cf", "format", nullptr}, {C::Cf}},
      {{"cs", "surrogate", nullptr}, {C::Cs}},
      {{"co", "privateuse", nullptr}, {C::Co}},
      {{"cn", "unassigned", nullptr}, {C::Cn}},
  };
  for (const Entry &e : table)
    for (const char *n : e.names)
      if (n && name == n)
        return categoryMask(e.cats);
  return 0;
}

struct ParseError {
  std::string what;
  size_t offset;
};

} // namespace

struct Regex::Program {
  std::vector<Node> nodes;
  std::vector<CharClass> classes;
  int top = -1; // a Group node
};

namespace {

class Parser {
public:
  Parser(std::string_view p, Regex::Program &prog) : p(p), prog(prog) {}

  int parseTop() {
    bool ci = false;
    int g = parseGroupBody(ci);
    if (pos < p.size())
      fail("unbalanced ')'", pos);
    return g;
  }

private:
  std::string_view p;
  Regex::Program &prog;
  size_t pos = 0;
  int depth = 0;

  [[noreturn]] void fail(const std::string &what, size_t at) {
    throw ParseError{what, at};
  }

  bool atEnd() const { return pos >= p.size(); }
  uint32_t peek() const {
    size_t q = pos;
    return nextCodePoint(p, q);
  }
  uint32_t next() { return nextCodePoint(p, pos); }
  bool eat(char c) {
    if (!atEnd() && p[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  int add(Node n) {
    prog.nodes.push_back(std::move(n));
    return static_cast<int>(prog.nodes.size()) - 1;
  }

  /// Alternatives up to ')' or the end; \p ci may be changed by (?i).
  int parseGroupBody(bool ci) {
    if (++depth > 200)
      fail("nesting too deep", pos);
    Node g{Kind::Group};
    g.alts.emplace_back();
    while (!atEnd() && p[pos] != ')') {
      if (eat('|')) {
        g.alts.emplace_back();
        continue;
      }
      parseQuantified(g.alts.back(), ci);
    }
    --depth;
    return add(std::move(g));
  }

  void parseQuantified(std::vector<int> &seq, bool &ci) {
    size_t start = pos;
    int atom = parseAtom(ci);
    if (atom < 0)
      return; // a flag change such as (?i)
    for (;;) {
      if (atEnd())
        break;
      char c = p[pos];
      int mn, mx;
      bool interval = false;
      if (c == '?') {
        mn = 0, mx = 1;
        ++pos;
      } else if (c == '*') {
        mn = 0, mx = -1;
        ++pos;
      } else if (c == '+') {
        mn = 1, mx = -1;
        ++pos;
      } else if (c == '{' && parseInterval(mn, mx)) {
        interval = true;
      } else {
        break;
      }
      Kind k = prog.nodes[atom].kind;
      if (k == Kind::LineStart || k == Kind::LineEnd || k == Kind::TextStart ||
          k == Kind::TextEnd || k == Kind::TextEndNewline ||
          k == Kind::WordBoundary || k == Kind::NotWordBoundary ||
          k == Kind::Look)
        fail("quantifier after an anchor or lookaround", start);
      Node r{Kind::Repeat};
      r.child = atom;
      r.min = mn;
      r.max = mx;
      if (!atEnd() && p[pos] == '?') {
        r.mode = Mode::Lazy;
        ++pos;
      } else if (!interval && !atEnd() && p[pos] == '+') {
        r.mode = Mode::Possessive;
        ++pos;
        Kind ck = prog.nodes[atom].kind;
        if (ck != Kind::Char && ck != Kind::Class && ck != Kind::Any)
          fail("possessive quantifier on a group is not supported", start);
      }
      atom = add(std::move(r));
    }
    seq.push_back(atom);
  }

  /// {n}, {n,}, {n,m}, {,m} at pos; false (pos unchanged) when it is not an
  /// interval, in which case '{' is a literal.
  bool parseInterval(int &mn, int &mx) {
    size_t q = pos + 1;
    auto number = [&](int &out) {
      size_t s = q;
      long v = 0;
      while (q < p.size() && p[q] >= '0' && p[q] <= '9') {
        v = v * 10 + (p[q] - '0');
        if (v > 100000)
          fail("repeat count too large", pos);
        ++q;
      }
      out = static_cast<int>(v);
      return q > s;
    };
    int a = 0, b = -1;
    bool hasA = number(a);
    if (q < p.size() && p[q] == ',') {
      ++q;
      bool hasB = number(b);
      if (!hasA && !hasB)
        return false;
      if (!hasB)
        b = -1;
    } else {
      if (!hasA)
        return false;
      b = a;
    }
    if (q >= p.size() || p[q] != '}')
      return false;
    if (b >= 0 && b < a)
      fail("bad repeat range {" + std::to_string(a) + "," + std::to_string(b) +
               "}",
           pos);
    pos = q + 1;
    mn = a;
    mx = b;
    return true;
  }

  Node charNode(uint32_t c, bool ci) {
    Node n{Kind::Char};
    n.ch = ci ? foldCase(c) : c;
    n.ci = ci;
    return n;
  }

  int classNode(CharClass cc) {
    prog.classes.push_back(std::move(cc));
    Node n{Kind::Class};
    n.cls = static_cast<int>(prog.classes.size()) - 1;
    return add(std::move(n));
  }

  /// Returns -1 for an inline flag group, which produces no node.
  int parseAtom(bool &ci) {
    size_t start = pos;
    uint32_t c = next();
    switch (c) {
    case '(':
      return parseParen(ci, start);
    case '[':
      return classNode(parseClass(ci, start));
    case '.':
      return add(Node{Kind::Any});
    case '^':
      return add(Node{Kind::LineStart});
    case '$':
      return add(Node{Kind::LineEnd});
    case '*':
    case '+':
    case '?':
      fail("nothing to repeat", start);
    case '\\':
      return parseEscape(ci, start);
    default:
      return add(charNode(c, ci));
    }
  }

  int parseParen(bool &ci, size_t start) {
    bool innerCi = ci;
    Node look{Kind::Look};
    bool isLook = false;
    if (eat('?')) {
      if (atEnd())
        fail("unterminated group", start);
      char c = p[pos];
      if (c == ':') {
        ++pos;
      } else if (c == '=' || c == '!') {
        ++pos;
        isLook = true;
        look.negative = c == '!';
      } else if (c == '<' && pos + 1 < p.size() &&
                 (p[pos + 1] == '=' || p[pos + 1] == '!')) {
        fail("lookbehind is not supported", start);
      } else if (c == '<' || c == '\'') {
        // A named group: (?<name>...) or (?'name'...).
        char close = c == '<' ? '>' : '\'';
        size_t e = p.find(close, pos + 1);
        if (e == std::string_view::npos)
          fail("unterminated group name", start);
        pos = e + 1;
      } else if (c == 'i' || c == '-') {
        bool value = true;
        if (eat('-'))
          value = false;
        if (!eat('i'))
          fail("unsupported group flag", start);
        if (eat(')')) {
          ci = value; // (?i): to the end of the enclosing group
          return -1;
        }
        if (!eat(':'))
          fail("unsupported group flag", start);
        innerCi = value;
      } else {
        fail("unsupported group syntax '(?" + std::string(1, c) + "'", start);
      }
    }
    int body = parseGroupBody(innerCi);
    if (!eat(')'))
      fail("missing ')'", start);
    if (!isLook)
      return body;
    look.alts = {{body}};
    return add(std::move(look));
  }

  uint32_t hexDigits(size_t minDigits, size_t maxDigits, size_t start) {
    uint32_t v = 0;
    size_t n = 0;
    while (n < maxDigits && !atEnd() &&
           std::isxdigit(static_cast<unsigned char>(p[pos]))) {
      char d = p[pos++];
      v = v * 16 + (d <= '9' ? d - '0' : (d | 0x20) - 'a' + 10);
      ++n;
    }
    if (n < minDigits)
      fail("bad hexadecimal escape", start);
    return v;
  }

  /// A code point escape (\t, \xHH, ...) at pos (after the backslash), or
  /// false when the escape is not one.
  bool codePointEscape(char e, uint32_t &out, size_t start) {
    switch (e) {
    case 't':
      out = '\t';
      return true;
    case 'n':
      out = '\n';
      return true;
    case 'r':
      out = '\r';
      return true;
    case 'f':
      out = '\f';
      return true;
    case 'v':
      out = '\v';
      return true;
    case 'a':
      out = 0x07;
      return true;
    case 'e':
      out = 0x1B;
      return true;
    case 'x':
      if (eat('{')) {
        out = hexDigits(1, 8, start);
        if (!eat('}'))
          fail("bad \\x{...} escape", start);
      } else {
        out = hexDigits(1, 2, start);
      }
      if (out > 0x10FFFF || (out >= 0xD800 && out <= 0xDFFF))
        fail("invalid code point in escape", start);
      return true;
    case 'u':
      out = hexDigits(4, 4, start);
      if (out >= 0xD800 && out <= 0xDFFF)
        fail("invalid code point in escape", start);
      return true;
    default:
      return false;
    }
  }

  /// \s \S \d \D \w \W \h \H \p{..} \P{..} at pos (after the backslash);
  /// false when the escape is not a class.
  bool classEscape(char e, ClassItem &item, size_t start) {
    switch (e) {
    case 's':
    case 'S':
      item.type = ClassItem::Space;
      item.negated = e == 'S';
      return true;
    case 'd':
    case 'D':
      item.type = ClassItem::Digit;
      item.negated = e == 'D';
      return true;
    case 'w':
    case 'W':
      item.type = ClassItem::Word;
      item.negated = e == 'W';
      return true;
    case 'h':
    case 'H':
      item.type = ClassItem::Hex;
      item.negated = e == 'H';
      return true;
    case 'p':
    case 'P': {
      item.type = ClassItem::Categories;
      item.negated = e == 'P';
      std::string name;
      if (eat('{')) {
        if (eat('^'))
          item.negated = !item.negated;
        size_t close = p.find('}', pos);
        if (close == std::string_view::npos)
          fail("unterminated \\p{...}", start);
        name = std::string(p.substr(pos, close - pos));
        pos = close + 1;
      } else if (!atEnd()) {
        name = std::string(1, p[pos++]);
      }
      std::string norm;
      for (char ch : name)
        if (ch != ' ' && ch != '_' && ch != '-')
          norm +=
              static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      item.mask = propertyMask(norm);
      if (!item.mask)
        fail("unsupported property '" + name +
                 "' (supported: general categories such as L, Lu, N, Nd, P)",
             start);
      return true;
    }
    default:
      return false;
    }
  }

  int parseEscape(bool ci, size_t start) {
    if (atEnd())
      fail("trailing backslash", start);
    char e = p[pos++];
    uint32_t cp;
    if (codePointEscape(e, cp, start))
      return add(charNode(cp, ci));
    ClassItem item{};
    if (classEscape(e, item, start)) {
      CharClass cc;
      cc.items.push_back(item);
      return classNode(std::move(cc));
    }
    switch (e) {
    case 'A':
      return add(Node{Kind::TextStart});
    case 'z':
      return add(Node{Kind::TextEnd});
    case 'Z':
      return add(Node{Kind::TextEndNewline});
    case 'b':
      return add(Node{Kind::WordBoundary});
    case 'B':
      return add(Node{Kind::NotWordBoundary});
    default:
      break;
    }
    if (std::isalnum(static_cast<unsigned char>(e)))
      fail(std::string("unsupported escape '\\") + e + "'", start);
    --pos;
    return add(charNode(next(), ci));
  }

  /// One class member code point (after '['), handling escapes.
  CharClass parseClass(bool ci, size_t start) {
    CharClass cc;
    cc.ci = ci;
    if (eat('^'))
      cc.negated = true;
    bool first = true;
    for (;;) {
      if (atEnd())
        fail("unterminated character class", start);
      size_t itemStart = pos;
      uint32_t c = next();
      if (c == ']' && !first)
        break;
      first = false;
      if (c == '[')
        fail("nested character classes are not supported", itemStart);
      if (c == '&' && !atEnd() && p[pos] == '&')
        fail("class intersection '&&' is not supported", itemStart);
      uint32_t lo;
      if (c == '\\') {
        if (atEnd())
          fail("trailing backslash", itemStart);
        char e = p[pos++];
        ClassItem item{};
        if (classEscape(e, item, itemStart)) {
          item.inClass = true;
          cc.items.push_back(item);
          continue;
        }
        if (!codePointEscape(e, lo, itemStart)) {
          if (std::isalnum(static_cast<unsigned char>(e)))
            fail(std::string("unsupported escape '\\") + e + "' in a class",
                 itemStart);
          --pos;
          lo = next();
        }
      } else {
        lo = c;
      }
      uint32_t hi = lo;
      if (pos + 1 < p.size() && p[pos] == '-' && p[pos + 1] != ']') {
        ++pos;
        size_t hiStart = pos;
        uint32_t h = next();
        if (h == '\\') {
          if (atEnd())
            fail("trailing backslash", hiStart);
          char e = p[pos++];
          if (!codePointEscape(e, h, hiStart)) {
            if (std::isalnum(static_cast<unsigned char>(e)))
              fail("bad range end in a class", hiStart);
            --pos;
            h = next();
          }
        } else if (h == '[') {
          fail("nested character classes are not supported", hiStart);
        }
        if (h < lo)
          fail("empty range in a class", itemStart);
        hi = h;
      }
      ClassItem item{};
      item.type = ClassItem::Range;
      item.lo = lo;
      item.hi = hi;
      cc.items.push_back(item);
    }
    return cc;
  }
};

thread_local uint64_t *currentBudget = nullptr;

bool isSingle(const Node &n) {
  return n.kind == Kind::Char || n.kind == Kind::Class || n.kind == Kind::Any;
}

/// A non-owning reference to a callable bool(size_t).
class Cont {
public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<F, Cont>>>
  Cont(F &f) // NOLINT: implicit on purpose
      : obj(&f),
        fn([](void *o, size_t pos) { return (*static_cast<F *>(o))(pos); }) {}
  bool operator()(size_t pos) const { return fn(obj, pos); }

private:
  void *obj;
  bool (*fn)(void *, size_t);
};

class Matcher {
public:
  Matcher(const Regex::Program &prog, std::string_view s) : g(prog), s(s) {}

  bool matchAt(size_t pos, size_t &end) {
    auto done = [&](size_t p) {
      end = p;
      return true;
    };
    return node(g.top, pos, done);
  }

private:
  const Regex::Program &g;
  std::string_view s;
  uint64_t steps = 0;
  int depth = 0;

  struct DepthGuard {
    int &d;
    explicit DepthGuard(int &d) : d(d) {
      if (++d > Regex::kMaxDepth)
        throw RegexLimitError("the pattern nests too deeply on this input");
    }
    ~DepthGuard() { --d; }
  };

  void tick() {
    if (++steps > Regex::kMaxSteps || (currentBudget && *currentBudget == 0))
      throw RegexLimitError("the pattern needs too many backtracking steps "
                            "on this input");
    if (currentBudget)
      --*currentBudget;
  }

  size_t prevBoundary(size_t pos) const {
    do
      --pos;
    while (pos > 0 && (static_cast<uint8_t>(s[pos]) & 0xC0) == 0x80);
    return pos;
  }

  bool wordAt(size_t pos) const {
    if (pos >= s.size())
      return false;
    size_t q = pos;
    return isWordChar(nextCodePoint(s, q));
  }
  bool wordBefore(size_t pos) const {
    return pos > 0 && wordAt(prevBoundary(pos));
  }

  /// Matches one code point at \p pos.
  bool single(const Node &n, size_t pos, size_t &next) const {
    if (pos >= s.size())
      return false;
    size_t q = pos;
    uint32_t c = nextCodePoint(s, q);
    bool m;
    switch (n.kind) {
    case Kind::Char:
      m = n.ci ? foldCase(c) == n.ch : c == n.ch;
      break;
    case Kind::Class:
      m = classContains(g.classes[n.cls], c);
      break;
    default: // Any
      m = c != '\n';
      break;
    }
    if (m)
      next = q;
    return m;
  }

  bool seq(const std::vector<int> &items, size_t i, size_t pos, Cont k) {
    while (i < items.size() && isSingle(g.nodes[items[i]])) {
      tick();
      if (!single(g.nodes[items[i]], pos, pos))
        return false;
      ++i;
    }
    if (i == items.size())
      return k(pos);
    if (i + 1 == items.size())
      return node(items[i], pos, k);
    auto rest = [&](size_t p) { return seq(items, i + 1, p, k); };
    return node(items[i], pos, rest);
  }

  bool node(int idx, size_t pos, Cont k) {
    tick();
    const Node &n = g.nodes[idx];
    switch (n.kind) {
    case Kind::Char:
    case Kind::Class:
    case Kind::Any: {
      size_t nx;
      return single(n, pos, nx) && k(nx);
    }
    case Kind::Group: {
      DepthGuard guard(depth);
      for (const std::vector<int> &alt : n.alts)
        if (seq(alt, 0, pos, k))
          return true;
      return false;
    }
    case Kind::Look: {
      DepthGuard guard(depth);
      auto accept = [](size_t) { return true; };
      bool found = false;
      for (const std::vector<int> &alt : n.alts)
        if (seq(alt, 0, pos, accept)) {
          found = true;
          break;
        }
      return found != n.negative && k(pos);
    }
    case Kind::Repeat:
      if (isSingle(g.nodes[n.child]))
        return repeatSingle(n, pos, k);
      return repeat(n, 0, pos, k);
    case Kind::LineStart: // not after a newline that ends the text
      return (pos == 0 || (s[pos - 1] == '\n' && pos < s.size())) && k(pos);
    case Kind::LineEnd:
      return (pos == s.size() || s[pos] == '\n') && k(pos);
    case Kind::TextStart:
      return pos == 0 && k(pos);
    case Kind::TextEnd:
      return pos == s.size() && k(pos);
    case Kind::TextEndNewline:
      return (pos == s.size() || (pos + 1 == s.size() && s[pos] == '\n')) &&
             k(pos);
    case Kind::WordBoundary:
      return wordBefore(pos) != wordAt(pos) && k(pos);
    case Kind::NotWordBoundary:
      return wordBefore(pos) == wordAt(pos) && k(pos);
    }
    return false;
  }

  bool repeatSingle(const Node &r, size_t pos, Cont k) {
    const Node &c = g.nodes[r.child];
    size_t nx;
    if (r.mode == Mode::Lazy) {
      for (int count = 0;; ++count) {
        if (count >= r.min && k(pos))
          return true;
        if ((r.max >= 0 && count >= r.max) || !single(c, pos, nx))
          return false;
        tick();
        pos = nx;
      }
    }
    int count = 0;
    while ((r.max < 0 || count < r.max) && single(c, pos, nx)) {
      tick();
      pos = nx;
      ++count;
    }
    if (r.mode == Mode::Possessive)
      return count >= r.min && k(pos);
    for (;;) {
      if (count < r.min)
        return false;
      tick();
      if (k(pos))
        return true;
      if (count == 0)
        return false;
      pos = prevBoundary(pos);
      --count;
    }
  }

  bool repeat(const Node &r, int count, size_t pos, Cont k) {
    DepthGuard guard(depth);
    auto more = [&](size_t p) {
      // An iteration that matched nothing ends the loop, the minimum count
      // included (Oniguruma's empty-loop check).
      if (p == pos)
        return k(p);
      return repeat(r, count + 1, p, k);
    };
    bool canMore = r.max < 0 || count < r.max;
    if (r.mode == Mode::Lazy) {
      if (count >= r.min && k(pos))
        return true;
      return canMore && node(r.child, pos, more);
    }
    if (canMore && node(r.child, pos, more))
      return true;
    return count >= r.min && k(pos);
  }
};

} // namespace

Regex::Budget::Budget(uint64_t steps) : left(steps), outer(currentBudget) {
  currentBudget = &left;
}
Regex::Budget::~Budget() { currentBudget = outer; }

Regex::Regex() = default;
Regex::~Regex() = default;
Regex::Regex(Regex &&) noexcept = default;
Regex &Regex::operator=(Regex &&) noexcept = default;

Status Regex::compile(std::string_view pattern) {
  if (findInvalidUtf8(pattern) != std::string_view::npos)
    return Status::error("the pattern is not valid UTF-8");
  auto program = std::make_unique<Program>();
  try {
    Parser parser(pattern, *program);
    program->top = parser.parseTop();
  } catch (const ParseError &e) {
    return Status::error(e.what + " at offset " + std::to_string(e.offset));
  }
  prog = std::move(program);
  source = std::string(pattern);
  return Status::success();
}

Regex Regex::literal(std::string_view text) {
  Regex r;
  r.prog = std::make_unique<Program>();
  Node g{Kind::Group};
  g.alts.emplace_back();
  for (size_t pos = 0; pos < text.size();) {
    Node c{Kind::Char};
    c.ch = nextCodePoint(text, pos);
    r.prog->nodes.push_back(c);
    g.alts.back().push_back(static_cast<int>(r.prog->nodes.size()) - 1);
  }
  r.prog->nodes.push_back(std::move(g));
  r.prog->top = static_cast<int>(r.prog->nodes.size()) - 1;
  r.source = std::string(text);
  return r;
}

bool Regex::search(std::string_view text, size_t from, size_t &start,
                   size_t &end) const {
  Matcher m(*prog, text);
  for (size_t pos = from; pos <= text.size();) {
    if (m.matchAt(pos, end)) {
      start = pos;
      return true;
    }
    if (pos == text.size())
      break;
    pos += utf8Length(static_cast<uint8_t>(text[pos]));
  }
  return false;
}

std::vector<std::pair<size_t, size_t>>
Regex::findAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  size_t lastEnd = 0;
  bool haveLast = false;
  size_t lastMatchEnd = 0;
  while (lastEnd <= text.size()) {
    size_t st, en;
    if (!search(text, lastEnd, st, en))
      break;
    if (st == en && haveLast && lastMatchEnd == en) {
      lastEnd += lastEnd < text.size()
                     ? utf8Length(static_cast<uint8_t>(text[lastEnd]))
                     : 1;
      continue;
    }
    lastEnd = en;
    lastMatchEnd = en;
    haveLast = true;
    out.emplace_back(st, en);
  }
  return out;
}

} // namespace mtc::tok
