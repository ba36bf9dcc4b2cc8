//===- BundleValidateTest.cpp - bundle::validate ----------------*- C++ -*-===//
//
// Part of mtc. The rules of lib/Bundle/Validate on a small hand-built bundle:
// it validates, and each edit below is refused with a message naming the
// function, the op and what is wrong. test/bundle/*.test edits compiled
// bundles end to end.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Validate.h"

#include "test/unit/TinyBundle.h"

#include <gtest/gtest.h>

#include <set>

using namespace mtc;
using namespace mtc::bundle;
using mtc::bundle::tiny::f32;
using mtc::bundle::tiny::layerForward;
using mtc::bundle::tiny::op;
using mtc::bundle::tiny::TinyLayer;

namespace {

Bundle tinyBundle() {
  return tiny::tinyBundle(TinyLayer{2, "matmul", {4, 4}, "normal", {0.02}, {}});
}

/// The validation error of \p b ("" if it validates).
std::string errorOf(const Bundle &b) { return validate(b).message(); }

} // namespace

TEST(BundleValidate, TinyBundleValidatesAndReadsBack) {
  Bundle b = tinyBundle();
  EXPECT_EQ(errorOf(b), "");
  Expected<Bundle> back = fromJson(toJson(b));
  EXPECT_TRUE(back.ok()) << back.message();
}

TEST(BundleValidate, OpTable) {
  const OpSpec *mm = findOp("matmul");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->minOperands, 2);
  EXPECT_EQ(mm->maxOperands, 3);
  EXPECT_EQ(mm->minResults, 1);
  EXPECT_EQ(findOp("matmul_fast"), nullptr);
  const OpSpec *rope = findOp("rope");
  ASSERT_NE(rope, nullptr);
  std::set<std::string> attrs;
  for (const AttrSpec &a : rope->attrs)
    attrs.insert(a.name);
  EXPECT_TRUE(attrs.count("theta") && attrs.count("inverse"));
  EXPECT_EQ(findOp("moe")->symbol, SymbolKind::Expert);
}

TEST(BundleValidate, OpTableIsOpsDefRowByRow) {
  // One entry per row of Ops.def, indexed by OpKind; an optional attribute
  // has a default of its type, a required one none.
  auto typeOf = [](const Attr &v) {
    return std::visit(
        [](const auto &x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>)
            return AttrType::Int;
          else if constexpr (std::is_same_v<T, double>)
            return AttrType::Float;
          else if constexpr (std::is_same_v<T, bool>)
            return AttrType::Bool;
          else if constexpr (std::is_same_v<T, std::string>)
            return AttrType::String;
          else
            return AttrType::IntList;
        },
        v);
  };
  for (size_t k = 0; k < kNumOpKinds; ++k) {
    const OpSpec &spec = opSpec(static_cast<OpKind>(k));
    EXPECT_EQ(spec.kind, static_cast<OpKind>(k));
    EXPECT_STREQ(spec.name, opKindName(spec.kind));
    EXPECT_EQ(findOp(spec.name), &spec);
    for (const AttrSpec &a : spec.attrs) {
      EXPECT_EQ(a.required, !a.dflt.has_value()) << spec.name << " " << a.name;
      if (a.dflt)
        EXPECT_EQ(typeOf(*a.dflt), a.type) << spec.name << " " << a.name;
    }
  }
  // Defaults as docs/bundle.md states them.
  EXPECT_EQ(std::get<double>(*findOp("rope")->attr("fraction")->dflt), 1.0);
  EXPECT_EQ(
      std::get<int64_t>(*findOp("cross_entropy")->attr("ignore_index")->dflt),
      -100);
  EXPECT_EQ(std::get<std::string>(*findOp("gelu")->attr("approximate")->dflt),
            "none");
  EXPECT_EQ(findOp("rmsnorm")->attr("scale"), nullptr);
}

TEST(BundleValidate, ShapeRules) {
  Bundle b = tinyBundle();
  layerForward(b).values[1] = f32({3, 4}); // param_ref result != param type
  EXPECT_NE(errorOf(b).find("layer 'Block': function 'forward': op 0 "
                            "'param_ref' at m.mt:1:1: result 0 (value 1) is "
                            "[3, 4] f32, expected [4, 4] f32"),
            std::string::npos)
      << errorOf(b);
  b = tinyBundle();
  layerForward(b).ops[1].operands = {1, 0}; // w @ x
  EXPECT_NE(errorOf(b).find("op 1 'matmul' at m.mt:1:1: matmul inner "
                            "dimensions differ: [4, 4] @ [B, S, 4]"),
            std::string::npos)
      << errorOf(b);
}

TEST(BundleValidate, SSA) {
  Bundle b = tinyBundle();
  layerForward(b).ops[1].results = {1}; // redefines the param_ref's value
  EXPECT_NE(errorOf(b).find("op 1 'matmul' at m.mt:1:1: result 0 is value 1, "
                            "which is already defined"),
            std::string::npos)
      << errorOf(b);
  b = tinyBundle();
  layerForward(b).values.push_back(f32({4}));
  EXPECT_NE(errorOf(b).find("layer 'Block': function 'forward': value 4 is "
                            "neither an argument nor an op result"),
            std::string::npos)
      << errorOf(b);
}

