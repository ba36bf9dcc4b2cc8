//===- ChatTemplateExpr.cpp - Jinja expression parser ---------------------===//
//
// Part of mtc. Parses the expressions of a chat template's tags. Binary
// operators are parsed by precedence climbing over one table (kBinaryOps:
// operator -> precedence, associativity, chaining), Jinja2's order:
//
//   or < and < not (prefix) < comparisons (==, !=, <, <=, >, >=, in,
//   not in; chained: a < b < c) < ~ < + - < * / // % < ** (left
//   associative, as in Jinja2) < unary + - < filters and tests < postfix
//   (.attr, [item], [a:b:c], calls)
//
// `a if c else b` wraps a whole expression; unary minus binds its operand's
// postfix chain (-x|f is (-x)|f, -x ** 2 is (-x) ** 2, as in Jinja2).
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplateInternal.h"

#include <algorithm>
#include <string>

namespace mtc::tok::jinja {

enum class Assoc { Left, Right };

/// One row of the binary-operator table.
struct BinaryOp {
  const char *first;  // the token (an operator, or a name for words)
  const char *second; // a second name token ("not in"), or null
  bool word;          // first is a name token (or, and, in, not in)
  const char *op;     // the operator as the expression tree spells it
  int precedence;     // higher binds tighter
  Assoc assoc;
  bool chained; // a comparison: a < b < c is one Compare node
};

namespace {

/// The prefix `not` binds looser than the comparisons and tighter than
/// `and`: `not a == b` is not (a == b), `not a and b` is (not a) and b.
constexpr int kNotPrecedence = 3;

// clang-format off
const BinaryOp kBinaryOps[] = {
    {"or",  nullptr, true,  "or",     1, Assoc::Left, false},
    {"and", nullptr, true,  "and",    2, Assoc::Left, false},
    {"==",  nullptr, false, "==",     4, Assoc::Left, true},
    {"!=",  nullptr, false, "!=",     4, Assoc::Left, true},
    {"<",   nullptr, false, "<",      4, Assoc::Left, true},
    {">",   nullptr, false, ">",      4, Assoc::Left, true},
    {"<=",  nullptr, false, "<=",     4, Assoc::Left, true},
    {">=",  nullptr, false, ">=",     4, Assoc::Left, true},
    {"in",  nullptr, true,  "in",     4, Assoc::Left, true},
    {"not", "in",    true,  "not in", 4, Assoc::Left, true},
    {"~",   nullptr, false, "~",      5, Assoc::Left, false},
    {"+",   nullptr, false, "+",      6, Assoc::Left, false},
    {"-",   nullptr, false, "-",      6, Assoc::Left, false},
    {"*",   nullptr, false, "*",      7, Assoc::Left, false},
    {"/",   nullptr, false, "/",      7, Assoc::Left, false},
    {"//",  nullptr, false, "//",     7, Assoc::Left, false},
    {"%",   nullptr, false, "%",      7, Assoc::Left, false},
    {"**",  nullptr, false, "**",     8, Assoc::Left, false},
};
// clang-format on

/// The loosest precedence: a whole operator expression.
constexpr int kLowestPrecedence = 1;

} // namespace

ExprParser::Nest::Nest(ExprParser &p) : p(p) {
  if (++p.nesting > kMaxDepth)
    fail(p.line, "the expression nests more than " + std::to_string(kMaxDepth) +
                     " levels deep");
}

ExprParser::Nest::~Nest() { --p.nesting; }

ExprP ExprParser::parseExpression(bool allowCond) {
  return parseConditional(allowCond);
}

ExprP ExprParser::parseConditional(bool allowCond) {
  Nest nest(*this);
  ExprP e = parseBinary(kLowestPrecedence);
  if (allowCond && isName("if")) {
    ++pos;
    ExprP cond = parseBinary(kLowestPrecedence);
    ExprP other;
    if (isName("else")) {
      ++pos;
      other = parseExpression();
    }
    e = make(Expr::Cond, {e, cond, other});
  }
  return e;
}

/// The operator at pos, or null; \p width is its number of tokens.
const BinaryOp *ExprParser::binaryOp(size_t &width) const {
  const Token &t = toks[pos];
  if (t.kind != Tok::Op && t.kind != Tok::Name)
    return nullptr;
  for (const BinaryOp &op : kBinaryOps) {
    if (op.word != (t.kind == Tok::Name) || t.text != op.first)
      continue;
    if (op.second) {
      const Token &u = toks[pos + 1];
      if (u.kind != Tok::Name || u.text != op.second)
        continue;
      width = 2;
    } else {
      width = 1;
    }
    return &op;
  }
  return nullptr;
}

/// Precedence climbing: an operand, then every operator binding at least as
/// tightly as \p minPrec, each with a right operand of the operators binding
/// tighter than it (or as tightly, right associative).
ExprP ExprParser::parseBinary(int minPrec) {
  Nest nest(*this);
  ExprP lhs;
  if (minPrec <= kNotPrecedence && isName("not")) {
    ++pos;
    lhs = make(Expr::Unary, {parseBinary(kNotPrecedence)});
    lhs->op = "not";
  } else {
    lhs = parseUnary(true);
  }
  size_t width = 0;
  while (const BinaryOp *op = binaryOp(width)) {
    if (op->precedence < minPrec)
      break;
    int next = op->assoc == Assoc::Left ? op->precedence + 1 : op->precedence;
    if (op->chained) {
      ExprP cmp = make(Expr::Compare, {lhs});
      do {
        pos += width;
        cmp->ops.push_back(op->op);
        adopt(*cmp, parseBinary(next));
        op = binaryOp(width);
      } while (op && op->chained);
      lhs = cmp;
      continue;
    }
    pos += width;
    ExprP e = make(Expr::Binary, {lhs, parseBinary(next)});
    e->op = op->op;
    lhs = e;
  }
  return lhs;
}

ExprP ExprParser::parseUnary(bool withFilter) {
  Nest nest(*this);
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

void ExprParser::parseArgs(ExprP call) {
  // After '('.
  while (!isOp(")")) {
    if (peek().kind == Tok::Name && toks[pos + 1].kind == Tok::Op &&
        toks[pos + 1].text == "=") {
      std::string key = toks[pos].text;
      pos += 2;
      adopt(*call, parseExpression(), key);
    } else {
      if (!call->kwargs.empty())
        fail(line, "positional argument after a keyword argument");
      adopt(*call, parseExpression());
    }
    if (!isOp(","))
      break;
    ++pos;
  }
  expectOp(")");
}

ExprP ExprParser::parsePrimary() {
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
        adopt(*l, parseExpression());
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
      adopt(*l, parseExpression());
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
      adopt(*d, parseExpression());
      expectOp(":");
      adopt(*d, parseExpression());
      if (!isOp(","))
        break;
      ++pos;
    }
    expectOp("}");
    return d;
  }
  fail(line, "unexpected " + describe() + " in an expression");
}

