//===- ExecConvertTest.cpp - The CPU kernels on bf16 storage
//---------------===//
//
// Part of mtc. The conversion layer (runtime/exec/ExecConvert.cpp) that runs
// the fp32 CPU kernels under a bf16 plan on the CPU device: every bf16
// result equals the fp32 kernel on the widened operands, rounded to nearest
// even, bit for bit; an f32 operand an op reads as bf16 on the CUDA backend
// (a scalar constant) is rounded first, as there; parameter gradients stay
// f32 and exact; results take bf16 bytes where they are allocated (the
// plan's byte rule), and the operands are left as they were. The host
// executor (cpuBackend) runs the same bundle in fp32.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Bf16.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ParamStore.h"
#include "test/unit/Must.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace mtc::exec {
namespace {

using bundle::Bundle;
using bundle::Op;
using bundle::ValueType;

Op op(std::string name, std::vector<int> operands, std::vector<int> results,
      std::map<std::string, bundle::Attr> attrs = {}) {
  Op o;
  o.name = std::move(name);
  o.operands = std::move(operands);
  o.results = std::move(results);
  o.attrs = std::move(attrs);
  o.loc = "t.mt:1:1";
  return o;
}

/// f(x, y, w): m = x * 0.1, a = m + y, s = softmax(a), p = s @ w,
/// g = weight_grad(x, p) (a parameter gradient), e = exp(x).
Bundle convertBundle(const std::string &precision) {
  Bundle b;
  b.model = "M";
  bundle::Function f;
  auto t = [](Shape s) { return ValueType{std::move(s), DType::F32}; };
  f.values = {t({2, 3, 4}), t({2, 3, 4}), t({4, 4}),    t({}),
              t({2, 3, 4}), t({2, 3, 4}), t({2, 3, 4}), t({2, 3, 4}),
              t({4, 4}),    t({2, 3, 4})};
  f.args = {0, 1, 2};
  f.ops = {op("constant", {}, {3}, {{"value", 0.1}}),
           op("mul", {0, 3}, {4}),
           op("add", {4, 1}, {5}),
           op("softmax", {5}, {6}, {{"axis", int64_t(2)}}),
           op("matmul", {6, 2}, {7}),
           op("weight_grad", {0, 7}, {8}),
           op("exp", {0}, {9})};
  f.results = {7, 8};
  b.functions["f"] = f;
  b.step = std::make_shared<bundle::StepPlan>();
  b.step->precision = precision;
  return b;
}

Tensor bf16Tensor(std::vector<int64_t> shape, const std::vector<float> &v) {
  Tensor t = Tensor::empty(std::move(shape), DType::BF16);
  cpu::narrowToBF16(v.data(), reinterpret_cast<uint16_t *>(t.data()),
                    t.numel());
  return t;
}

std::vector<uint16_t> bitsOf(const Tensor &t) {
  const auto *p = reinterpret_cast<const uint16_t *>(t.data());
  return std::vector<uint16_t>(p, p + t.numel());
}

std::vector<float> wide(const Tensor &t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  cpu::widenBF16(reinterpret_cast<const uint16_t *>(t.data()), out.data(),
                 t.numel());
  return out;
}

std::vector<uint16_t> narrow(const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  cpu::narrowToBF16(v.data(), out.data(), static_cast<int64_t>(v.size()));
  return out;
}

struct Inputs {
  std::vector<float> x, y, w;
  Inputs() {
    std::mt19937 rng(3);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (auto *v : {&x, &y})
      for (int i = 0; i < 24; ++i)
        v->push_back(d(rng));
    for (int i = 0; i < 16; ++i)
      w.push_back(d(rng));
  }
};

TEST(ExecConvert, Bf16ResultsAreTheFp32KernelsRounded) {
  Bundle b = convertBundle("bf16");
  std::unique_ptr<ParamStore> store = must(ParamStore::create(b));
  std::unique_ptr<Executor> ex =
      must(Executor::create(b, *store, cpuDeviceBackend()));
  const bundle::Function &f = b.functions.at("f");
  Inputs in;
  std::vector<Tensor> v(f.values.size());
  v[0] = bf16Tensor({2, 3, 4}, in.x);
  v[1] = bf16Tensor({2, 3, 4}, in.y);
  v[2] = bf16Tensor({4, 4}, in.w);
  const float *x0 = v[0].data();
  ex->beginStep(1, 1);
  must(ex->runOps(f, v, 0, f.ops.size()));

  // The operands are untouched.
  EXPECT_EQ(v[0].data(), x0);
  EXPECT_EQ(v[0].dtype, DType::BF16);
  for (int r : {4, 5, 6, 7, 9})
    EXPECT_EQ(v[r].dtype, DType::BF16) << r;
  EXPECT_EQ(v[3].dtype, DType::F32);
  EXPECT_EQ(v[8].dtype, DType::F32);

  const std::vector<float> x = wide(v[0]), y = wide(v[1]), w = wide(v[2]);
  // x * 0.1: the f32 constant is read as bf16 (0x3dcd), as on CUDA.
  std::vector<float> m(24), a(24), s(24), p(24), g(16), e(24);
  const float c = cpu::fromBF16(cpu::toBF16(0.1f));
  for (int i = 0; i < 24; ++i)
    m[i] = x[i] * c;
  EXPECT_EQ(bitsOf(v[4]), narrow(m));
  m = wide(v[4]);
  for (int i = 0; i < 24; ++i)
    a[i] = m[i] + y[i];
  EXPECT_EQ(bitsOf(v[5]), narrow(a));
  cpu::softmax(wide(v[5]).data(), s.data(), 6, 4, 1);
  EXPECT_EQ(bitsOf(v[6]), narrow(s));
  cpu::matmul(wide(v[6]).data(), w.data(), nullptr, p.data(), 6, 4, 4);
  EXPECT_EQ(bitsOf(v[7]), narrow(p));
  // The parameter gradient: f32, from the widened operands, not rounded.
  cpu::matmulGradWeight(x.data(), wide(v[7]).data(), g.data(), 6, 4, 4);
  EXPECT_EQ(0, std::memcmp(g.data(), v[8].data(), sizeof(float) * 16));
  cpu::unary(cpu::Unary::Exp, x.data(), e.data(), 24, 0.0f);
  EXPECT_EQ(bitsOf(v[9]), narrow(e));
}

TEST(ExecConvert, ResultsTakeBf16BytesInTheWorkspace) {
  // Each result is bump-allocated where the kernel would allocate it, at
  // the byte rule's size: align64(2 n) for bf16, align64(4 n) for f32.
  Bundle b = convertBundle("bf16");
  std::unique_ptr<ParamStore> store = must(ParamStore::create(b));
  std::unique_ptr<Executor> ex =
      must(Executor::create(b, *store, cpuDeviceBackend()));
  const bundle::Function &f = b.functions.at("f");
  Inputs in;
  std::vector<Tensor> v(f.values.size());
  v[0] = bf16Tensor({2, 3, 4}, in.x);
  v[1] = bf16Tensor({2, 3, 4}, in.y);
  v[2] = bf16Tensor({4, 4}, in.w);
  std::vector<char> region(4096);
  Workspace ws(region.data(), static_cast<int64_t>(region.size()), "test");
  {
    Workspace::Scope scope(&ws);
    ex->beginStep(1, 1);
    must(ex->runOps(f, v, 0, f.ops.size()));
  }
  // constant (4 B), five bf16 [2,3,4] (48 B), g f32 [4,4] (64 B): 64 each.
  EXPECT_EQ(ws.peak(), 7 * 64);
  for (int r : {4, 5, 6, 7, 9}) {
    const char *at = reinterpret_cast<const char *>(v[r].data());
    EXPECT_TRUE(at >= region.data() && at < region.data() + region.size()) << r;
  }
}

TEST(ExecConvert, TheHostExecutorAndFp32PlansStayFp32) {
  for (const char *precision : {"bf16", "fp32"}) {
    Bundle b = convertBundle(precision);
    std::unique_ptr<ParamStore> store = must(ParamStore::create(b));
    // The host executor of a bf16 run, and the CPU device under fp32.
    Backend &backend =
        std::string(precision) == "bf16" ? cpuBackend() : cpuDeviceBackend();
    std::unique_ptr<Executor> ex = must(Executor::create(b, *store, backend));
    const bundle::Function &f = b.functions.at("f");
    Inputs in;
    std::vector<Tensor> v(f.values.size());
    v[0] = Tensor::view({2, 3, 4}, in.x.data());
    v[1] = Tensor::view({2, 3, 4}, in.y.data());
    v[2] = Tensor::view({4, 4}, in.w.data());
    ex->beginStep(1, 1);
    must(ex->runOps(f, v, 0, f.ops.size()));
    std::vector<float> m(24);
    for (int i = 0; i < 24; ++i)
      m[i] = in.x[i] * 0.1f;
    EXPECT_EQ(v[4].dtype, DType::F32);
    EXPECT_EQ(0, std::memcmp(m.data(), v[4].data(), sizeof(float) * 24))
        << precision;
    EXPECT_EQ(v[7].dtype, DType::F32);
  }
}

} // namespace
} // namespace mtc::exec
