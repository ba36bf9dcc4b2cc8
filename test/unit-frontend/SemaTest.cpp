//===- SemaTest.cpp - Unit tests of the .mt checker -----------------------===//
//
// Part of mtc. Models are parsed from source strings (parseModel) and checked;
// one test builds an AST by hand to make sure Sema copes with trees the parser
// would reject.
//
//===----------------------------------------------------------------------===//

#include "frontend/Sema.h"
#include "frontend/Parser.h"

#include "test/unit-frontend/TestModels.h"

#include "test/unit-frontend/CheckSource.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

using namespace mtc;

namespace {

using test::Checked;
Checked check(const std::string &source) { return test::checkSource(source); }

/// A model with \p config, a layer body (params + forward) and the standard
/// model forward that embeds, applies `Block` as \p apply says, and returns
/// the loss.
std::string makeModel(const std::string &config, const std::string &layer,
                      const std::string &apply = "x = Block(x)",
                      const std::string &extra = "") {
  return "model M {\n"
         "  config { " +
         config +
         " }\n"
         "  param emb: [16, dim] = normal(0.02)\n" +
         extra + "  layer Block x n {\n" + layer +
         "  }\n"
         "  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {\n"
         "    x = embedding(tokens, emb)\n"
         "    " +
         apply +
         "\n"
         "    return cross_entropy(x @ transpose(emb), targets)\n"
         "  }\n"
         "}\n";
}

const std::string kSimpleLayer =
    "    param w: [dim, dim] = normal(0.02)\n"
    "    forward(x: [B, S, dim]) -> [B, S, dim] {\n"
    "      return x + x @ w\n"
    "    }\n";

/// A layer whose forward body is \p body (params: norm [dim], w [dim, dim]).
std::string layerWith(const std::string &body) {
  return "    param norm: [dim] = ones\n"
         "    param w: [dim, dim] = normal(0.02)\n"
         "    forward(x: [B, S, dim]) -> [B, S, dim] {\n" +
         body + "\n    }\n";
}

/// Checks a model that is expected to fail and returns its diagnostics.
std::string errorsOf(const std::string &source) {
  Checked r = check(source);
  EXPECT_TRUE(r.parsed) << r.diags;
  EXPECT_FALSE(r.ok) << "expected an error in:\n" << source;
  return r.diags;
}

#define EXPECT_DIAG(diags, text)                                               \
  EXPECT_NE((diags).find(text), std::string::npos)                             \
      << "missing: " << (text) << "\nin:\n"                                    \
      << (diags)

const ConfigValue *configValue(const CheckedModel &m, const std::string &name) {
  for (const auto &[n, v] : m.config)
    if (n == name)
      return &v;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// The TinyLlama of docs/language.md
//===----------------------------------------------------------------------===//

using mtc::test::kTinyLlama;

TEST(Sema, TinyLlamaSummary) {
  Checked r = check(kTinyLlama);
  ASSERT_TRUE(r.ok) << r.diags;
  const CheckedModel &m = r.model;
  EXPECT_EQ(m.name, "TinyLlama");
  ASSERT_EQ(m.layers.size(), 1u);
  const Layer &block = m.layers[0];
  EXPECT_EQ(block.count, 4);
  EXPECT_EQ(m.totalLayerInstances(), 4);
  // Per layer: attn_norm 256 + wq 256*256 + wk 256*128 + wv 256*128
  //   + wo 256*256 + mlp_norm 256 + w_gate, w_up, w_down 3*256*688
  //   = 256 + 65536 + 32768 + 32768 + 65536 + 256 + 528384 = 725504.
  EXPECT_EQ(block.paramsPerInstance(), 725504);
  // tok_emb 256*256 = 65536, 4 layers 2902016, final_norm 256.
  EXPECT_EQ(m.totalParams(), 65536 + 4 * 725504 + 256);
  EXPECT_EQ(m.totalParams(), 2967808);

  ASSERT_EQ(m.params.size(), 2u);
  EXPECT_EQ(m.params[0].name, "tok_emb");
  EXPECT_EQ(m.params[0].shape, (Shape{256, 256}));
  EXPECT_EQ(m.params[0].init, ast::InitKind::Normal);
  EXPECT_DOUBLE_EQ(m.params[0].initA, 0.02);
  EXPECT_EQ(block.params[4].name, "wo");
  EXPECT_EQ(block.params[4].init, ast::InitKind::ScaledNormal);

  const ConfigValue *headDim = configValue(m, "head_dim");
  ASSERT_TRUE(headDim);
  EXPECT_TRUE(headDim->isInt);
  EXPECT_EQ(headDim->value, 32);
  const ConfigValue *theta = configValue(m, "theta");
  ASSERT_TRUE(theta);
  EXPECT_FALSE(theta->isInt);
}

TEST(Sema, TinyLlamaFunctions) {
  Checked r = check(kTinyLlama);
  ASSERT_TRUE(r.ok) << r.diags;
  const Function &layer = r.model.layers[0].forward;
  ASSERT_EQ(layer.numArgs, 1u);
  EXPECT_EQ(layer.argNames[0], "x");
  EXPECT_EQ(layer.types[0].shape, (Shape{kDimB, kDimS, 256}));
  EXPECT_EQ(layer.types[layer.result].shape, (Shape{kDimB, kDimS, 256}));
  EXPECT_EQ(layer.resultType.shape, (Shape{kDimB, kDimS, 256}));

  // Every operand is defined before use and every result id is fresh.
  std::vector<bool> defined(layer.types.size(), false);
  for (size_t i = 0; i < layer.numArgs; ++i)
    defined[i] = true;
  int attention = 0, ropes = 0, paramRefs = 0;
  for (const Operation &op : layer.ops) {
    for (int id : op.operands)
      EXPECT_TRUE(defined.at(id));
    for (int id : op.results) {
      EXPECT_FALSE(defined.at(id));
      defined[id] = true;
    }
    if (op.kind == OpKind::Attention) {
      ++attention;
      EXPECT_EQ(layer.types[op.results[0]].shape, (Shape{kDimB, kDimS, 8, 32}));
      ASSERT_TRUE(op.attr("causal"));
      EXPECT_TRUE(std::get<bool>(*op.attr("causal")));
      EXPECT_EQ(std::get<int64_t>(*op.attr("window")), 0);
      EXPECT_EQ(std::get<double>(*op.attr("scale")), 0.0);
    }
    if (op.kind == OpKind::Rope) {
      ++ropes;
      EXPECT_EQ(std::get<double>(*op.attr("theta")), 10000.0);
      EXPECT_EQ(std::get<double>(*op.attr("fraction")), 1.0);
      EXPECT_EQ(op.attr("scaling"), nullptr);
    }
    if (op.kind == OpKind::ParamRef)
      ++paramRefs;
  }
  EXPECT_EQ(attention, 1);
  EXPECT_EQ(ropes, 2);
  EXPECT_EQ(paramRefs, 9); // each parameter referenced once

  const Function &fwd = r.model.forward;
  ASSERT_EQ(fwd.numArgs, 2u);
  EXPECT_EQ(fwd.types[0].dtype, DType::I32);
  EXPECT_EQ(fwd.types[fwd.result].shape, Shape{});
  int applies = 0, paramRefsModel = 0;
  for (const Operation &op : fwd.ops) {
    if (op.kind == OpKind::ApplyLayers) {
      ++applies;
      EXPECT_EQ(op.symbol, "Block");
      EXPECT_EQ(std::get<int64_t>(*op.attr("first")), 0);
      EXPECT_EQ(std::get<int64_t>(*op.attr("count")), 4);
    }
    if (op.kind == OpKind::ParamRef && op.symbol == "tok_emb")
      ++paramRefsModel;
    if (op.kind == OpKind::Transpose) {
      EXPECT_EQ(std::get<std::vector<int64_t>>(*op.attr("perm")),
                (std::vector<int64_t>{1, 0}));
    }
    if (op.kind == OpKind::CrossEntropy) {
      EXPECT_EQ(std::get<int64_t>(*op.attr("ignore_index")), -1);
    }
  }
  EXPECT_EQ(applies, 1);
  EXPECT_EQ(paramRefsModel, 1); // the tied embedding: one ref, two uses
}

//===----------------------------------------------------------------------===//
// Config evaluation
//===----------------------------------------------------------------------===//

TEST(SemaConfig, Arithmetic) {
  Checked r = check(makeModel(
      "dim = 8; n = 2; a = 7 / 2; b = 8 / 2; c = 2 ** 10; d = 7 % 3; "
      "e = -7 % 3; f = sqrt(16); g = sqrt(2); h = min(3, 4.5); i = max(3, 4); "
      "j = (dim + 2) * 3 - 1; k = -dim; l = 2 ** -1; m = 1e3",
      kSimpleLayer));
  ASSERT_TRUE(r.ok) << r.diags;
  auto expect = [&](const char *name, double value, bool isInt) {
    const ConfigValue *v = configValue(r.model, name);
    ASSERT_TRUE(v) << name;
    EXPECT_DOUBLE_EQ(v->value, value) << name;
    EXPECT_EQ(v->isInt, isInt) << name;
  };
  expect("a", 3.5, false);
  expect("b", 4, true);
  expect("c", 1024, true);
  expect("d", 1, true);
  expect("e", 2, true); // the sign follows the divisor
  expect("f", 4, true);
  expect("g", std::sqrt(2.0), false);
  expect("h", 3, false);
  expect("i", 4, true);
  expect("j", 29, true);
  expect("k", -8, true);
  expect("l", 0.5, false);
  expect("m", 1000, false);
  // Entries are kept in source order.
  ASSERT_GE(r.model.config.size(), 2u);
  EXPECT_EQ(r.model.config[0].first, "dim");
  EXPECT_EQ(r.model.config[1].first, "n");
}

TEST(SemaConfig, Errors) {
  EXPECT_DIAG(
      errorsOf(makeModel("dim = 8; n = 2; z = 0; q = dim / z", kSimpleLayer)),
      "test.mt:2:43: error: division by zero");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; q = dim % 0", kSimpleLayer)),
              "error: division by zero in '%'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; q = dimm * 2", kSimpleLayer)),
              "error: unknown name 'dimm'; did you mean 'dim'?");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; q = 2 ** 70", kSimpleLayer)),
              "error: integer overflow in '**'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; q = 3037000500 * "
                                 "3037000500",
                                 kSimpleLayer)),
              "error: integer overflow in '*'");
  EXPECT_DIAG(
      errorsOf(makeModel("dim = 8; n = 2; q = 10.0 ** 400", kSimpleLayer)),
      "error: result of '**' is not a finite number");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; q = sqrt(-4)", kSimpleLayer)),
              "error: sqrt of the negative number -4");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; q = foo(3)", kSimpleLayer)),
              "error: unknown function 'foo' in a compile-time expression");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; q = true", kSimpleLayer)),
              "error: expected a number, got 'true'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = m; m = 2", kSimpleLayer)),
              "error: config entry 'm' is used before its definition");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; q = emb", kSimpleLayer)),
              "error: 'emb' is not a compile-time constant");
}