ExprP ExprParser::parsePostfix(ExprP node) {
  while (true) {
    if (isOp(".")) {
      ++pos;
      ExprP e = make(Expr::Attr, {node});
      if (peek().kind == Tok::Int) {
        e->kind = Expr::Item;
        ExprP idx = make(Expr::Lit);
        const std::string &digits = toks[pos++].text;
        try {
          idx->lit = Value::integer(std::stoll(digits));
        } catch (...) {
          fail(line, "integer literal " + digits + " is out of range");
        }
        adopt(*e, idx);
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
      // x[] (no index, no colon) is not an expression, as in Jinja2.
      if (!slice && !parts[0])
        fail(line, "unexpected " + describe() + " in an expression");
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

ExprP ExprParser::parseFilterExpr(ExprP node) {
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
        adopt(*t, parsePrimary());
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

void ExprParser::expectOp(const char *o) {
  if (!isOp(o))
    fail(line, std::string("expected '") + o + "', found " + describe());
  ++pos;
}

std::string ExprParser::expectName() {
  if (peek().kind != Tok::Name)
    fail(line, "expected a name, found " + describe());
  return toks[pos++].text;
}

std::string ExprParser::describe() const {
  if (atEnd())
    return "the end of the tag";
  return "'" + peek().text + "'";
}

void ExprParser::expectEnd() {
  if (!atEnd())
    fail(line, "unexpected " + describe());
}

ExprP ExprParser::make(Expr::Kind k, std::vector<ExprP> args) {
  auto e = std::make_shared<Expr>();
  e->kind = k;
  e->line = line;
  for (ExprP &a : args)
    if (a)
      adopt(*e, std::move(a));
    else
      e->args.push_back(nullptr); // an omitted slice bound or else branch
  return e;
}

void ExprParser::adopt(Expr &parent, ExprP child, const std::string &key) {
  // Operator and postfix chains (a + b + ..., x|f|f|...) build deep trees
  // without nesting the parser: the depth is checked here, before the
  // chain grows further.
  if (child->depth >= kMaxDepth)
    fail(line, "the expression nests more than " + std::to_string(kMaxDepth) +
                   " levels deep");
  parent.depth = std::max(parent.depth, child->depth + 1);
  if (key.empty())
    parent.args.push_back(std::move(child));
  else
    parent.kwargs.emplace_back(key, std::move(child));
}

} // namespace mtc::tok::jinja
