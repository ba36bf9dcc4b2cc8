//===- DslOpsTest.cpp - The op list of the .mt language -------------------===//
//
// Part of mtc. frontend/DslOps.def is the one list the OpKind enum, the names,
// the op table Sema binds calls with and the family dispatch are generated
// from. These tests hold the generated pieces to each other: names round-trip,
// the signatures in messages come from the list, internal operations are not
// callable, and every callable operation has a rule in its family's checker.
//
//===----------------------------------------------------------------------===//

#include "frontend/Parser.h"
#include "frontend/Sema.h"

#include "test/unit-frontend/CheckSource.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

using namespace mtc;

namespace {

using test::Checked;
Checked check(const std::string &source) { return test::checkSource(source); }

/// A model whose layer forward runs \p stmt (x: [B, S, dim], norm: [dim],
/// w: [dim, dim], router: [dim, 4], an expert FFN x 4) and returns x; the
/// model forward embeds, applies the layer and returns the loss.
std::string modelWith(const std::string &stmt) {
  return "model M {\n"
         "  config { dim = 8; n = 1 }\n"
         "  param emb: [16, dim] = normal(0.02)\n"
         "  layer Block x n {\n"
         "    param norm: [dim] = ones\n"
         "    param w: [dim, dim] = normal(0.02)\n"
         "    param router: [dim, 4] = normal(0.02)\n"
         "    expert FFN x 4 {\n"
         "      param we: [dim, dim] = normal(0.02)\n"
         "      forward(t: [T, dim]) -> [T, dim] {\n"
         "        return silu(t @ we)\n"
         "      }\n"
         "    }\n"
         "    forward(x: [B, S, dim]) -> [B, S, dim] {\n"
         "      " +
         stmt +
         "\n"
         "      return x\n"
         "    }\n"
         "  }\n"
         "  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {\n"
         "    x = embedding(tokens, emb)\n"
         "    x = Block(x)\n"
         "    return cross_entropy(x @ transpose(emb), targets)\n"
         "  }\n"
         "}\n";
}

std::vector<OpKind> allKinds() {
  std::vector<OpKind> kinds;
  for (size_t k = 0; k < kNumDslOps; ++k)
    kinds.push_back(static_cast<OpKind>(k));
  return kinds;
}

} // namespace

TEST(DslOps, NamesRoundTrip) {
  std::set<std::string> seen;
  for (OpKind kind : allKinds()) {
    std::string name = opKindName(kind);
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(seen.insert(name).second) << "duplicate name " << name;
    std::optional<OpKind> back = opKindByName(name);
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(*back, kind) << name;
  }
  EXPECT_EQ(std::string(opKindName(OpKind::RmsNorm)), "rmsnorm");
  EXPECT_EQ(std::string(opKindName(OpKind::CrossEntropy)), "cross_entropy");
  EXPECT_FALSE(opKindByName("no_such_op").has_value());
}

TEST(DslOps, Families) {
  EXPECT_EQ(opFamily(OpKind::MatMul), OpFamily::Linear);
  EXPECT_EQ(opFamily(OpKind::Silu), OpFamily::Elementwise);
  EXPECT_EQ(opFamily(OpKind::Softmax), OpFamily::Reduction);
  EXPECT_EQ(opFamily(OpKind::LayerNorm), OpFamily::Norm);
  EXPECT_EQ(opFamily(OpKind::Concat), OpFamily::Shape);
  EXPECT_EQ(opFamily(OpKind::Rope), OpFamily::Attention);
  EXPECT_EQ(opFamily(OpKind::Moe), OpFamily::Moe);
  EXPECT_EQ(opFamily(OpKind::CrossEntropy), OpFamily::Loss);
  EXPECT_EQ(std::string(opFamilyName(OpFamily::Elementwise)), "Elementwise");
  // Operations Sema makes itself are not callable.
  for (OpKind kind :
       {OpKind::Constant, OpKind::ParamRef, OpKind::Add, OpKind::Sub,
        OpKind::Mul, OpKind::Div, OpKind::ApplyLayers}) {
    EXPECT_FALSE(isCallableOp(kind)) << opKindName(kind);
    EXPECT_EQ(opSignature(kind), "") << opKindName(kind);
  }
}

TEST(DslOps, Signatures) {
  EXPECT_EQ(opSignature(OpKind::RmsNorm), "(x, w, eps[, offset])");
  EXPECT_EQ(opSignature(OpKind::LayerNorm), "(x, w[, b], eps)");
  EXPECT_EQ(opSignature(OpKind::Concat), "(x, ...[, axis])");
  EXPECT_EQ(opSignature(OpKind::Attention),
            "(q, k, v[, causal, window, softcap, scale])");
  EXPECT_EQ(opSignature(OpKind::Exp), "(x)");
}