TEST(SemaConfig, DuplicatesAndClashes) {
  std::string d = errorsOf(makeModel("dim = 8; n = 2; dim = 4", kSimpleLayer));
  EXPECT_DIAG(d, "test.mt:2:28: error: duplicate config entry 'dim'");
  EXPECT_DIAG(d, "test.mt:2:12: note: 'dim' was first declared here");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; emb = 3", kSimpleLayer)),
              "error: parameter 'emb' conflicts with config entry 'emb'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; Block = 3", kSimpleLayer)),
              "error: layer 'Block' conflicts with config entry 'Block'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; B = 3", kSimpleLayer)),
              "error: 'B' is reserved for the batch dimension");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2",
                                 "    param dim: [4] = ones\n" + kSimpleLayer)),
              "error: parameter 'dim' conflicts with config entry 'dim'");
  // The first error does not stop the check: the later entry is used.
  std::string two =
      errorsOf(makeModel("dim = 8; n = 2; a = 1 / 0; b = 2 / 0", kSimpleLayer));
  EXPECT_DIAG(two, "2:34: error: division by zero");
  EXPECT_DIAG(two, "2:45: error: division by zero");
  // A failed entry does not cascade into its uses.
  std::string once = errorsOf(makeModel(
      "dim = 8; n = 2; a = 1 / 0; b = a + 1; c = b * 2", kSimpleLayer));
  EXPECT_EQ(once.find("error", once.find("error") + 1), std::string::npos)
      << once;
}

