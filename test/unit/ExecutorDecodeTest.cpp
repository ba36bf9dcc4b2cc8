//===- ExecutorDecodeTest.cpp - Ops decoded at load -------------*- C++ -*-===//
//
// Part of mtc. The executor decodes every op of a bundle when it is
// constructed (runtime/exec/DecodedOp.h): an unknown op, a missing attribute
// and an attribute of the wrong type are load errors naming the function, the
// op and its source location, not a silent default or an error when the op
// first runs. The same for the commands of a step program
// (runtime/stream/StepProgram.h). The bundles here are built in memory, so
// the reader's validation (test/bundle) never sees them.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Validate.h"
#include "runtime/device/CpuDevice.h"
#include "runtime/exec/DecodedOp.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/KernelTable.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/stream/StepProgram.h"
#include "runtime/stream/StreamExecutor.h"
#include "test/unit/Must.h"

#include "test/unit/TinyBundle.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mtc;
using namespace mtc::bundle;
using mtc::bundle::tiny::f32;
using mtc::bundle::tiny::layerForward;
using mtc::bundle::tiny::op;
using mtc::bundle::tiny::TinyLayer;
using mtc::exec::DecodedProgram;

namespace {

Bundle tinyBundle() {
  return tiny::tinyBundle(
      TinyLayer{1, "rmsnorm", {4}, "ones", {}, {{"eps", 1e-5}}});
}

/// The load error of \p b ("" if it decodes), through the executor.
std::string loadError(const Bundle &b) {
  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  Expected<std::unique_ptr<exec::Executor>> ex =
      exec::Executor::create(b, store);
  return ex.ok() ? "" : ex.message();
}

} // namespace

TEST(ExecutorDecode, TinyBundleDecodesAndRuns) {
  Bundle b = tinyBundle();
  Expected<DecodedProgram> p = DecodedProgram::decode(b);
  ASSERT_TRUE(p.ok()) << p.message();
  const exec::DecodedFunction *f = p->find(layerForward(b));
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->ops.size(), 3u);
  EXPECT_EQ(f->ops[1].kind, OpKind::RmsNorm);
  EXPECT_DOUBLE_EQ(f->ops[1].get<exec::NormAttrs>().eps, 1e-5);
  EXPECT_DOUBLE_EQ(f->ops[1].get<exec::NormAttrs>().offset, 0.0);
  ASSERT_NE(f->ops[2].region, nullptr);
  EXPECT_EQ(f->ops[2].region->ops.at(0).kind, OpKind::Add);
  EXPECT_EQ(f->ops[2].region->ops.at(0).get<exec::BinaryAttrs>().fn,
            exec::BinaryFn::Add);

  std::unique_ptr<exec::ParamStore> storeOwned =
      must(exec::ParamStore::create(b));
  exec::ParamStore &store = *storeOwned;
  store.initialize(1);
  std::unique_ptr<exec::Executor> exOwned =
      must(exec::Executor::create(b, store));
  exec::Executor &ex = *exOwned;
  std::vector<int32_t> tokens = {1, 2, 3, 4}, targets = {2, 3, 4, 5};
  double loss = must(ex.loss(tokens.data(), targets.data(), 1, 4));
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 0.0);
}

TEST(ExecutorDecode, UnknownOpIsALoadError) {
  Bundle b = tinyBundle();
  layerForward(b).ops[1].name = "rmsnorn";
  EXPECT_EQ(loadError(b),
            "bundle: layer 'Block': function 'forward': op 1 'rmsnorn' at "
            "m.mt:1:1: unknown op (the runtime has no kernel for 'rmsnorn')");
}

TEST(ExecutorDecode, UnknownOpInAFusedBodyIsALoadError) {
  Bundle b = tinyBundle();
  layerForward(b).ops[2].region->ops[0].name = "plus";
  EXPECT_EQ(loadError(b),
            "bundle: layer 'Block': function 'forward': op 2 'fused' at "
            "m.mt:1:1: region: op 0 'plus' at m.mt:1:1: unknown op (the "
            "runtime has no kernel for 'plus')");
}

