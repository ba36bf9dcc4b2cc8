//===- Parser.cpp - .mt source to AST -------------------------------------===//
//
// Part of mtc. Runs the ANTLR4 lexer and parser generated from Mt.g4 and builds
// the AST of AST.h from the parse tree.
//
// The pipeline, each stage stopping at its first kind of error:
//   1. size, NUL-byte and UTF-8 checks on the raw bytes (ANTLR's input stream
//      would throw on invalid UTF-8);
//   2. lexing, then a scan of the tokens for malformed ones (bad numbers,
//      unterminated strings and comments, unknown characters);
//   3. a depth check over the tokens: bracket nesting plus the operators of
//      each expression must stay within kMaxNesting, so the recursive-descent
//      parser, the AST builder and the passes after them cannot exhaust the
//      stack;
//   4. parsing, with an error strategy that words ANTLR's errors for people
//      ("unexpected 'foo'; expected '}' to close layer 'Block'");
//   5. building the AST, with the structural checks the grammar leaves open
//      (the `x` of `layer NAME x COUNT`, initializer names and arities, one
//      config block and one forward per model, named arguments after the
//      positional ones, out-of-range numbers).
//
// Locations: lines and columns are 1-based; a column counts characters (code
// points), as ANTLR does. Each node's location is the first character of:
//   Model, ConfigEntry, ParamDecl, LayerDecl, ExpertDecl, ArgDecl: its name;
//   ForwardDecl: `forward`; ShapeDecl: `[`; dtypeLoc: the dtype; initLoc: the
//   initializer name; Stmt Assign: the first target; Return/Repeat: the
//   keyword; Expr Binary/Unary: the operator; Call: the callee name; List: `[`;
//   Number/String/Bool/Name: the token; NamedArg: the argument name.
//
//===----------------------------------------------------------------------===//

#include "frontend/Parser.h"
#include "frontend/Sema.h"

#include "MtLexer.h"
#include "MtParser.h"
#include "antlr4-runtime.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>
#include <sstream>

namespace mtc {

namespace {

using antlr::MtLexer;
using antlr::MtParser;
using antlr4::Token;

/// Thrown from the error reporter to stop a parse that produced too many
/// errors already; caught in parseModel.
struct TooManyErrors {};

bool isContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

/// Number of characters (code points) in UTF-8 text.
size_t charCount(const std::string &s) {
  size_t n = 0;
  for (char c : s)
    if (!isContinuation(static_cast<unsigned char>(c)))
      ++n;
  return n;
}

/// The 1-based line and column of byte \p offset in \p text, with columns
/// counted as DiagnosticEngine counts them.
SourceLoc locOfOffset(const std::string &text, size_t offset) {
  SourceLoc loc{1, 1};
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      loc.col = 1;
    } else if (!isContinuation(static_cast<unsigned char>(text[i]))) {
      ++loc.col;
    }
  }
  return loc;
}

/// Returns the offset of the first byte that is not part of well-formed UTF-8
/// (no overlong forms, surrogates or code points above U+10FFFF), or npos.
size_t findInvalidUtf8(const std::string &s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n)
      return i;
    for (size_t k = 1; k < len; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      if (!isContinuation(d))
        return i;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
      return i;
    i += len;
  }
  return std::string::npos;
}

/// Shortens long token text for messages.
std::string clip(const std::string &s) {
  constexpr size_t kMax = 32;
  if (charCount(s) <= kMax)
    return s;
  size_t bytes = 0, chars = 0;
  while (bytes < s.size() && chars < kMax) {
    ++bytes;
    while (bytes < s.size() &&
           isContinuation(static_cast<unsigned char>(s[bytes])))
      ++bytes;
    ++chars;
  }
  return s.substr(0, bytes) + "...";
}

/// How a token is named in "unexpected ..." messages.
std::string describeToken(const Token *t) {
  if (t->getType() == Token::EOF)
    return "end of file";
  return "'" + clip(t->getText()) + "'";
}

/// Names an unknown character: printable ones quoted, others as U+XXXX.
std::string describeChar(const std::string &text) {
  unsigned char c = text.empty() ? 0 : static_cast<unsigned char>(text[0]);
  char buf[32];
  if (c >= 0x20 && c < 0x7F)
    return "'" + text + "'";
  if (c < 0x80) {
    std::snprintf(buf, sizeof buf, "U+%04X", c);
    return buf;
  }
  // Decode the (already validated) UTF-8 sequence.
  uint32_t cp = c >= 0xF0 ? (c & 0x07) : c >= 0xE0 ? (c & 0x0F) : (c & 0x1F);
  for (size_t i = 1; i < text.size(); ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(text[i]) & 0x3F);
  std::snprintf(buf, sizeof buf, " (U+%04X)", cp);
  return "'" + text + "'" + buf;
}

//===----------------------------------------------------------------------===//
// Error reporting
//===----------------------------------------------------------------------===//