//===----------------------------------------------------------------------===//
// Integers: dimensions, counts
//===----------------------------------------------------------------------===//

TEST(SemaIntegers, Dimensions) {
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2; hd = dim / 3", kSimpleLayer,
                                 "x = Block(x)", "  param p: [hd] = ones\n")),
              "error: dimension 'hd' is 2.66667, not an integer");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block(x)",
                                 "  param p: [dim - 8] = ones\n")),
              "error: dimension 'dim - 8' must be positive, got 0");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block(x)",
                                 "  param p: [3.5] = ones\n")),
              "error: dimension 3.5 is not an integer");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block(x)",
                                 "  param p: [-4] = ones\n")),
              "error: dimension '-4' must be positive, got -4");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block(x)",
                                 "  param p: [2 ** 40] = ones\n")),
              "error: dimension '2 ** 40' is 1099511627776, larger than the "
              "limit 2147483647");
  // An integral float is accepted as a dimension.
  Checked ok = check(makeModel("dim = 8; n = 2; f = dim * 1.5", kSimpleLayer,
                               "x = Block(x)", "  param p: [f] = ones\n"));
  EXPECT_TRUE(ok.ok) << ok.diags;
}

TEST(SemaIntegers, CountsAndSymbolicDims) {
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 0", kSimpleLayer)),
              "error: layer count 'n' must be positive, got 0");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block(x)",
                                 "  param p: [B, dim] = ones\n")),
              "error: 'B' cannot be used in the shape of parameter 'p'; "
              "parameter shapes are static");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2",
                                 layerWith("      y = reshape(x, [T, dim])\n"
                                           "      return x"))),
              "error: 'T' can only be used in an expert forward");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer,
                                 "repeat 2.5 { x = Block[1](x) }")),
              "error: repeat count 2.5 is not an integer");
  EXPECT_DIAG(
      errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block[0](x)")),
      "error: layer application count must be positive, got 0");
}

//===----------------------------------------------------------------------===//
// Shapes, operations, dtypes
//===----------------------------------------------------------------------===//