TEST(ExecutorDecode, MissingAttributeIsALoadError) {
  Bundle b = tinyBundle();
  layerForward(b).ops[1].attrs.clear();
  EXPECT_EQ(loadError(b), "bundle: layer 'Block': function 'forward': op 1 "
                          "'rmsnorm' at m.mt:1:1: missing attribute 'eps' "
                          "(a number)");
}

TEST(ExecutorDecode, MisspeltAttributeIsALoadError) {
  // Read by name with a default, `epsilon` used to run as eps = 0.
  Bundle b = tinyBundle();
  layerForward(b).ops[1].attrs = {{"epsilon", 1e-5}};
  EXPECT_EQ(loadError(b), "bundle: layer 'Block': function 'forward': op 1 "
                          "'rmsnorm' at m.mt:1:1: unknown attribute "
                          "'epsilon' (expected eps, offset)");
}

TEST(ExecutorDecode, IllTypedAttributeIsALoadError) {
  Bundle b = tinyBundle();
  layerForward(b).ops[1].attrs = {{"eps", std::string("small")}};
  EXPECT_EQ(loadError(b), "bundle: layer 'Block': function 'forward': op 1 "
                          "'rmsnorm' at m.mt:1:1: attribute 'eps' must be a "
                          "number, got 'small'");

  Bundle c = tinyBundle();
  c.functions["forward"].ops[2].attrs["count"] = 1.5;
  EXPECT_EQ(loadError(c), "bundle: function 'forward': op 2 'apply_layers' "
                          "at m.mt:1:1: attribute 'count' must be an "
                          "integer, got 1.5");
}

TEST(ExecutorDecode, ValueOutsideAnAttributesVocabularyIsALoadError) {
  Bundle b = tinyBundle();
  Op &norm = layerForward(b).ops[1];
  norm.name = "unary_grad";
  norm.attrs = {{"kind", std::string("swish")}};
  EXPECT_EQ(loadError(b), "bundle: layer 'Block': function 'forward': op 1 "
                          "'unary_grad' at m.mt:1:1: unknown elementwise "
                          "function 'swish'");
}

TEST(ExecutorDecode, AbsentAttributesReadAsTheOpsDefDefaults) {
  // rope with its one required attribute: the rest are the defaults of its
  // row of lib/Bundle/Ops.def.
  Bundle b = tinyBundle();
  Op &rope = layerForward(b).ops[1];
  rope.name = "rope";
  rope.operands = {0};
  rope.attrs = {{"theta", 500.0}};
  Expected<DecodedProgram> p = DecodedProgram::decode(b);
  ASSERT_TRUE(p.ok()) << p.message();
  const exec::RopeAttrs &a =
      p->find(layerForward(b))->ops[1].get<exec::RopeAttrs>();
  EXPECT_DOUBLE_EQ(a.theta, 500.0);
  EXPECT_DOUBLE_EQ(a.fraction,
                   std::get<double>(*findOp("rope")->attr("fraction")->dflt));
  EXPECT_DOUBLE_EQ(a.fraction, 1.0);
  EXPECT_FALSE(a.llama3);
  EXPECT_FALSE(a.inverse);

  rope.name = "cross_entropy";
  rope.operands = {0, 0};
  rope.attrs = {};
  p = DecodedProgram::decode(b);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->find(layerForward(b))
                ->ops[1]
                .get<exec::CrossEntropyAttrs>()
                .ignoreIndex,
            -100);
}

TEST(ExecutorDecode, WrongArityIsALoadError) {
  Bundle b = tinyBundle();
  layerForward(b).ops[1].operands = {0};
  EXPECT_EQ(loadError(b), "bundle: layer 'Block': function 'forward': op 1 "
                          "'rmsnorm' at m.mt:1:1: expected 2 operands, got 1");
}