/// Turns tokens into locations and forwards errors to the DiagnosticEngine;
/// stops the parse (TooManyErrors) once the engine stops printing.
class Reporter {
public:
  Reporter(DiagnosticEngine &diags, antlr4::CommonTokenStream &tokens)
      : diags(diags), tokens(tokens) {}

  SourceLoc locOf(const Token *t) const {
    if (t && t->getType() != Token::EOF)
      return {static_cast<uint32_t>(t->getLine()),
              static_cast<uint32_t>(t->getCharPositionInLine() + 1)};
    // End of file: point just past the last token, where the missing text
    // belongs, rather than at an empty line after it.
    const Token *last = nullptr;
    for (Token *tok : tokens.getTokens())
      if (tok->getType() != Token::EOF &&
          tok->getChannel() == Token::DEFAULT_CHANNEL)
        last = tok;
    if (!last)
      return {1, 1};
    return {static_cast<uint32_t>(last->getLine()),
            static_cast<uint32_t>(last->getCharPositionInLine() + 1 +
                                  charCount(last->getText()))};
  }

  void error(SourceLoc loc, const std::string &message) {
    if (diags.errorCount() - errorsBefore >= DiagnosticEngine::kMaxPrinted)
      throw TooManyErrors();
    diags.error(loc, message);
  }
  void error(const Token *t, const std::string &message) {
    error(locOf(t), message);
  }
  void note(const Token *t, const std::string &message) {
    diags.note(locOf(t), message);
  }
  void note(SourceLoc loc, const std::string &message) {
    diags.note(loc, message);
  }

private:
  DiagnosticEngine &diags;
  antlr4::CommonTokenStream &tokens;
  unsigned errorsBefore = diags.errorCount();
};

/// Fallback for errors that do not go through FriendlyErrorStrategy (the
/// lexer never reports any, since UNKNOWN_CHAR catches every character).
class ForwardingListener : public antlr4::BaseErrorListener {
public:
  explicit ForwardingListener(Reporter &reporter) : reporter(reporter) {}
  void syntaxError(antlr4::Recognizer *, Token *offendingSymbol, size_t line,
                   size_t charPositionInLine, const std::string &msg,
                   std::exception_ptr) override {
    if (offendingSymbol)
      reporter.error(offendingSymbol, msg);
    else
      reporter.error(SourceLoc{static_cast<uint32_t>(line),
                               static_cast<uint32_t>(charPositionInLine + 1)},
                     msg);
  }

private:
  Reporter &reporter;
};

bool isBlockContext(antlr4::ParserRuleContext *ctx) {
  return dynamic_cast<MtParser::ModelDeclContext *>(ctx) ||
         dynamic_cast<MtParser::ConfigBlockContext *>(ctx) ||
         dynamic_cast<MtParser::LayerDeclContext *>(ctx) ||
         dynamic_cast<MtParser::ExpertDeclContext *>(ctx) ||
         dynamic_cast<MtParser::ForwardDeclContext *>(ctx) ||
         dynamic_cast<MtParser::RepeatStmtContext *>(ctx);
}

/// Finds the enclosing block (a rule context that has opened a `{`) of \p ctx.
antlr4::ParserRuleContext *enclosingBlock(antlr4::ParserRuleContext *ctx,
                                          Token **lbrace) {
  for (; ctx; ctx = dynamic_cast<antlr4::ParserRuleContext *>(ctx->parent)) {
    if (!isBlockContext(ctx))
      continue;
    if (antlr4::tree::TerminalNode *node = ctx->getToken(MtParser::LBRACE, 0)) {
      if (lbrace)
        *lbrace = node->getSymbol();
      return ctx;
    }
  }
  return nullptr;
}

std::string nameOf(Token *t) { return t ? t->getText() : std::string("?"); }

/// "layer 'Block'", "the config block", "the forward of model 'M'", ...
std::string describeBlock(antlr4::ParserRuleContext *ctx) {
  if (auto *m = dynamic_cast<MtParser::ModelDeclContext *>(ctx))
    return "model '" + nameOf(m->name) + "'";
  if (dynamic_cast<MtParser::ConfigBlockContext *>(ctx))
    return "the config block";
  if (auto *l = dynamic_cast<MtParser::LayerDeclContext *>(ctx))
    return "layer '" + nameOf(l->name) + "'";
  if (auto *e = dynamic_cast<MtParser::ExpertDeclContext *>(ctx))
    return "expert '" + nameOf(e->name) + "'";
  if (dynamic_cast<MtParser::RepeatStmtContext *>(ctx))
    return "the repeat block";
  if (dynamic_cast<MtParser::ForwardDeclContext *>(ctx)) {
    auto *parent = dynamic_cast<antlr4::ParserRuleContext *>(ctx->parent);
    while (parent && dynamic_cast<MtParser::ModelItemContext *>(parent))
      parent = dynamic_cast<antlr4::ParserRuleContext *>(parent->parent);
    if (parent)
      return "the forward of " + describeBlock(parent);
    return "the forward";
  }
  return "the block";
}