TEST(SemaShapes, OperatorMismatches) {
  std::string d = errorsOf(makeModel(
      "dim = 8; n = 2", "    param w: [dim, 2 * dim] = normal(0.02)\n"
                        "    forward(x: [B, S, dim]) -> [B, S, dim] {\n"
                        "      return x + x @ w\n"
                        "    }\n"));
  EXPECT_DIAG(d, "test.mt:7:16: error: shape mismatch in '+': cannot "
                 "broadcast [B, S, 8] and [B, S, 16]");
  EXPECT_DIAG(
      errorsOf(makeModel("dim = 8; n = 2",
                         "    param w: [2 * dim, dim] = normal(0.02)\n"
                         "    forward(x: [B, S, dim]) -> [B, S, dim] {\n"
                         "      return x + x @ w\n"
                         "    }\n")),
      "error: shape mismatch in '@': matmul inner dimensions differ: "
      "[B, S, 8] @ [16, 8]");
}

TEST(SemaShapes, Calls) {
  auto body = [](const std::string &stmt) {
    return errorsOf(makeModel("dim = 8; n = 2; eps = 1e-5; h = 2; hd = 4",
                              layerWith("      " + stmt + "\n      return x")));
  };
  EXPECT_DIAG(body("y = rmsnorm(x, norm)"),
              "error: 'rmsnorm' expects 3 or 4 arguments (x, w, eps[, "
              "offset]), got 2");
  EXPECT_DIAG(body("y = attention(x)"),
              "error: 'attention' expects 3 to 7 arguments (q, k, v[, causal, "
              "window, softcap, scale]), got 1");
  EXPECT_DIAG(body("y = layernorm(x)"),
              "error: 'layernorm' expects 3 or 4 arguments (x, w[, b], eps), "
              "got 1");
  EXPECT_DIAG(body("y = softmaxx(x)"),
              "error: unknown operation 'softmaxx'; did you mean 'softmax'?");
  EXPECT_DIAG(body("y = softmax(x, axiss = 1)"),
              "error: 'softmax' has no argument named 'axiss'; did you mean "
              "'axis'?");
  EXPECT_DIAG(body("y = rmsnorm(x, norm, eps, eps = 1e-6)"),
              "error: argument 'eps' of 'rmsnorm' is given twice");
  EXPECT_DIAG(body("y = rmsnorm(x, norm, offset = 1.0)"),
              "error: 'rmsnorm' is missing argument 'eps'");
  EXPECT_DIAG(body("y = rmsnorm(x, norm, 0)"),
              "error: argument 'eps' of 'rmsnorm' must be positive, got 0");
  EXPECT_DIAG(body("y = rmsnorm(x, w = norm, eps = eps)"),
              "error: argument 'w' of 'rmsnorm' must be passed by position");
  EXPECT_DIAG(body("y = rmsnorm(x, norm, x)"),
              "error: 'x' is not a compile-time constant");
  EXPECT_DIAG(body("y = reshape(x, [B, S, h, 3])"),
              "error: shape mismatch in 'reshape': cannot reshape [B, S, 8] "
              "to [B, S, 2, 3]: element counts differ (8 vs 6)");
  EXPECT_DIAG(body("a, b = split(x, [4, 2], -1)"),
              "error: shape mismatch in 'split': split sizes [4, 2] add up to "
              "6, but axis 2 of [B, S, 8] is 8");
  EXPECT_DIAG(body("a, b = split(x, [4, 2, 2], -1)"),
              "error: 'split' produces 3 values but 2 names are assigned");
  EXPECT_DIAG(body("a = x + split(x, [4, 4])"),
              "error: 'split' produces 2 values; assign them with 'a, b = "
              "split(...)'");
  EXPECT_DIAG(body("a, b = silu(x)"),
              "error: only 'split' returns several values, but 2 names are "
              "assigned");
  EXPECT_DIAG(body("y = gelu(x, approximate = \"fast\")"),
              "error: 'gelu' approximate must be \"none\" or \"tanh\", got "
              "\"fast\"");
  EXPECT_DIAG(body("y = attention(x, x, x, causal = 1)"),
              "error: argument 'causal' of 'attention' must be true or false");
  EXPECT_DIAG(body("y = sum(x, 3)"),
              "error: shape mismatch in 'sum': axis 3 is out of range for "
              "rank 3");
  EXPECT_DIAG(body("y = sum(x, 1.5)"), "error: axis 1.5 is not an integer");
  EXPECT_DIAG(body("y = rope(reshape(x, [B, S, h, hd]), 10000.0, fraction = "
                   "0.2)"),
              "error: shape mismatch in 'rope': rope fraction 0.2 of the 4 "
              "dimensions of [B, S, 2, 4] gives no rotary frequency");
  EXPECT_DIAG(body("y = rope(reshape(x, [B, S, h, hd]), 10000.0, scaling = "
                   "llama3(8.0, 1.0))"),
              "error: rope scaling must be llama3(factor, low_freq_factor, "
              "high_freq_factor, original_max_position)");
  EXPECT_DIAG(body("y = slice(x, -1, 4, 12)"),
              "error: shape mismatch in 'slice': slice [4, 12) is out of "
              "range for axis 2 of [B, S, 8]");
  EXPECT_DIAG(body("y = concat(x, norm)"),
              "error: shape mismatch in 'concat': cannot concatenate");
  EXPECT_DIAG(body("y = transpose(norm)"),
              "error: shape mismatch in 'transpose': transpose needs at least "
              "2 dimensions, got [8]");
  EXPECT_DIAG(body("y = x % 2"),
              "error: '%' is only defined on compile-time numbers");
  EXPECT_DIAG(body("y = min(x, 2)"),
              "error: 'min' is only defined on compile-time numbers");
  EXPECT_DIAG(body("y = silu[2](x)"),
              "error: 'silu' is not a layer; only layers are applied with "
              "'[k]'");
  EXPECT_DIAG(body("y = x + true"), "error: expected a tensor, got 'true'");
}