TEST(ExecutorDecode, OpsDefAndTheValidatorsOpTableAgree) {
  // Every op kind has an entry in the op table the reader validates with,
  // and names round-trip.
  for (size_t k = 0; k < kNumOpKinds; ++k) {
    OpKind kind = static_cast<OpKind>(k);
    const char *name = opKindName(kind);
    EXPECT_NE(findOp(name), nullptr) << name;
    ASSERT_TRUE(opKindOf(name).has_value()) << name;
    EXPECT_EQ(*opKindOf(name), kind) << name;
  }
  EXPECT_FALSE(opKindOf("no_such_op").has_value());
}

TEST(ExecutorDecode, AnOpWithoutAKernelTableEntryIsALoadError) {
  Bundle b = tinyBundle();
  Expected<DecodedProgram> p = DecodedProgram::decode(b);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_TRUE(exec::cpuKernelTable().covers(*p).ok());
  // A backend that has every kernel but rmsnorm's.
  exec::KernelTable partial("test");
  for (size_t k = 0; k < kNumOpKinds; ++k)
    partial.set(static_cast<OpKind>(k),
                exec::cpuKernelTable()[static_cast<OpKind>(k)]);
  partial.set(OpKind::RmsNorm, nullptr);
  Status st = partial.covers(*p);
  EXPECT_EQ(st.message(), "layer 'Block': function 'forward': op 1 'rmsnorm' "
                          "at m.mt:1:1: the test backend has no kernel for "
                          "this op");
}

namespace {

/// forward_backward = the forward with a layers loop over op 2, and a plan
/// running it: stage [0, 2), the loop, stage [3, 4).
Bundle planned() {
  Bundle b = tinyBundle();
  b.functions["forward_backward"] = b.functions["forward"];
  auto plan = std::make_shared<StepPlan>();
  PlanCommand stage0{"stage", {{"begin", int64_t(0)}, {"end", int64_t(2)}}, {}};
  PlanCommand loop{"layers",
                   {{"layer", std::string("Block")},
                    {"first", int64_t(0)},
                    {"count", int64_t(1)},
                    {"direction", std::string("forward")},
                    {"op_index", int64_t(2)}},
                   {}};
  loop.body = {PlanCommand{"prefetch", {{"ahead", int64_t(1)}}, {}},
               PlanCommand{"wait_weights", {}, {}},
               PlanCommand{"save", {{"to", std::string("host")}}, {}},
               PlanCommand{"compute", {}, {}}};
  PlanCommand stage1{"stage", {{"begin", int64_t(3)}, {"end", int64_t(4)}}, {}};
  plan->program = {stage0, loop, stage1};
  b.step = plan;
  return b;
}

std::string stepError(const Bundle &b) {
  Expected<std::vector<stream::StepCommand>> p =
      stream::decodeStepProgram(*b.step, b.functions.at("forward_backward"));
  return p.ok() ? "" : p.message();
}

} // namespace

TEST(StepProgramDecode, CommandsDecodeIntoKindsAndFields) {
  Bundle b = planned();
  Expected<std::vector<stream::StepCommand>> p =
      stream::decodeStepProgram(*b.step, b.functions.at("forward_backward"));
  ASSERT_TRUE(p.ok()) << p.message();
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ((*p)[0].kind, stream::StepCommandKind::Stage);
  EXPECT_EQ((*p)[0].end, 2u);
  const stream::StepCommand &loop = (*p)[1];
  EXPECT_EQ(loop.kind, stream::StepCommandKind::Layers);
  EXPECT_TRUE(loop.forward);
  EXPECT_EQ(loop.opIndex, 2u);
  EXPECT_EQ(loop.op, &b.functions.at("forward_backward").ops[2]);
  ASSERT_EQ(loop.body.size(), 4u);
  EXPECT_EQ(loop.body[0].ahead, 1);
  EXPECT_TRUE(loop.body[2].host);
  EXPECT_STREQ(stream::stepCommandName(loop.body[3].kind), "compute");
}

