//===- ParserTest.cpp - Unit tests of the .mt parser ----------------------===//
//
// Part of mtc. Checks the AST that parseModel builds (node kinds, locations,
// precedence) and the syntax errors it reports.
//
//===----------------------------------------------------------------------===//

#include "frontend/Parser.h"
#include "frontend/ASTPrinter.h"

#include "test/unit-frontend/TestModels.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace mtc;
using Kind = ast::Expr::Kind;

namespace {

using mtc::test::kTinyLlama;

struct ParseResult {
  std::optional<ast::Model> model;
  std::string diags;
  unsigned errors = 0;
};

ParseResult parse(const std::string &source, const char *file = "test.mt") {
  std::ostringstream os;
  DiagnosticEngine diags(file, source, os);
  ParseResult r;
  r.model = parseModel(diags);
  r.errors = diags.errorCount();
  r.diags = os.str();
  return r;
}

/// Wraps \p body as the body of a model forward.
std::string inForward(const std::string &body) {
  return "model M {\n  forward(x: [B, S, 4]) -> [B, S, 4] {\n" + body +
         "\n  }\n}\n";
}

/// Parses `y = EXPR` in a forward and returns the printed expression.
std::string exprOf(const std::string &expr) {
  ParseResult r = parse(inForward("y = " + expr + "\nreturn y"));
  if (!r.model)
    return "error: " + r.diags;
  return formatExpr(*r.model->forward->body.front()->value);
}

::testing::AssertionResult hasLoc(SourceLoc loc, uint32_t line, uint32_t col) {
  if (loc.line == line && loc.col == col)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "at " << loc.line << ":" << loc.col
                                       << ", expected " << line << ":" << col;
}

TEST(ParserTest, LanguageExample) {
  ParseResult r = parse(kTinyLlama);
  ASSERT_TRUE(r.model) << r.diags;
  EXPECT_EQ(r.errors, 0u);
  const ast::Model &m = *r.model;
  EXPECT_EQ(m.name, "TinyLlama");
  EXPECT_TRUE(hasLoc(m.loc, 1, 7));

  // Config entries, several per line.
  ASSERT_EQ(m.config.size(), 9u);
  EXPECT_EQ(m.config[0].name, "vocab");
  EXPECT_TRUE(hasLoc(m.config[0].loc, 3, 5));
  EXPECT_EQ(m.config[1].name, "dim");
  EXPECT_TRUE(hasLoc(m.config[1].loc, 3, 18));
  EXPECT_EQ(m.config[0].value->kind, Kind::Number);
  EXPECT_TRUE(m.config[0].value->isInt);
  EXPECT_EQ(m.config[0].value->number, 256);
  EXPECT_EQ(m.config[5].name, "head_dim");
  EXPECT_EQ(formatExpr(*m.config[5].value), "(dim / n_heads)");
  EXPECT_EQ(m.config[7].name, "theta");
  EXPECT_FALSE(m.config[7].value->isInt);
  EXPECT_EQ(m.config[7].value->number, 10000.0);
  EXPECT_EQ(m.config[8].name, "eps");
  EXPECT_FALSE(m.config[8].value->isInt);
  EXPECT_DOUBLE_EQ(m.config[8].value->number, 1e-5);

  // Parameters.
  ASSERT_EQ(m.params.size(), 2u);
  EXPECT_EQ(m.params[0].name, "tok_emb");
  EXPECT_TRUE(hasLoc(m.params[0].loc, 6, 9));
  EXPECT_EQ(m.params[0].init, ast::InitKind::Normal);
  EXPECT_TRUE(hasLoc(m.params[0].initLoc, 6, 33));
  ASSERT_EQ(m.params[0].initArgs.size(), 1u);
  EXPECT_DOUBLE_EQ(m.params[0].initArgs[0]->number, 0.02);
  EXPECT_TRUE(hasLoc(m.params[0].shape.loc, 6, 18));
  ASSERT_EQ(m.params[0].shape.dims.size(), 2u);
  EXPECT_FALSE(m.params[0].shape.dtype);
  EXPECT_EQ(m.params[1].name, "final_norm");
  EXPECT_EQ(m.params[1].init, ast::InitKind::Ones);
  EXPECT_TRUE(m.params[1].initArgs.empty());

  // The layer.
  ASSERT_EQ(m.layers.size(), 1u);
  const ast::LayerDecl &l = m.layers[0];
  EXPECT_EQ(l.name, "Block");
  EXPECT_TRUE(hasLoc(l.loc, 8, 9));
  EXPECT_EQ(l.count->kind, Kind::Name);
  EXPECT_EQ(l.count->text, "n_layers");
  EXPECT_TRUE(hasLoc(l.count->loc, 8, 17));
  ASSERT_EQ(l.params.size(), 9u);
  EXPECT_EQ(l.params[4].name, "wo");
  EXPECT_EQ(l.params[4].init, ast::InitKind::ScaledNormal);
  EXPECT_EQ(formatExpr(*l.params[1].shape.dims[1]), "(n_heads * head_dim)");
  EXPECT_TRUE(l.experts.empty());
  ASSERT_TRUE(l.forward);
  EXPECT_TRUE(hasLoc(l.forward->loc, 19, 5));
  ASSERT_EQ(l.forward->args.size(), 1u);
  EXPECT_EQ(l.forward->args[0].name, "x");
  EXPECT_TRUE(hasLoc(l.forward->args[0].loc, 19, 13));
  EXPECT_EQ(l.forward->result.dims.size(), 3u);
  ASSERT_EQ(l.forward->body.size(), 7u);
  const ast::Stmt &h = *l.forward->body[0];
  EXPECT_EQ(h.kind, ast::Stmt::Kind::Assign);
  EXPECT_EQ(h.names, std::vector<std::string>{"h"});
  EXPECT_TRUE(hasLoc(h.loc, 20, 7));
  EXPECT_TRUE(hasLoc(h.value->loc, 20, 11));
  EXPECT_EQ(h.value->kind, Kind::Call);
  EXPECT_EQ(h.value->text, "rmsnorm");
  EXPECT_EQ(h.value->operands.size(), 3u);
  const ast::Stmt &res = *l.forward->body[4];
  EXPECT_EQ(formatExpr(*res.value),
            "(x + (reshape(attention(q, k, v, causal = true), [B, S, dim]) @ "
            "wo))");
  // `+` at column 13 of line 24.
  EXPECT_TRUE(hasLoc(res.value->loc, 24, 13));
  const ast::Expr &attn = *res.value->operands[1]->operands[0]->operands[0];
  ASSERT_EQ(attn.named.size(), 1u);
  EXPECT_EQ(attn.named[0].name, "causal");
  EXPECT_TRUE(hasLoc(attn.named[0].loc, 24, 42));
  EXPECT_EQ(attn.named[0].value->kind, Kind::Bool);
  EXPECT_TRUE(attn.named[0].value->boolean);
  EXPECT_EQ(l.forward->body[6]->kind, ast::Stmt::Kind::Return);
  EXPECT_TRUE(hasLoc(l.forward->body[6]->loc, 26, 7));

  // The model forward.
  ASSERT_TRUE(m.forward);
  const ast::ForwardDecl &f = *m.forward;
  ASSERT_EQ(f.args.size(), 2u);
  ASSERT_TRUE(f.args[0].shape.dtype);
  EXPECT_EQ(*f.args[0].shape.dtype, DType::I32);
  EXPECT_TRUE(hasLoc(f.args[0].shape.dtypeLoc, 32, 26));
  EXPECT_TRUE(f.result.dims.empty());
  ASSERT_EQ(f.body.size(), 5u);
  const ast::Expr &apply = *f.body[1]->value;
  EXPECT_EQ(apply.kind, Kind::Call);
  EXPECT_EQ(apply.text, "Block");
  EXPECT_FALSE(apply.index);
  const ast::Expr &ce = *f.body[4]->value;
  ASSERT_EQ(ce.named.size(), 1u);
  EXPECT_EQ(ce.named[0].name, "ignore_index");
  EXPECT_EQ(ce.named[0].value->kind, Kind::Unary);
  EXPECT_EQ(ce.named[0].value->op, '-');
}

TEST(ParserTest, PrintsTheExample) {
  ParseResult r = parse(kTinyLlama);
  ASSERT_TRUE(r.model) << r.diags;
  std::ostringstream os;
  printAST(*r.model, os);
  std::string out = os.str();
  EXPECT_NE(out.find("Model TinyLlama @1:7\n"), std::string::npos) << out;
  EXPECT_NE(out.find("    theta = 10000.0 @4:42\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  Layer Block x n_layers @8:9\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("    Forward(x: [B, S, dim]) -> [B, S, dim] @19:5\n"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find(
          "  Forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] @32:3"),
      std::string::npos)
      << out;
  // Items in source order: final_norm comes after the layer.
  EXPECT_LT(out.find("Layer Block"), out.find("Param final_norm"));
}

TEST(ParserTest, Precedence) {
  EXPECT_EQ(exprOf("a + b * c"), "(a + (b * c))");
  EXPECT_EQ(exprOf("a @ b + c"), "((a @ b) + c)");
  EXPECT_EQ(exprOf("a - b - c"), "((a - b) - c)");
  EXPECT_EQ(exprOf("a * b @ c / d % e"), "((((a * b) @ c) / d) % e)");
  // `**` binds tighter than unary minus on its left (as in Python) and is
  // right-associative; its right operand may be negative.
  EXPECT_EQ(exprOf("-a ** 2"), "(-(a ** 2))");
  EXPECT_EQ(exprOf("a ** b ** c"), "(a ** (b ** c))");
  EXPECT_EQ(exprOf("2 ** -1"), "(2 ** (-1))");
  EXPECT_EQ(exprOf("-a * b"), "((-a) * b)");
  EXPECT_EQ(exprOf("- - a"), "(-(-a))");
  EXPECT_EQ(exprOf("(a + b) * c"), "((a + b) * c)");
  EXPECT_EQ(exprOf("a*-b"), "(a * (-b))");
}

TEST(ParserTest, PowerIsCaret) {
  ParseResult r = parse(inForward("y = a ** 2\nreturn y"));
  ASSERT_TRUE(r.model) << r.diags;
  const ast::Expr &e = *r.model->forward->body[0]->value;
  EXPECT_EQ(e.kind, Kind::Binary);
  EXPECT_EQ(e.op, '^');
  EXPECT_TRUE(hasLoc(e.loc, 3, 7));
}

TEST(ParserTest, Literals) {
  EXPECT_EQ(exprOf(".5"), "0.5");
  EXPECT_EQ(exprOf("10000.0"), "10000.0");
  EXPECT_EQ(exprOf("1e-5"), "1e-05");
  EXPECT_EQ(exprOf("688"), "688");
  EXPECT_EQ(exprOf("\"tanh\""), "\"tanh\"");
  EXPECT_EQ(exprOf("[a, b, 3]"), "[a, b, 3]");
  EXPECT_EQ(exprOf("[]"), "[]");
  EXPECT_EQ(exprOf("false"), "false");

  ParseResult r =
      parse(inForward("y = 1e-5\nz = 2.\nw = \"a\\\"b\"\nreturn y"));
  ASSERT_TRUE(r.model) << r.diags;
  const auto &body = r.model->forward->body;
  EXPECT_FALSE(body[0]->value->isInt);
  EXPECT_FALSE(body[1]->value->isInt);
  EXPECT_EQ(body[1]->value->number, 2.0);
  EXPECT_EQ(body[2]->value->kind, Kind::String);
  EXPECT_EQ(body[2]->value->text, "a\"b");
}

TEST(ParserTest, CallsAndLayerApplication) {
  ParseResult r = parse(inForward("y = Block[k + 1](x)\n"
                                  "z = gelu(x, approximate = \"tanh\")\n"
                                  "a, b, c = split(x, [1, 2, 1], -1)\n"
                                  "return y"));
  ASSERT_TRUE(r.model) << r.diags;
  const auto &body = r.model->forward->body;
  const ast::Expr &apply = *body[0]->value;
  EXPECT_EQ(apply.kind, Kind::Call);
  EXPECT_EQ(apply.text, "Block");
  ASSERT_TRUE(apply.index);
  EXPECT_EQ(formatExpr(*apply.index), "(k + 1)");
  ASSERT_EQ(apply.operands.size(), 1u);
  EXPECT_TRUE(hasLoc(apply.loc, 3, 5));

  const ast::Expr &gelu = *body[1]->value;
  EXPECT_EQ(gelu.operands.size(), 1u);
  ASSERT_EQ(gelu.named.size(), 1u);
  EXPECT_EQ(gelu.named[0].name, "approximate");
  EXPECT_EQ(gelu.named[0].value->text, "tanh");

  const ast::Stmt &split = *body[2];
  EXPECT_EQ(split.names, (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(split.nameLocs.size(), 3u);
  EXPECT_TRUE(hasLoc(split.nameLocs[2], 5, 7));
  EXPECT_EQ(split.value->operands[1]->kind, Kind::List);
}

TEST(ParserTest, RepeatAndSeparators) {
  ParseResult r = parse(
      "model M { config { n = 4; ; } layer L x n { forward(x: [B, S, 4]) -> "
      "[B, S, 4] { return x } }; forward(x: [B, S, 4]) -> [B, S, 4] { repeat "
      "n / 2 { x = L[1](x); x = L[1](x) } ; return x } }");
  ASSERT_TRUE(r.model) << r.diags;
  const auto &body = r.model->forward->body;
  ASSERT_EQ(body.size(), 2u);
  EXPECT_EQ(body[0]->kind, ast::Stmt::Kind::Repeat);
  EXPECT_EQ(formatExpr(*body[0]->value), "(n / 2)");
  ASSERT_EQ(body[0]->body.size(), 2u);
  EXPECT_EQ(body[0]->body[1]->value->text, "L");
}

TEST(ParserTest, ExpertsAndDtypes) {
  ParseResult r = parse(R"mt(model M {
  config { dim = 4; n_exp = 8 }
  layer Moe x 2 {
    param router: [dim, n_exp] bf16 = uniform(-0.1, 0.1)
    expert E x n_exp {
      param w: [dim, dim] = zeros
      forward(t: [T, dim]) -> [T, dim] { return t @ w }
    }
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return moe(x, router, E, top_k = 2, normalize = true, aux_loss = 0.01)
    }
  }
  forward(x: [B, S, dim]) -> [B, S, dim] { return Moe(x) }
}
)mt");
  ASSERT_TRUE(r.model) << r.diags;
  const ast::LayerDecl &l = r.model->layers[0];
  ASSERT_EQ(l.params.size(), 1u);
  EXPECT_EQ(l.params[0].init, ast::InitKind::Uniform);
  EXPECT_EQ(l.params[0].initArgs.size(), 2u);
  ASSERT_TRUE(l.params[0].shape.dtype);
  EXPECT_EQ(*l.params[0].shape.dtype, DType::BF16);
  EXPECT_TRUE(hasLoc(l.params[0].shape.dtypeLoc, 4, 32));
  ASSERT_EQ(l.experts.size(), 1u);
  EXPECT_EQ(l.experts[0].name, "E");
  EXPECT_TRUE(hasLoc(l.experts[0].loc, 5, 12));
  EXPECT_EQ(l.experts[0].count->text, "n_exp");
  ASSERT_TRUE(l.experts[0].forward);
  EXPECT_EQ(l.experts[0].forward->args[0].name, "t");
}

TEST(ParserTest, XIsAnOrdinaryName) {
  ParseResult r = parse(
      "model M { layer x x x { forward(x: [B]) -> [B] { x = x; return x } }\n"
      "forward(x: [B]) -> [B] { return x(x) } }");
  ASSERT_TRUE(r.model) << r.diags;
  EXPECT_EQ(r.model->layers[0].name, "x");
  EXPECT_EQ(r.model->layers[0].count->text, "x");
}

TEST(ParserTest, CommentsAndCRLF) {
  ParseResult r =
      parse("// line\r\n# hash\r\n/* block\r\n */ model M {\r\n"
            "  forward(x: [B]) -> [B] { return x } /* c */\r\n}\r\n");
  ASSERT_TRUE(r.model) << r.diags;
  EXPECT_TRUE(hasLoc(r.model->loc, 4, 11));
  EXPECT_TRUE(hasLoc(r.model->forward->loc, 5, 3));
}

TEST(ParserTest, ColumnsCountCharacters) {
  // Non-ASCII text in a comment before the token on the same line.
  ParseResult r =
      parse("model M { /* é€ */ forward(x: [B]) -> [B] { return x } }");
  ASSERT_TRUE(r.model) << r.diags;
  EXPECT_TRUE(hasLoc(r.model->forward->loc, 1, 20));
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

/// The first line of the diagnostics.
std::string firstLine(const ParseResult &r) {
  return r.diags.substr(0, r.diags.find('\n'));
}

TEST(ParserErrorTest, EmptyInput) {
  ParseResult r = parse("");
  EXPECT_FALSE(r.model);
  EXPECT_EQ(firstLine(r),
            "test.mt:1:1: error: unexpected end of file; expected 'model'");
  EXPECT_EQ(r.errors, 1u);
}

TEST(ParserErrorTest, MissingClosingBrace) {
  ParseResult r = parse("model M {\n  forward(x: [B]) -> [B] {\n    return x\n"
                        "  }\n");
  EXPECT_FALSE(r.model);
  EXPECT_EQ(firstLine(r), "test.mt:4:4: error: unexpected end of file; "
                          "expected '}' to close model 'M'");
  EXPECT_NE(r.diags.find("test.mt:1:9: note: to match this '{'"),
            std::string::npos)
      << r.diags;
}

TEST(ParserErrorTest, TokenNamesAreLiteral) {
  ParseResult r = parse("model M {\n  param w [4] = ones\n}\n");
  EXPECT_FALSE(r.model);
  EXPECT_EQ(firstLine(r), "test.mt:2:11: error: unexpected '['; expected ':'");
  // No ANTLR token type names anywhere.
  EXPECT_EQ(r.diags.find("COLON"), std::string::npos);
  EXPECT_EQ(r.diags.find("mismatched"), std::string::npos);
}

TEST(ParserErrorTest, ExpectedExpression) {
  ParseResult r = parse(inForward("y = x +\n"));
  EXPECT_FALSE(r.model);
  EXPECT_EQ(firstLine(r),
            "test.mt:5:3: error: unexpected '}'; expected an expression");
}

TEST(ParserErrorTest, LexicalErrors) {
  EXPECT_EQ(firstLine(parse("model M { config { a = 1e } }")),
            "test.mt:1:24: error: invalid number '1e'");
  EXPECT_EQ(firstLine(parse("model M { config { a = 3x } }")),
            "test.mt:1:24: error: invalid number '3x'");
  EXPECT_EQ(firstLine(parse("model M { config { a = $ } }")),
            "test.mt:1:24: error: unexpected character '$'");
  EXPECT_EQ(firstLine(parse("model M { config { a = \"abc } }")),
            "test.mt:1:24: error: unterminated string");
  EXPECT_EQ(firstLine(parse("model M { /* x } ")),
            "test.mt:1:11: error: unterminated block comment");
  EXPECT_EQ(firstLine(parse("model M { config { a = 1e999 } forward(x: [B]) "
                            "-> [B] { return x } }")),
            "test.mt:1:24: error: number '1e999' is out of range");
}

TEST(ParserErrorTest, NulAndInvalidUtf8) {
  ParseResult nul = parse(std::string("model M {\n  \0 }", 14));
  EXPECT_FALSE(nul.model);
  EXPECT_EQ(
      firstLine(nul),
      "test.mt:2:3: error: file contains a NUL byte; is it a binary file?");
  for (const char *bad :
       {"\xff", "\xc0\xaf", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80"}) {
    ParseResult r = parse(std::string("model M { # ") + bad + "\n}");
    EXPECT_FALSE(r.model);
    EXPECT_EQ(r.errors, 1u);
    EXPECT_NE(r.diags.find("test.mt:1:13: error: invalid UTF-8"),
              std::string::npos)
        << r.diags;
  }
}

TEST(ParserErrorTest, DeepNesting) {
  std::string deep(kMaxNesting + 50, '(');
  ParseResult r = parse("model M { config { a = " + deep + "1" +
                        std::string(kMaxNesting + 50, ')') + " } }");
  EXPECT_FALSE(r.model);
  EXPECT_EQ(r.errors, 1u);
  EXPECT_NE(r.diags.find("nesting too deep"), std::string::npos) << r.diags;

  // Unary minus and `**` recurse; long operator chains make deep ASTs.
  for (const char *op : {"-", "2 ** ", "1 + "}) {
    std::string chain;
    for (int i = 0; i < 100000; ++i)
      chain += op;
    ParseResult c = parse("model M { config { a = " + chain + "1 } }");
    EXPECT_FALSE(c.model);
    EXPECT_EQ(c.errors, 1u);
    EXPECT_NE(c.diags.find("nesting too deep"), std::string::npos);
  }

  // Within the limit everything parses.
  std::string ok(150, '(');
  ParseResult fine =
      parse("model M { config { a = " + ok + "1" + std::string(150, ')') +
            " } forward(x: [B]) -> [B] { return x } }");
  EXPECT_TRUE(fine.model) << fine.diags;
}

TEST(ParserErrorTest, StructuralErrors) {
  EXPECT_EQ(
      firstLine(parse("model M {\n  layer Block y 4 {\n    forward(x: [B]) "
                      "-> [B] { return x }\n  }\n  forward(x: [B]) -> [B] "
                      "{ return x }\n}\n")),
      "test.mt:2:15: error: expected 'x' after layer name 'Block', found "
      "'y' (layer NAME x COUNT)");
  EXPECT_EQ(
      firstLine(parse("model M {\n  layer Block x 2 {\n    forward(x: [B]) "
                      "-> [B] { return x }\n    forward(x: [B]) -> [B] { "
                      "return x }\n  }\n}\n")),
      "test.mt:4:5: error: duplicate forward in layer 'Block'; expected "
      "'}' to close it");
  EXPECT_EQ(
      firstLine(parse("model M {\n  config { a = 1 }\n  config { b = 2 }\n"
                      "  forward(x: [B]) -> [B] { return x }\n}\n")),
      "test.mt:3:3: error: duplicate config block");
  EXPECT_EQ(firstLine(parse("model M { param w: [4] = normal }")),
            "test.mt:1:7: error: model 'M' has no forward");
  ParseResult twice = parse("model M { forward(x: [B]) -> [B] { return x } }\n"
                            "model N { }");
  EXPECT_EQ(firstLine(twice),
            "test.mt:2:1: error: a file holds exactly one model");
}

TEST(ParserErrorTest, RecoveryReportsIndependentErrors) {
  ParseResult r = parse(inForward("y = x )\nz = [1, 2\nreturn y"));
  EXPECT_FALSE(r.model);
  EXPECT_GE(r.errors, 2u) << r.diags;
  EXPECT_EQ(firstLine(r),
            "test.mt:3:7: error: unexpected ')' in the forward of "
            "model 'M'; expected '}' or a statement");
}

TEST(ParserErrorTest, ManyErrorsStop) {
  std::string body;
  for (int i = 0; i < 500; ++i)
    body += "y = )\n";
  ParseResult r = parse(inForward(body));
  EXPECT_FALSE(r.model);
  EXPECT_LE(r.errors, DiagnosticEngine::kMaxPrinted);
}

TEST(ParserErrorTest, GarbageNeverCrashes) {
  // A few byte soups; each must fail cleanly with at least one error.
  const char *inputs[] = {
      "}}}}",
      "model",
      "model M",
      "model M {",
      "model M { forward(",
      "model M { layer",
      "model M { layer L x",
      "((((",
      "model M { config { a = } }",
      "model M { forward(x: [B]) -> [B] { return } }",
      "\"",
      "/*",
      "**",
      "model M { param p: [1] = normal(",
      "model M { forward(x) -> [] { } }",
  };
  for (const char *in : inputs) {
    ParseResult r = parse(in);
    EXPECT_FALSE(r.model) << in;
    EXPECT_GE(r.errors, 1u) << in;
  }
}

} // namespace