TEST(SemaShapes, Attributes) {
  Checked r = check(makeModel(
      "dim = 8; n = 2; eps = 1e-5; h = 2; hd = 4",
      layerWith(
          "      q = reshape(x, [B, S, h, hd])\n"
          "      q = rope(q, 500000.0, fraction = 0.5, scaling = "
          "llama3(8.0, 1.0, 4.0, 8192))\n"
          "      a = attention(q, q, q, causal = false, window = 16, "
          "softcap = 50.0, scale = 0.125)\n"
          "      p, r = split(x, [6, 2], axis = -1)\n"
          "      c = concat(p, r, axis = -1)\n"
          "      s = sum(c, -1, keepdim = true) + mean(c, 2, keepdim = true) - "
          "slice(c, 2, 0, 1)\n"
          "      y = layernorm(x, norm, eps) + layernorm(x, norm, norm, "
          "1e-6)\n"
          "      y = gelu(y, approximate = \"tanh\") + softmax(y) * 0.5\n"
          "      y = transpose(transpose(y, [0, 2, 1]), [0, -1, 1])\n"
          "      return y + reshape(a, [B, S, dim]) + s * (1 / "
          "sqrt(hd))")));
  ASSERT_TRUE(r.ok) << r.diags;
  const Function &f = r.model.layers[0].forward;
  bool sawRope = false, sawAttention = false, sawSplit = false, sawKeep = false,
       sawTranspose = false, sawConstant = false;
  for (const Operation &op : f.ops) {
    switch (op.kind) {
    case OpKind::Rope:
      sawRope = true;
      EXPECT_EQ(std::get<double>(*op.attr("theta")), 500000.0);
      EXPECT_EQ(std::get<double>(*op.attr("fraction")), 0.5);
      EXPECT_EQ(std::get<std::string>(*op.attr("scaling")), "llama3");
      EXPECT_EQ(std::get<double>(*op.attr("factor")), 8.0);
      EXPECT_EQ(std::get<double>(*op.attr("low_freq_factor")), 1.0);
      EXPECT_EQ(std::get<double>(*op.attr("high_freq_factor")), 4.0);
      EXPECT_EQ(std::get<int64_t>(*op.attr("original_max_position")), 8192);
      break;
    case OpKind::Attention:
      sawAttention = true;
      EXPECT_FALSE(std::get<bool>(*op.attr("causal")));
      EXPECT_EQ(std::get<int64_t>(*op.attr("window")), 16);
      EXPECT_EQ(std::get<double>(*op.attr("softcap")), 50.0);
      EXPECT_EQ(std::get<double>(*op.attr("scale")), 0.125);
      break;
    case OpKind::Split:
      sawSplit = true;
      EXPECT_EQ(op.results.size(), 2u);
      EXPECT_EQ(std::get<std::vector<int64_t>>(*op.attr("sizes")),
                (std::vector<int64_t>{6, 2}));
      EXPECT_EQ(std::get<int64_t>(*op.attr("axis")), 2);
      EXPECT_EQ(f.types[op.results[1]].shape, (Shape{kDimB, kDimS, 2}));
      break;
    case OpKind::Sum:
      sawKeep = std::get<bool>(*op.attr("keepdim"));
      EXPECT_EQ(std::get<int64_t>(*op.attr("axis")), 2);
      EXPECT_EQ(f.types[op.results[0]].shape, (Shape{kDimB, kDimS, 1}));
      break;
    case OpKind::Transpose:
      if (f.types[op.operands[0]].shape == Shape{kDimB, 8, kDimS}) {
        sawTranspose = true;
        EXPECT_EQ(std::get<std::vector<int64_t>>(*op.attr("perm")),
                  (std::vector<int64_t>{0, 2, 1}));
      }
      break;
    case OpKind::Constant:
      // 1 / sqrt(hd) folds to one constant.
      if (std::get<double>(*op.attr("value")) == 0.5)
        sawConstant = true;
      EXPECT_EQ(f.types[op.results[0]].shape, Shape{});
      break;
    default:
      break;
    }
  }
  EXPECT_TRUE(sawRope && sawAttention && sawSplit && sawKeep && sawTranspose &&
              sawConstant);
}