/// Renders an expected-token set: token literals as written, token classes
/// and well-known groups by name ("an expression", "a statement").
/// Returns "" when the list would be too long to help.
std::string describeExpected(const antlr4::dfa::Vocabulary &vocab,
                             const antlr4::misc::IntervalSet &expected) {
  std::set<ssize_t> set;
  for (ssize_t t : expected.toList())
    set.insert(t);
  set.erase(MtParser::SEMI); // optional everywhere; never worth mentioning
  auto takeGroup = [&](std::initializer_list<ssize_t> group) {
    for (ssize_t t : group)
      if (!set.count(t))
        return false;
    for (ssize_t t : group)
      set.erase(t);
    return true;
  };
  std::vector<std::string> groups;
  if (takeGroup({MtParser::MINUS, MtParser::LPAREN, MtParser::LBRACK,
                 MtParser::NUMBER, MtParser::STRING, MtParser::TRUE,
                 MtParser::FALSE, MtParser::ID}))
    groups.push_back("an expression");
  if (takeGroup({MtParser::PLUS, MtParser::MINUS, MtParser::STAR,
                 MtParser::SLASH, MtParser::PERCENT, MtParser::AT,
                 MtParser::POW}))
    groups.push_back("an operator");
  if (takeGroup({MtParser::ID, MtParser::RETURN, MtParser::REPEAT}))
    groups.push_back("a statement");
  if (takeGroup({MtParser::F32, MtParser::BF16, MtParser::I32}))
    groups.push_back("a dtype");

  std::vector<std::string> items;
  for (ssize_t t : set) {
    switch (t) {
    case -1: // Token::EOF
      items.push_back("end of file");
      break;
    case MtParser::ID:
      items.push_back("a name");
      break;
    case MtParser::NUMBER:
      items.push_back("a number");
      break;
    case MtParser::STRING:
      items.push_back("a string");
      break;
    default: {
      std::string lit = vocab.getLiteralName(t);
      items.push_back(lit.empty() ? vocab.getDisplayName(t) : lit);
    }
    }
  }
  items.insert(items.end(), groups.begin(), groups.end());
  if (items.empty() || items.size() > 6)
    return "";
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += i + 1 == items.size() ? " or " : ", ";
    out += items[i];
  }
  return out;
}

/// ANTLR's recovery (single-token insertion/deletion, resynchronisation) with
/// messages worded for people, and a line-based recovery for the item lists
/// of blocks (see sync).
class FriendlyErrorStrategy : public antlr4::DefaultErrorStrategy {
public:
  explicit FriendlyErrorStrategy(Reporter &reporter) : reporter(reporter) {}

  /// At the item loop of a block (`{ item* }`), an unexpected token starts a
  /// skip over the rest of the bad item: tokens are dropped, bracketed groups
  /// as a whole, up to the first token on a later line that can start an item
  /// or the `}` that closes the block. ANTLR's default would leave the block
  /// and let its `}` close an outer one, which cascades into bogus errors.
  void sync(antlr4::Parser *p) override {
    antlr4::ParserRuleContext *ctx = p->getContext();
    if (inErrorRecoveryMode(p) || !isBlockContext(ctx) ||
        !ctx->getToken(MtParser::LBRACE, 0))
      return DefaultErrorStrategy::sync(p);
    antlr4::atn::ATNState *s = p->getATN().states[p->getState()];
    size_t type = s->getStateType();
    if (type != antlr4::atn::ATNState::STAR_LOOP_ENTRY &&
        type != antlr4::atn::ATNState::STAR_LOOP_BACK)
      return DefaultErrorStrategy::sync(p);
    const antlr4::misc::IntervalSet &next = p->getATN().nextTokens(s);
    size_t la = p->getTokenStream()->LA(1);
    if (next.contains(la) || next.contains(Token::EPSILON))
      return DefaultErrorStrategy::sync(p);

    Token *bad = p->getCurrentToken();
    antlr4::misc::IntervalSet expecting = p->getExpectedTokens();
    beginErrorCondition(p);
    if (isDedented(bad, ctx) &&
        !dynamic_cast<MtParser::ModelDeclContext *>(ctx)) {
      // Indented no deeper than the block's first line: the block most
      // likely lacks its '}'. Leave it and let the enclosing one go on.
      report(p, bad, expecting, /*forceClose=*/true);
      throw antlr4::InputMismatchException(p);
    }
    report(p, bad, expecting);
    skipItem(p, expecting, bad->getLine());
  }

protected:
  void
  reportNoViableAlternative(antlr4::Parser *p,
                            const antlr4::NoViableAltException &e) override {
    Token *t = e.getOffendingToken();
    if (e.getStartToken() == t)
      report(p, t, p->getExpectedTokens());
    else
      reporter.error(t, "unexpected " + describeToken(t));
  }