TEST(BundleValidate, SymbolicDims) {
  Bundle b = tinyBundle();
  layerForward(b).values[2] = f32({kDimT, kDimS, 4});
  EXPECT_NE(errorOf(b).find("value 2 has shape [T, S, 4]: T only appears in "
                            "expert functions"),
            std::string::npos)
      << errorOf(b);
  b = tinyBundle();
  b.layers[0].params[0].shape = {4, 0};
  EXPECT_NE(errorOf(b).find("layer 'Block': parameter 'w': shape [4, 0]"),
            std::string::npos)
      << errorOf(b);
}

TEST(BundleValidate, Attributes) {
  Bundle b = tinyBundle();
  b.functions["forward"].ops[2].attrs["count"] = int64_t(3);
  EXPECT_NE(errorOf(b).find("function 'forward': op 2 'apply_layers' at "
                            "m.mt:1:1: instances [0, 3) are not instances of "
                            "layer 'Block', which has 2"),
            std::string::npos)
      << errorOf(b);
  b = tinyBundle();
  b.functions["forward"].ops[2].attrs.erase("first");
  EXPECT_NE(errorOf(b).find("missing attribute 'first' (an integer)"),
            std::string::npos)
      << errorOf(b);
  b = tinyBundle();
  layerForward(b).ops[1].attrs["transpose"] = true;
  EXPECT_NE(errorOf(b).find("unknown attribute 'transpose' ('matmul' has "
                            "none)"),
            std::string::npos)
      << errorOf(b);
}

TEST(BundleValidate, Placement) {
  Bundle b = tinyBundle();
  // apply_layers inside a layer function.
  layerForward(b).ops[1] = op("apply_layers", {0}, {2}, "Block");
  layerForward(b).ops[1].attrs = {{"first", int64_t(0)}, {"count", int64_t(1)}};
  EXPECT_NE(errorOf(b).find("'apply_layers' at m.mt:1:1: is not valid in a "
                            "layer function (only in a model function)"),
            std::string::npos)
      << errorOf(b);
  // A matmul in a fused body.
  b = tinyBundle();
  layerForward(b).ops[2].region->ops[0].name = "matmul";
  EXPECT_NE(errorOf(b).find("op 2 'fused' at m.mt:1:1: region: op 0 'matmul' "
                            "at m.mt:1:1: is not valid in a fused body"),
            std::string::npos)
      << errorOf(b);
}

TEST(BundleValidate, FusedRegion) {
  Bundle b = tinyBundle();
  // The body's argument types must be the operands'.
  layerForward(b).ops[2].region->values[1] = f32({kDimB, kDimS, 1});
  EXPECT_NE(errorOf(b).find("op 2 'fused' at m.mt:1:1: region argument 1 is "
                            "[B, S, 1] f32, but operand 1 is [B, S, 4] f32"),
            std::string::npos)
      << errorOf(b);
  // Every body value is bounded by the iteration shape: a second fused op
  // adds x [B, S, 4] to z [2, B, S, 4]; broadcasting is fine, but a compiled
  // kernel can only read x as a static suffix, and [B, S, 4] is not static.
  b = tinyBundle();
  Function &lf = layerForward(b);
  lf.values.push_back(f32({2, kDimB, kDimS, 4})); // 4: z
  lf.values.push_back(f32({2, kDimB, kDimS, 4})); // 5: x + z
  lf.ops.push_back(op("zeros", {}, {4}));
  lf.ops.push_back(op("fused", {0, 4}, {5}));
  auto body = std::make_shared<Function>();
  body->values = {f32({kDimB, kDimS, 4}), f32({2, kDimB, kDimS, 4}),
                  f32({2, kDimB, kDimS, 4})};
  body->args = {0, 1};
  body->ops = {op("add", {0, 1}, {2})};
  body->results = {2};
  lf.ops.back().region = body;
  EXPECT_NE(errorOf(b).find("op 4 'fused' at m.mt:1:1: region: value 0: shape "
                            "[B, S, 4] is neither the iteration shape [2, B, "
                            "S, 4], a row of it, a static suffix of it nor a "
                            "scalar"),
            std::string::npos)
      << errorOf(b);
  // A static suffix is fine.
  lf.values[4] = f32({4});
  body->values[1] = f32({4});
  lf.values[5] = f32({kDimB, kDimS, 4});
  body->values[2] = f32({kDimB, kDimS, 4});
  EXPECT_EQ(errorOf(b), "");
}

TEST(BundleValidate, LayerSignatures) {
  Bundle b = tinyBundle();
  Function bwd;
  bwd.values = {f32({kDimB, kDimS, 4}), f32({kDimB, kDimS, 8})};
  bwd.args = {0, 1};
  bwd.results = {0};
  b.layers[0].functions["backward"] = bwd;
  EXPECT_NE(errorOf(b).find("layer 'Block': function 'backward': signature "
                            "([B, S, 4] f32, [B, S, 8] f32) -> ([B, S, 4] "
                            "f32), expected ([B, S, 4] f32, [B, S, 4] f32) -> "
                            "([B, S, 4] f32)"),
            std::string::npos)
      << errorOf(b);
}

TEST(BundleValidate, StepPlanBuffers) {
  Bundle b = tinyBundle();
  b.step = std::make_shared<StepPlan>();
  b.step->batch = b.step->seq = 1;
  EXPECT_NE(errorOf(b).find("step: no buffer 'model.weights' (model_weights, "
                            "device memory), which the runtime uses"),
            std::string::npos)
      << errorOf(b);
}