TEST(DslOps, ArityErrorsQuoteTheListsSignature) {
  // A call with too many tensors (a variadic one: with none) reports the
  // signature of the op's line. (Tensors, not an empty call: `sqrt()` and
  // `max()` are compile-time functions too.)
  for (OpKind kind : allKinds()) {
    if (!isCallableOp(kind))
      continue;
    std::string name = opKindName(kind);
    bool variadic = kind == OpKind::Concat;
    Checked r = check(modelWith(
        "y = " + name + (variadic ? "()" : "(x, x, x, x, x, x, x, x)")));
    EXPECT_FALSE(r.ok) << name;
    std::string want = "'" + name + "' expects ";
    EXPECT_NE(r.diags.find(want), std::string::npos) << r.diags;
    EXPECT_NE(
        r.diags.find(opSignature(kind) + (variadic ? ", got 0" : ", got 8")),
        std::string::npos)
        << r.diags;
  }
}

TEST(DslOps, InternalOperationsAreUnknownCalls) {
  for (OpKind kind : allKinds()) {
    if (isCallableOp(kind))
      continue;
    std::string name = opKindName(kind);
    Checked r = check(modelWith("y = " + name + "(x, x)"));
    EXPECT_FALSE(r.ok) << name;
    EXPECT_NE(r.diags.find("unknown operation '" + name + "'"),
              std::string::npos)
        << r.diags;
  }
}

TEST(DslOps, EveryCallableOpHasARuleInItsFamily) {
  // One valid call per callable op; embedding and cross_entropy are in the
  // model forward of every model.
  const std::map<OpKind, std::string> calls = {
      {OpKind::Embedding, "y = x"},
      {OpKind::MatMul, "y = matmul(x, w)"},
      {OpKind::Neg, "y = neg(x)"},
      {OpKind::Exp, "y = exp(x)"},
      {OpKind::Log, "y = log(x)"},
      {OpKind::Silu, "y = silu(x)"},
      {OpKind::Relu, "y = relu(x)"},
      {OpKind::Sigmoid, "y = sigmoid(x)"},
      {OpKind::Tanh, "y = tanh(x)"},
      {OpKind::Rsqrt, "y = rsqrt(x)"},
      {OpKind::Sqrt, "y = sqrt(x)"},
      {OpKind::Square, "y = square(x)"},
      {OpKind::Relu2, "y = relu2(x)"},
      {OpKind::Gelu, "y = gelu(x, approximate = \"tanh\")"},
      {OpKind::Sum, "y = sum(x, -1)"},
      {OpKind::Mean, "y = mean(x, -1, keepdim = true)"},
      {OpKind::Max, "y = max(x, 1)"},
      {OpKind::Softmax, "y = softmax(x)"},
      {OpKind::RmsNorm, "y = rmsnorm(x, norm, 1e-5)"},
      {OpKind::LayerNorm, "y = layernorm(x, norm, 1e-5)"},
      {OpKind::Reshape, "y = reshape(x, [B, S, 2, 4])"},
      {OpKind::Transpose, "y = transpose(x)"},
      {OpKind::Split, "a, b = split(x, [4, 4])"},
      {OpKind::Concat, "y = concat(x, x, axis = -1)"},
      {OpKind::Slice, "y = slice(x, 2, 0, 4)"},
      {OpKind::Rope, "y = rope(reshape(x, [B, S, 2, 4]), 10000.0)"},
      {OpKind::Attention, "q = reshape(x, [B, S, 2, 4])\n"
                          "      y = attention(q, q, q, window = 4)"},
      {OpKind::Softcap, "y = softcap(x, 30.0)"},
      {OpKind::Moe, "y = moe(x, router, FFN, top_k = 2)"},
      {OpKind::CrossEntropy, "y = x"},
  };
  for (OpKind kind : allKinds()) {
    if (!isCallableOp(kind))
      continue;
    auto it = calls.find(kind);
    ASSERT_NE(it, calls.end()) << "no example call of " << opKindName(kind);
    Checked r = check(modelWith(it->second));
    ASSERT_TRUE(r.ok) << opKindName(kind) << ":\n" << r.diags;
    bool found = false;
    for (const Function *fn : {&r.model.forward, &r.model.layers.at(0).forward})
      for (const Operation &op : fn->ops)
        found = found || op.kind == kind;
    EXPECT_TRUE(found) << opKindName(kind);
  }
}