TEST(SemaShapes, Dtypes) {
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer,
                                 "y = tokens + 1\n    x = Block(x)")),
              "error: '+' cannot operate on i32 values");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer,
                                 "x = Block(x)\n    y = embedding(x, emb)")),
              "error: 'embedding' ids must be i32, got f32");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer,
                                 "x = Block(x)\n    y = silu(tokens)")),
              "error: 'silu' cannot operate on i32 values");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer,
                                 "x = Block(x)\n    l = cross_entropy(x @ "
                                 "transpose(emb), embedding(tokens, emb))")),
              "error: 'cross_entropy' targets must be i32, got f32");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block(x)",
                                 "  param p: [4] i32 = zeros\n")),
              "error: parameter 'p' must be f32 or bf16, got i32");
  // bf16 parameters work wherever f32 does; the results are f32.
  Checked r = check(makeModel("dim = 8; n = 2",
                              "    param w: [dim, dim] bf16 = normal(0.02)\n"
                              "    forward(x: [B, S, dim]) -> [B, S, dim] {\n"
                              "      return x + x @ w\n"
                              "    }\n"));
  ASSERT_TRUE(r.ok) << r.diags;
  const Function &f = r.model.layers[0].forward;
  EXPECT_EQ(f.types[f.result].dtype, DType::F32);
  EXPECT_EQ(r.model.layers[0].params[0].dtype, DType::BF16);
}

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

TEST(SemaNames, Resolution) {
  auto body = [](const std::string &stmt) {
    return errorsOf(makeModel("dim = 8; n = 2; eps = 1e-5",
                              layerWith("      " + stmt + "\n      return x"),
                              "x = Block(x)", "  param scale: [dim] = ones\n"));
  };
  EXPECT_DIAG(body("y = x @ ww"),
              "error: unknown name 'ww'; did you mean 'w'?");
  EXPECT_DIAG(body("y = x @ qqqq"), "error: unknown name 'qqqq'\n");
  EXPECT_DIAG(body("y = x * scale"),
              "error: model parameter 'scale' cannot be used in layer "
              "'Block'; layers and experts use only their own parameters");
  EXPECT_DIAG(body("y = Block(x)"),
              "error: layer 'Block' cannot be applied inside layer 'Block'; "
              "layers are applied in the model forward");
  EXPECT_DIAG(body("y = x * B"),
              "error: symbolic dimension 'B' can only be used in shapes");
  EXPECT_DIAG(body("w = x"), "error: cannot assign to parameter 'w'");
  EXPECT_DIAG(body("eps = x"), "error: cannot assign to config entry 'eps'");
  EXPECT_DIAG(body("S = x"), "error: 'S' is reserved for the sequence "
                             "dimension");
  // Layer parameters are not visible in the model forward.
  EXPECT_DIAG(
      errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block(x) @ w")),
      "error: 'w' is a parameter of layer 'Block' and cannot be used "
      "in the model forward");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block")),
              "error: layer 'Block' must be applied to a value, as in "
              "'Block(x)'");
  // Locals may be re-bound, config names are numbers in tensor expressions.
  Checked r = check(
      makeModel("dim = 8; n = 2; eps = 1e-5", layerWith("      y = x * dim\n"
                                                        "      y = y + eps\n"
                                                        "      return y")));
  EXPECT_TRUE(r.ok) << r.diags;
}

TEST(SemaNames, Duplicates) {
  std::string d = errorsOf(
      makeModel("dim = 8; n = 2",
                "    param w: [dim, dim] = normal(0.02)\n" + kSimpleLayer));
  EXPECT_DIAG(d, "test.mt:6:11: error: duplicate parameter 'w'");
  EXPECT_DIAG(d, "test.mt:5:11: note: 'w' was first declared here");
  EXPECT_DIAG(
      errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block(x)",
                         "  layer Block x 1 {\n" + kSimpleLayer + "  }\n")),
      "error: duplicate layer 'Block'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer, "x = Block(x)",
                                 "  param emb: [4] = ones\n")),
              "error: duplicate parameter 'emb'");
}