TEST(StepProgramDecode, UnknownCommandsAreLoadErrors) {
  Bundle b = planned();
  b.step->program[0].op = "stgae";
  EXPECT_EQ(stepError(b), "unknown command 'stgae' in the program");
  Bundle c = planned();
  c.step->program[1].body[1].op = "wait";
  EXPECT_EQ(stepError(c), "unknown command 'wait' in a layers loop");
  Bundle d = planned();
  d.step->program[0].body = {};
  d.step->program[0].op = "compute"; // a body command at the top
  EXPECT_EQ(stepError(d), "unknown command 'compute' in the program");
}

TEST(StepProgramDecode, MissingOrIllTypedFieldsAreLoadErrors) {
  Bundle b = planned();
  b.step->program[1].body[0].attrs.clear();
  EXPECT_EQ(stepError(b), "'prefetch' has no field 'ahead'");
  Bundle c = planned();
  c.step->program[1].body[2].attrs["to"] = std::string("disk");
  EXPECT_EQ(stepError(c),
            "field 'to' of 'save' must be one of 'device', 'host', got 'disk'");
  Bundle d = planned();
  d.step->program[1].attrs["direction"] = int64_t(1);
  EXPECT_EQ(stepError(d), "field 'direction' of 'layers' must be one of "
                          "'forward', 'backward'");
  Bundle e = planned();
  e.step->program[1].attrs["op_index"] = int64_t(1);
  EXPECT_EQ(stepError(e), "layers loop over 'Block' does not match op 1 "
                          "('embedding @')");
}

TEST(ExecutorDecode, AnOpFailureIsTheEntryPointsStatus) {
  // A kernel's failure (a token id outside the vocabulary, found inside the
  // embedding op) unwinds only to the entry point, which returns it; the
  // executor stays usable.
  Bundle b = tinyBundle();
  std::unique_ptr<exec::ParamStore> store = must(exec::ParamStore::create(b));
  store->initialize(1);
  std::unique_ptr<exec::Executor> ex = must(exec::Executor::create(b, *store));
  std::vector<int32_t> tokens = {1, 2, 1000000, 4}, targets = {2, 3, 4, 5};
  Expected<double> bad = ex->loss(tokens.data(), targets.data(), 1, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("token id 1000000"), std::string::npos)
      << bad.message();
  EXPECT_NE(bad.message().find("outside the vocabulary"), std::string::npos)
      << bad.message();
  EXPECT_FALSE(ex->forwardBackward(tokens.data(), targets.data(), 1, 4).ok());
  tokens[2] = 3;
  EXPECT_TRUE(ex->loss(tokens.data(), targets.data(), 1, 4).ok());
}

TEST(ExecutorDecode, AStreamExecutorNeedsAStepPlan) {
  // The streaming executor's construction errors are its factory's Status;
  // the executor it was given is left as it was (no dangling locator).
  Bundle b = tinyBundle();
  std::unique_ptr<exec::ParamStore> store = must(exec::ParamStore::create(b));
  store->initialize(1);
  std::unique_ptr<exec::Executor> ex = must(exec::Executor::create(b, *store));
  std::unique_ptr<device::CpuDevice> dev =
      must(device::CpuDevice::create(1 << 16));
  Expected<std::unique_ptr<stream::StreamExecutor>> s =
      stream::StreamExecutor::create(b, *store, *ex, *dev);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "step plan: the bundle has no step plan (compile it "
                         "with --device-memory)");
  std::vector<int32_t> tokens = {1, 2, 3, 4}, targets = {2, 3, 4, 5};
  EXPECT_TRUE(ex->loss(tokens.data(), targets.data(), 1, 4).ok());
}