  void reportInputMismatch(antlr4::Parser *p,
                           const antlr4::InputMismatchException &e) override {
    report(p, e.getOffendingToken(), e.getExpectedTokens());
  }

  void
  reportFailedPredicate(antlr4::Parser *p,
                        const antlr4::FailedPredicateException &e) override {
    reporter.error(e.getOffendingToken(),
                   "unexpected " + describeToken(e.getOffendingToken()));
  }

  void reportUnwantedToken(antlr4::Parser *p) override {
    if (inErrorRecoveryMode(p))
      return;
    beginErrorCondition(p);
    report(p, p->getCurrentToken(), getExpectedTokens(p));
  }

  void reportMissingToken(antlr4::Parser *p) override {
    if (inErrorRecoveryMode(p))
      return;
    beginErrorCondition(p);
    report(p, p->getCurrentToken(), getExpectedTokens(p));
  }

private:
  /// True when \p t starts a line no deeper than the first line of \p block.
  static bool isDedented(Token *t, antlr4::ParserRuleContext *block) {
    Token *start = block->getStart();
    return t->getType() != Token::EOF && start &&
           t->getCharPositionInLine() <= start->getCharPositionInLine();
  }

  static void skipItem(antlr4::Parser *p,
                       const antlr4::misc::IntervalSet &expecting,
                       size_t errorLine) {
    antlr4::TokenStream *in = p->getTokenStream();
    std::vector<size_t> open; // bracket token types opened while skipping
    for (;;) {
      Token *t = in->LT(1);
      size_t type = t->getType();
      if (type == Token::EOF)
        return;
      if (open.empty() && t->getLine() > errorLine && expecting.contains(type))
        return;
      if (type == MtParser::RBRACE) {
        // Close groups up to the matching `{`; with none, it closes the block.
        auto brace = std::find(open.rbegin(), open.rend(), MtParser::LBRACE);
        if (brace == open.rend())
          return;
        open.erase(std::prev(brace.base()), open.end());
      } else if (type == MtParser::LPAREN || type == MtParser::LBRACK ||
                 type == MtParser::LBRACE) {
        open.push_back(type);
      } else if ((type == MtParser::RPAREN && !open.empty() &&
                  open.back() == MtParser::LPAREN) ||
                 (type == MtParser::RBRACK && !open.empty() &&
                  open.back() == MtParser::LBRACK)) {
        open.pop_back();
      }
      p->consume();
    }
  }

  void report(antlr4::Parser *p, Token *t,
              const antlr4::misc::IntervalSet &expected,
              bool forceClose = false) {
    const antlr4::dfa::Vocabulary &vocab = p->getVocabulary();
    antlr4::ParserRuleContext *ctx = p->getContext();
    std::string unexpected = "unexpected " + describeToken(t);

    // `layer Block 4 {`: the `x` is missing.
    if (dynamic_cast<MtParser::XKwContext *>(ctx)) {
      auto *owner = dynamic_cast<antlr4::ParserRuleContext *>(ctx->parent);
      std::string what = owner ? describeBlock(owner) : "layer";
      reporter.error(t, unexpected + "; expected 'x COUNT' after the name of " +
                            what);
      return;
    }

    // A second model.
    if (t->getType() == MtParser::MODEL && expected.contains(Token::EOF)) {
      reporter.error(t, "a file holds exactly one model");
      return;
    }

    // Items of a block whose closing '}' is the only thing that may follow.
    Token *lbrace = nullptr;
    antlr4::ParserRuleContext *block = enclosingBlock(ctx, &lbrace);
    std::string list = describeExpected(vocab, expected);
    bool atItemLevel =
        block &&
        (block == ctx || dynamic_cast<MtParser::ModelItemContext *>(ctx) ||
         dynamic_cast<MtParser::StmtContext *>(ctx));
    bool eofInBlock = block && t->getType() == Token::EOF &&
                      expected.contains(static_cast<size_t>(MtParser::RBRACE));
    if (block && (list == "'}'" || eofInBlock || forceClose)) {
      std::string what = describeBlock(block);
      auto *layer = dynamic_cast<MtParser::LayerDeclContext *>(block);
      auto *expert = dynamic_cast<MtParser::ExpertDeclContext *>(block);
      bool afterForward =
          (layer && layer->forwardDecl()) || (expert && expert->forwardDecl());
      // A `forward` indented like the layer itself most likely belongs to
      // the model, after a missing '}'; one indented deeper is a duplicate.
      bool dedented = isDedented(t, block);
      std::string message;
      if (afterForward && t->getType() == MtParser::FORWARD && !dedented)
        message = "duplicate forward in " + what + "; expected '}' to close it";
      else if (afterForward && !dedented)
        message = unexpected + " after the forward of " + what +
                  "; expected '}' to close it";
      else
        message = unexpected + "; expected '}' to close " + what;
      reporter.error(t, message);
      reporter.note(lbrace, "to match this '{'");
      return;
    }
    std::string message = unexpected;
    if (atItemLevel && t->getType() != Token::EOF)
      message += " in " + describeBlock(block);
    if (!list.empty())
      message += "; expected " + list;
    reporter.error(t, message);
  }