TEST(SemaNames, Forwards) {
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", layerWith("      y = x"))),
              "error: missing 'return' at the end of the forward of layer "
              "'Block'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2",
                                 layerWith("      return x\n      y = x"))),
              "error: unreachable statement after 'return'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2",
                                 layerWith("      return sum(x, -1)"))),
              "error: forward returns [B, S] but is declared to return "
              "[B, S, 8]");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2",
                                 "    forward(x: [B, S, dim]) -> [B, S, 4] {\n"
                                 "      return x\n"
                                 "    }\n")),
              "error: layer 'Block' must return its input shape [B, S, 8], "
              "but is declared to return [B, S, 4]");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2",
                                 "    forward(x: [B, S, dim], y: [B, S, dim]) "
                                 "-> [B, S, dim] {\n"
                                 "      return x\n"
                                 "    }\n")),
              "error: the forward of layer 'Block' must take exactly one "
              "argument, got 2");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2",
                                 layerWith("      repeat 2 { x = x + 1 }\n"
                                           "      return x"))),
              "error: 'repeat' can only be used in the model forward");
}

//===----------------------------------------------------------------------===//
// Layer application
//===----------------------------------------------------------------------===//

std::vector<std::pair<int64_t, int64_t>> applications(const CheckedModel &m,
                                                      const std::string &name) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (const Operation &op : m.forward.ops)
    if (op.kind == OpKind::ApplyLayers && op.symbol == name)
      r.push_back({std::get<int64_t>(*op.attr("first")),
                   std::get<int64_t>(*op.attr("count"))});
  return r;
}

TEST(SemaLayers, RepeatUnrolls) {
  std::string local = "  layer Local x n {\n" + kSimpleLayer + "  }\n";
  Checked r = check(makeModel("dim = 8; n = 4", kSimpleLayer,
                              "x = Block[1](x)\n"
                              "    repeat n / 2 {\n"
                              "      x = Local[1](x)\n"
                              "      x = Block[1](x)\n"
                              "      x = Local[1](x)\n"
                              "    }\n"
                              "    x = Block[n - 3](x)",
                              local));
  ASSERT_TRUE(r.ok) << r.diags;
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(applications(r.model, "Block"),
            (std::vector<P>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
  EXPECT_EQ(applications(r.model, "Local"),
            (std::vector<P>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
  EXPECT_EQ(r.model.totalLayerInstances(), 8);
}

TEST(SemaLayers, CountErrors) {
  std::string local = "  layer Local x 8 {\n" + kSimpleLayer + "  }\n";
  std::string d = errorsOf(makeModel("dim = 8; n = 4", kSimpleLayer,
                                     "x = Block(x)\n"
                                     "    repeat 3 {\n"
                                     "      x = Local[2](x)\n"
                                     "    }",
                                     local));
  EXPECT_DIAG(d, "error: layer 'Local' has 8 instances but 6 are applied");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 4", kSimpleLayer,
                                 "repeat 3 { x = Block[2](x) }")),
              "error: layer 'Block' applied beyond its 4 instances");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 4", kSimpleLayer,
                                 "x = Block(x)\n    x = Block(x)")),
              "error: 'Block(x)' applies all 4 instances of layer 'Block' and "
              "cannot be combined with other applications of it");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 4", kSimpleLayer,
                                 "x = Block(x)\n    x = Block[1](x)")),
              "error: layer 'Block' is already applied in full by 'Block(x)' "
              "and cannot be applied again");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 4", kSimpleLayer, "y = x")),
              "error: layer 'Block' has 4 instances but none are applied");
  EXPECT_DIAG(
      errorsOf(makeModel("dim = 8; n = 4", kSimpleLayer, "x = Block(x, x)")),
      "error: layer 'Block' takes exactly one argument, got 2");
  EXPECT_DIAG(
      errorsOf(makeModel("dim = 8; n = 4", kSimpleLayer, "x = Block(tokens)")),
      "error: layer 'Block' expects [B, S, 8] but is applied to "
      "[B, S] i32");
  // Errors inside an unrolled body are reported once.
  std::string once = errorsOf(makeModel("dim = 8; n = 4", kSimpleLayer,
                                        "x = Block(x)\n"
                                        "    repeat 4 { y = x @ qq }"));
  EXPECT_EQ(once.find("unknown name", once.find("unknown name") + 1),
            std::string::npos)
      << once;
}

TEST(SemaLayers, UnrollLimit) {
  std::string d = errorsOf(makeModel("dim = 8; n = 1", kSimpleLayer,
                                     "x = Block(x)\n"
                                     "    repeat 100000 { x = x + 1 }"));
  EXPECT_DIAG(d, "error: the model forward has more than 100000 operations "
                 "after unrolling 'repeat'");
  std::string d2 =
      errorsOf(makeModel("dim = 8; n = 1", kSimpleLayer,
                         "x = Block(x)\n"
                         "    repeat 100000 { repeat 100000 { } }"));
  EXPECT_DIAG(d2, "statements after unrolling 'repeat'");
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

std::string moeLayer(const std::string &call, int experts = 4,
                     const std::string &routerShape = "[dim, 4]") {
  return "    param router: " + routerShape +
         " = normal(0.02)\n"
         "    expert FFN x " +
         std::to_string(experts) +
         " {\n"
         "      param w: [dim, dim] = normal(0.02)\n"
         "      forward(t: [T, dim]) -> [T, dim] {\n"
         "        return silu(t @ w)\n"
         "      }\n"
         "    }\n"
         "    forward(x: [B, S, dim]) -> [B, S, dim] {\n"
         "      return x + " +
         call +
         "\n"
         "    }\n";
}

TEST(SemaMoe, Valid) {
  Checked r = check(
      makeModel("dim = 8; n = 2",
                moeLayer("moe(x, router, FFN, top_k = 2, normalize = true, "
                         "aux_loss = 0.01)")));
  ASSERT_TRUE(r.ok) << r.diags;
  const Layer &layer = r.model.layers[0];
  ASSERT_EQ(layer.experts.size(), 1u);
  const Expert &e = layer.experts[0];
  EXPECT_EQ(e.count, 4);
  EXPECT_EQ(e.paramsPerExpert(), 64);
  EXPECT_EQ(e.forward.types[0].shape, (Shape{kDimT, 8}));
  // router 8*4 + 4 experts * 64.
  EXPECT_EQ(layer.paramsPerInstance(), 32 + 4 * 64);
  EXPECT_EQ(r.model.totalParams(), 16 * 8 + 2 * (32 + 4 * 64));
  bool sawMoe = false;
  for (const Operation &op : layer.forward.ops)
    if (op.kind == OpKind::Moe) {
      sawMoe = true;
      EXPECT_EQ(op.symbol, "FFN");
      EXPECT_EQ(op.operands.size(), 2u);
      EXPECT_EQ(std::get<int64_t>(*op.attr("top_k")), 2);
      EXPECT_TRUE(std::get<bool>(*op.attr("normalize")));
      EXPECT_EQ(std::get<double>(*op.attr("aux_loss")), 0.01);
    }
  EXPECT_TRUE(sawMoe);
}

TEST(SemaMoe, Errors) {
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2",
                                 moeLayer("moe(x, router, FFN, top_k = 5)"))),
              "error: top_k 5 exceeds the 4 experts of 'FFN'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2",
                                 moeLayer("moe(x, router, FNN, top_k = 1)"))),
              "error: 'FNN' is not an expert of layer 'Block'; did you mean "
              "'FFN'?");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2",
                                 moeLayer("moe(x, router, FFN, top_k = 0)"))),
              "error: top_k must be positive, got 0");
  EXPECT_DIAG(errorsOf(makeModel(
                  "dim = 8; n = 2",
                  moeLayer("moe(x, router, FFN, top_k = 1)", 4, "[dim, 3]"))),
              "error: shape mismatch in 'moe': moe router must be [8, 4] for "
              "input [B, S, 8] and 4 experts, got [8, 3]");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", moeLayer("FFN(x)"))),
              "error: unknown operation 'FFN'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", moeLayer("x * FFN"))),
              "error: expert 'FFN' can only be used as the third argument of "
              "'moe'");
  EXPECT_DIAG(errorsOf(makeModel("dim = 8; n = 2", kSimpleLayer,
                                 "x = Block(x)\n    y = moe(x, emb, E, "
                                 "top_k = 1)")),
              "error: 'moe' can only be used in the forward of a layer that "
              "declares experts");
}

//===----------------------------------------------------------------------===//
// Robustness: ASTs the parser would never produce
//===----------------------------------------------------------------------===//

TEST(SemaRobustness, HandBuiltTrees) {
  std::ostringstream os;
  DiagnosticEngine diags("hand.mt", "", os);
  ast::Model m;
  m.name = "Empty";
  CheckedModel out;
  EXPECT_FALSE(checkModel(m, diags, out));
  EXPECT_DIAG(os.str(), "error: model 'Empty' has no forward");

  // Null expressions, empty shapes, a layer without forward, an empty body.
  ast::Model m2;
  m2.name = "Holes";
  m2.config.push_back({"a", {1, 1}, nullptr});
  ast::ParamDecl p;
  p.name = "p";
  p.init = ast::InitKind::Normal; // but no argument
  m2.params.push_back(std::move(p));
  ast::LayerDecl l;
  l.name = "L";
  m2.layers.push_back(std::move(l));
  ast::ForwardDecl f;
  auto stmt = std::make_unique<ast::Stmt>();
  stmt->kind = ast::Stmt::Kind::Assign;
  stmt->names = {"x", "y"};
  f.body.push_back(std::move(stmt));
  auto ret = std::make_unique<ast::Stmt>();
  ret->kind = ast::Stmt::Kind::Return;
  f.body.push_back(std::move(ret));
  m2.forward = std::move(f);
  std::ostringstream os2;
  DiagnosticEngine diags2("hand.mt", "", os2);
  EXPECT_FALSE(checkModel(m2, diags2, out));
  EXPECT_DIAG(os2.str(), "error: layer 'L' has no forward");
  EXPECT_DIAG(os2.str(), "error: initializer 'normal' expects 1 argument "
                         "(std), got 0");
}

} // namespace