  Reporter &reporter;
};

//===----------------------------------------------------------------------===//
// Checks before parsing
//===----------------------------------------------------------------------===//

/// Reports malformed tokens; returns false when there were any.
bool checkTokens(const std::vector<Token *> &tokens, Reporter &reporter) {
  bool ok = true;
  for (Token *t : tokens) {
    switch (t->getType()) {
    case MtLexer::BAD_NUMBER:
      reporter.error(t, "invalid number '" + clip(t->getText()) + "'");
      break;
    case MtLexer::UNTERMINATED_STRING:
      reporter.error(t, "unterminated string");
      break;
    case MtLexer::UNTERMINATED_COMMENT:
      reporter.error(t, "unterminated block comment");
      break;
    case MtLexer::UNKNOWN_CHAR:
      reporter.error(t, "unexpected character " + describeChar(t->getText()));
      break;
    default:
      continue;
    }
    ok = false;
  }
  return ok;
}

/// Bounds the depth of the parse and of the AST, so that the parser and every
/// recursive pass after it (AST building, Sema, printing, even destroying the
/// tree) stay far from the stack limit. Every open bracket counts one level,
/// and so does every operator of the expression at that bracket level: unary
/// `-` and `**` recurse in the grammar, and a left-associative chain like
/// `a + a + ... + a` becomes an AST as deep as it is long. A `,`, `=`, `;`,
/// `{` or keyword ends the expression. Reports the first token past
/// kMaxNesting; returns false then.
bool checkNesting(const std::vector<Token *> &tokens, Reporter &reporter) {
  std::vector<unsigned> chains{0}; // per open bracket: operators so far
  unsigned depth = 0;              // brackets + sum of chains
  auto deeper = [&](Token *t) {
    ++depth;
    if (depth <= kMaxNesting)
      return true;
    reporter.error(t, "nesting too deep: more than " +
                          std::to_string(kMaxNesting) +
                          " levels of brackets and operators");
    return false;
  };
  auto endExpression = [&] {
    depth -= chains.back();
    chains.back() = 0;
  };
  for (Token *t : tokens) {
    switch (t->getType()) {
    case MtLexer::LBRACE:
      endExpression();
      [[fallthrough]];
    case MtLexer::LPAREN:
    case MtLexer::LBRACK:
      chains.push_back(0);
      if (!deeper(t))
        return false;
      break;
    case MtLexer::RPAREN:
    case MtLexer::RBRACK:
    case MtLexer::RBRACE:
      if (chains.size() > 1) {
        depth -= 1 + chains.back();
        chains.pop_back();
      }
      break;
    case MtLexer::PLUS:
    case MtLexer::MINUS:
    case MtLexer::STAR:
    case MtLexer::SLASH:
    case MtLexer::PERCENT:
    case MtLexer::AT:
    case MtLexer::POW:
      ++chains.back();
      if (!deeper(t))
        return false;
      break;
    case MtLexer::ID:
    case MtLexer::NUMBER:
    case MtLexer::STRING:
    case MtLexer::TRUE:
    case MtLexer::FALSE:
    case MtLexer::ARROW:
    case MtLexer::COLON:
      break;
    default:
      endExpression(); // `,`, `=`, `;` or a keyword
      break;
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// AST building
//===----------------------------------------------------------------------===//

SourceLoc locOf(const Token *t) {
  return {static_cast<uint32_t>(t->getLine()),
          static_cast<uint32_t>(t->getCharPositionInLine() + 1)};
}

SourceLoc locOf(antlr4::tree::TerminalNode *node) {
  return locOf(node->getSymbol());
}

std::unique_ptr<ast::Expr> makeExpr(ast::Expr::Kind kind, SourceLoc loc) {
  auto e = std::make_unique<ast::Expr>();
  e->kind = kind;
  e->loc = loc;
  return e;
}

/// Builds the AST from a parse tree without syntax errors.
class Builder {
public:
  explicit Builder(Reporter &reporter) : reporter(reporter) {}

  ast::Model model(MtParser::ModelDeclContext *ctx) {
    ast::Model m;
    m.name = ctx->name->getText();
    m.loc = locOf(ctx->name);
    SourceLoc configLoc;
    bool hasForward = false;
    for (MtParser::ModelItemContext *item : ctx->modelItem())
      hasForward |= item->forwardDecl() != nullptr;
    if (!hasForward)
      reporter.error(m.loc, "model '" + m.name + "' has no forward");
    for (MtParser::ModelItemContext *item : ctx->modelItem()) {
      if (auto *c = item->configBlock()) {
        SourceLoc loc = locOf(c->CONFIG());
        if (configLoc.line) {
          reporter.error(loc, "duplicate config block");
          reporter.note(configLoc, "the first config block is here");
        }
        configLoc = loc;
        for (MtParser::ConfigEntryContext *entry : c->configEntry())
          m.config.push_back({entry->name->getText(), locOf(entry->name),
                              expr(entry->expr())});
      } else if (auto *p = item->paramDecl()) {
        m.params.push_back(param(p));
      } else if (auto *l = item->layerDecl()) {
        m.layers.push_back(layer(l));
      } else if (auto *f = item->forwardDecl()) {
        ast::ForwardDecl fwd = forward(f);
        if (m.forward) {
          reporter.error(fwd.loc,
                         "duplicate forward in model '" + m.name + "'");
          reporter.note(m.forward->loc, "the first forward is here");
          continue;
        }
        m.forward = std::move(fwd);
      }
    }
    return m;
  }

private:
  /// Checks the `x` of `layer NAME x COUNT`.
  void checkX(MtParser::XKwContext *x, const std::string &what,
              const std::string &name) {
    Token *t = x->ID()->getSymbol();
    if (t->getText() != "x")
      reporter.error(t, "expected 'x' after " + what + " name '" + name +
                            "', found '" + t->getText() + "' (" + what +
                            " NAME x COUNT)");
  }

  ast::LayerDecl layer(MtParser::LayerDeclContext *ctx) {
    ast::LayerDecl l;
    l.name = ctx->name->getText();
    l.loc = locOf(ctx->name);
    checkX(ctx->xKw(), "layer", l.name);
    if (!ctx->forwardDecl())
      reporter.error(l.loc, "layer '" + l.name + "' has no forward");
    l.count = expr(ctx->count);
    for (MtParser::ParamDeclContext *p : ctx->paramDecl())
      l.params.push_back(param(p));
    for (MtParser::ExpertDeclContext *e : ctx->expertDecl())
      l.experts.push_back(expert(e));
    if (ctx->forwardDecl())
      l.forward = forward(ctx->forwardDecl());
    return l;
  }

  ast::ExpertDecl expert(MtParser::ExpertDeclContext *ctx) {
    ast::ExpertDecl e;
    e.name = ctx->name->getText();
    e.loc = locOf(ctx->name);
    checkX(ctx->xKw(), "expert", e.name);
    if (!ctx->forwardDecl())
      reporter.error(e.loc, "expert '" + e.name + "' has no forward");
    e.count = expr(ctx->count);
    for (MtParser::ParamDeclContext *p : ctx->paramDecl())
      e.params.push_back(param(p));
    if (ctx->forwardDecl())
      e.forward = forward(ctx->forwardDecl());
    return e;
  }

  ast::ParamDecl param(MtParser::ParamDeclContext *ctx) {
    ast::ParamDecl p;
    p.name = ctx->name->getText();
    p.loc = locOf(ctx->name);
    p.shape = shape(ctx->shape());
    MtParser::InitContext *init = ctx->init();
    std::string name = init->name->getText();
    p.initLoc = locOf(init->name);
    for (MtParser::ExprContext *e : init->expr())
      p.initArgs.push_back(expr(e));
    struct InitInfo {
      const char *name;
      ast::InitKind kind;
      size_t arity;
    };
    static const InitInfo kInits[] = {
        {"zeros", ast::InitKind::Zeros, 0},
        {"ones", ast::InitKind::Ones, 0},
        {"normal", ast::InitKind::Normal, 1},
        {"scaled_normal", ast::InitKind::ScaledNormal, 1},
        {"uniform", ast::InitKind::Uniform, 2},
    };
    const InitInfo *info = nullptr;
    for (const InitInfo &candidate : kInits)
      if (name == candidate.name)
        info = &candidate;
    if (!info) {
      reporter.error(p.initLoc, "unknown initializer '" + name +
                                    "'; expected zeros, ones, normal(std), "
                                    "scaled_normal(std) or uniform(lo, hi)");
      return p;
    }
    p.init = info->kind;
    if (p.initArgs.size() != info->arity)
      reporter.error(p.initLoc,
                     "initializer '" + name + "' takes " +
                         std::to_string(info->arity) +
                         (info->arity == 1 ? " argument" : " arguments") +
                         ", got " + std::to_string(p.initArgs.size()));
    return p;
  }

  ast::ShapeDecl shape(MtParser::ShapeContext *ctx) {
    ast::ShapeDecl s;
    s.loc = locOf(ctx->LBRACK());
    for (MtParser::ExprContext *e : ctx->expr())
      s.dims.push_back(expr(e));
    if (MtParser::DtypeContext *d = ctx->dtype()) {
      s.dtypeLoc = locOf(d->getStart());
      s.dtype = d->F32() ? DType::F32 : d->BF16() ? DType::BF16 : DType::I32;
    }
    return s;
  }

  ast::ForwardDecl forward(MtParser::ForwardDeclContext *ctx) {
    ast::ForwardDecl f;
    f.loc = locOf(ctx->FORWARD());
    for (MtParser::ArgDeclContext *a : ctx->argDecl())
      f.args.push_back({a->name->getText(), locOf(a->name), shape(a->shape())});
    f.result = shape(ctx->shape());
    for (MtParser::StmtContext *s : ctx->stmt())
      f.body.push_back(stmt(s));
    return f;
  }

  ast::StmtPtr stmt(MtParser::StmtContext *ctx) {
    auto s = std::make_unique<ast::Stmt>();
    if (auto *a = ctx->assignStmt()) {
      s->kind = ast::Stmt::Kind::Assign;
      for (Token *t : a->targets) {
        s->names.push_back(t->getText());
        s->nameLocs.push_back(locOf(t));
      }
      s->loc = s->nameLocs.front();
      s->value = expr(a->expr());
    } else if (auto *r = ctx->returnStmt()) {
      s->kind = ast::Stmt::Kind::Return;
      s->loc = locOf(r->RETURN());
      s->value = expr(r->expr());
    } else {
      auto *rep = ctx->repeatStmt();
      s->kind = ast::Stmt::Kind::Repeat;
      s->loc = locOf(rep->REPEAT());
      s->value = expr(rep->expr());
      for (MtParser::StmtContext *inner : rep->stmt())
        s->body.push_back(stmt(inner));
    }
    return s;
  }

  static char opChar(const Token *t) {
    return t->getType() == MtParser::POW ? '^' : t->getText()[0];
  }

  static ast::ExprPtr binary(const Token *op, ast::ExprPtr lhs,
                             ast::ExprPtr rhs) {
    auto e = makeExpr(ast::Expr::Kind::Binary, locOf(op));
    e->op = opChar(op);
    e->operands.push_back(std::move(lhs));
    e->operands.push_back(std::move(rhs));
    return e;
  }

  ast::ExprPtr expr(MtParser::ExprContext *ctx) {
    ast::ExprPtr e = mulExpr(ctx->operands[0]);
    for (size_t i = 0; i < ctx->ops.size(); ++i)
      e = binary(ctx->ops[i], std::move(e), mulExpr(ctx->operands[i + 1]));
    return e;
  }

  ast::ExprPtr mulExpr(MtParser::MulExprContext *ctx) {
    ast::ExprPtr e = unaryExpr(ctx->operands[0]);
    for (size_t i = 0; i < ctx->ops.size(); ++i)
      e = binary(ctx->ops[i], std::move(e), unaryExpr(ctx->operands[i + 1]));
    return e;
  }

  ast::ExprPtr unaryExpr(MtParser::UnaryExprContext *ctx) {
    if (antlr4::tree::TerminalNode *minus = ctx->MINUS()) {
      auto e = makeExpr(ast::Expr::Kind::Unary, locOf(minus));
      e->op = '-';
      e->operands.push_back(unaryExpr(ctx->unaryExpr()));
      return e;
    }
    MtParser::PowExprContext *pow = ctx->powExpr();
    ast::ExprPtr base = primary(pow->primary());
    if (!pow->POW())
      return base;
    return binary(pow->POW()->getSymbol(), std::move(base),
                  unaryExpr(pow->unaryExpr()));
  }

  ast::ExprPtr primary(MtParser::PrimaryContext *ctx) {
    using Kind = ast::Expr::Kind;
    if (auto *n = dynamic_cast<MtParser::NumberExprContext *>(ctx))
      return number(n->NUMBER()->getSymbol());
    if (auto *s = dynamic_cast<MtParser::StringExprContext *>(ctx)) {
      auto e = makeExpr(Kind::String, locOf(s->STRING()));
      e->text = unquote(s->STRING()->getText());
      return e;
    }
    if (auto *b = dynamic_cast<MtParser::BoolExprContext *>(ctx)) {
      auto e = makeExpr(Kind::Bool, locOf(b->getStart()));
      e->boolean = b->TRUE() != nullptr;
      return e;
    }
    if (auto *n = dynamic_cast<MtParser::NameExprContext *>(ctx)) {
      auto e = makeExpr(Kind::Name, locOf(n->ID()));
      e->text = n->ID()->getText();
      return e;
    }
    if (auto *p = dynamic_cast<MtParser::ParenExprContext *>(ctx))
      return expr(p->expr());
    if (auto *l = dynamic_cast<MtParser::ListExprContext *>(ctx)) {
      auto e = makeExpr(Kind::List, locOf(l->LBRACK()));
      for (MtParser::ExprContext *item : l->expr())
        e->operands.push_back(expr(item));
      return e;
    }
    auto *c = dynamic_cast<MtParser::CallExprContext *>(ctx);
    auto e = makeExpr(Kind::Call, locOf(c->callee));
    e->text = c->callee->getText();
    if (c->index)
      e->index = expr(c->index);
    if (MtParser::CallArgsContext *args = c->callArgs()) {
      for (MtParser::ArgContext *a : args->arg()) {
        if (a->name) {
          std::string name = a->name->getText();
          for (const ast::NamedArg &prev : e->named)
            if (prev.name == name) {
              reporter.error(a->name, "duplicate argument '" + name +
                                          "' in call to '" + e->text + "'");
              reporter.note(prev.loc, "the first one is here");
            }
          e->named.push_back({name, locOf(a->name), expr(a->expr())});
          continue;
        }
        ast::ExprPtr value = expr(a->expr());
        if (!e->named.empty())
          reporter.error(value->loc,
                         "positional argument after named argument '" +
                             e->named.back().name + "' in call to '" + e->text +
                             "'");
        e->operands.push_back(std::move(value));
      }
    }
    return e;
  }

  ast::ExprPtr number(const Token *t) {
    auto e = makeExpr(ast::Expr::Kind::Number, locOf(t));
    std::string text = t->getText();
    e->isInt = text.find_first_not_of("0123456789") == std::string::npos;
    double value = 0;
    auto [ptr, ec] =
        std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc::result_out_of_range) {
      // Underflow (`1e-400`) rounds to zero; overflow is an error.
      size_t exp = text.find_first_of("eE");
      bool underflow = exp != std::string::npos && exp + 1 < text.size() &&
                       text[exp + 1] == '-';
      if (!underflow)
        reporter.error(t, "number '" + clip(text) + "' is out of range");
      value = 0;
    } else if (ec != std::errc() || ptr != text.data() + text.size()) {
      reporter.error(t, "invalid number '" + clip(text) + "'");
    }
    e->number = value;
    return e;
  }

  /// Strips the quotes and resolves the escapes \" \\ \n \t.
  static std::string unquote(const std::string &s) {
    std::string out;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      char c = s[i];
      if (c == '\\' && i + 2 < s.size()) {
        char n = s[++i];
        out += n == 'n' ? '\n' : n == 't' ? '\t' : n;
        continue;
      }
      out += c;
    }
    return out;
  }

  Reporter &reporter;
};

std::optional<ast::Model> parseImpl(DiagnosticEngine &diags) {
  const std::string &text = diags.source();
  if (text.size() > kMaxSourceBytes) {
    diags.error({}, "file is too large (" + std::to_string(text.size()) +
                        " bytes; the limit is " +
                        std::to_string(kMaxSourceBytes) + ")");
    return std::nullopt;
  }
  size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    diags.error(locOfOffset(text, nul),
                "file contains a NUL byte; is it a binary file?");
    return std::nullopt;
  }
  size_t bad = findInvalidUtf8(text);
  if (bad != std::string::npos) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02X",
                  static_cast<unsigned char>(text[bad]));
    diags.error(locOfOffset(text, bad),
                std::string("invalid UTF-8 (byte ") + buf +
                    "); source files must be UTF-8 text");
    return std::nullopt;
  }

  antlr4::ANTLRInputStream input(text);
  MtLexer lexer(&input);
  antlr4::CommonTokenStream tokens(&lexer);
  Reporter reporter(diags, tokens);
  ForwardingListener listener(reporter);
  lexer.removeErrorListeners();
  lexer.addErrorListener(&listener);
  tokens.fill();

  unsigned before = diags.errorCount();
  if (!checkTokens(tokens.getTokens(), reporter))
    return std::nullopt;
  if (!checkNesting(tokens.getTokens(), reporter))
    return std::nullopt;

  MtParser parser(&tokens);
  parser.removeErrorListeners();
  parser.addErrorListener(&listener);
  parser.setErrorHandler(std::make_shared<FriendlyErrorStrategy>(reporter));
  MtParser::FileContext *tree = parser.file();
  if (diags.errorCount() != before)
    return std::nullopt;

  Builder builder(reporter);
  ast::Model model = builder.model(tree->modelDecl());
  if (diags.errorCount() != before)
    return std::nullopt;
  return model;
}

} // namespace

std::optional<ast::Model> parseModel(DiagnosticEngine &diags) {
  try {
    return parseImpl(diags);
  } catch (const TooManyErrors &) {
    return std::nullopt;
  } catch (const std::exception &e) {
    diags.error({}, std::string("internal error in the parser: ") + e.what());
  } catch (...) {
    diags.error({}, "internal error in the parser");
  }
  return std::nullopt;
}

bool parseAndCheck(DiagnosticEngine &diags, CheckedModel &out) {
  std::optional<ast::Model> model = parseModel(diags);
  if (!model)
    return false;
  return checkModel(*model, diags, out);
}

} // namespace mtc
