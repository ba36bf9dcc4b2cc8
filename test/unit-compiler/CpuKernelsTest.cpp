//===- CpuKernelsTest.cpp - Compiled mt.fused kernels vs the CPU runtime --===//
//
// Part of mtc. Each test parses mt.fused regions from MLIR text, compiles
// them with compileCpuKernels, loads the shared object with KernelLibrary and
// compares every kernel on random data (plus special values) with the CPU
// reference kernels of runtime/cpu/Kernels.h.
//
// Tolerances: |got - want| <= atol + rtol |want|, NaN matching NaN and
// infinities matching exactly. exp, tanh, sigmoid and everything built on them
// use the runtime's own algorithms (rtol 1e-6, atol 1e-7; bit-identical on an
// AVX-512 host, where both sides contract the same multiply-adds into FMAs).
// erf and log come from MLIR's polynomial approximations instead of libm
// (rtol 4e-6, atol 1e-6 on gelu_erf and log, see ErfAndLogAccuracy for their
// error against double precision); so does gelu_tanh, whose gradient cancels
// near x = -3.5 and differs in the last bits between FMA and non-FMA code.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/CpuKernels.h"
#include "dialects/mt/MtDialect.h"
#include "lib/Bundle/Bundle.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/exec/KernelLibrary.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <thread>

using namespace mtc;

namespace {

using Vec = std::vector<float>;
using Kernel = exec::KernelLibrary::Kernel;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Tol {
  float rtol = 1e-6f, atol = 1e-7f;
};
constexpr Tol kExact{1e-6f, 1e-7f};
constexpr Tol kApprox{4e-6f, 1e-6f};

/// A compiled module and the kernel of each of its mt.fused ops (walk order).
struct Compiled {
  std::unique_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  CpuKernelLibrary lib;
  std::string llvmIR;
  std::unique_ptr<exec::KernelLibrary> loaded;
  std::vector<std::string> names;

  Kernel kernel(size_t k) const {
    Expected<Kernel> f = loaded->lookup(names.at(k));
    EXPECT_TRUE(f.ok()) << f.message();
    return f.ok() ? *f : nullptr;
  }
};

Compiled compile(const std::string &text, const std::string &cpu = "") {
  Compiled c;
  c.ctx = std::make_unique<mlir::MLIRContext>();
  c.ctx->loadDialect<mt::MtDialect, mlir::func::FuncDialect>();
  c.module = mlir::parseSourceString<mlir::ModuleOp>(text, c.ctx.get());
  if (!c.module) {
    ADD_FAILURE() << "cannot parse:\n" << text;
    return c;
  }
  CpuKernelOptions options;
  options.cpu = cpu;
  options.llvmIR = &c.llvmIR;
  llvm::Expected<CpuKernelLibrary> lib = compileCpuKernels(*c.module, options);
  if (!lib) {
    ADD_FAILURE() << llvm::toString(lib.takeError());
    return c;
  }
  c.lib = std::move(*lib);
  c.module->walk([&](mt::FusedOp f) {
    c.names.push_back(f.getKernel() ? f.getKernel()->str() : "");
  });
  Expected<std::unique_ptr<exec::KernelLibrary>> l =
      exec::KernelLibrary::load(c.lib.sharedObject);
  if (!l.ok()) {
    ADD_FAILURE() << l.message();
    return c;
  }
  c.loaded = std::move(*l);
  return c;
}

Vec randomVec(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Vec v(n);
  for (float &x : v)
    x = u(rng);
  return v;
}

/// Largest |got - want| / (atol + rtol |want|) (<= 1 passes), reporting the
/// first failure.
double compare(const Vec &got, const Vec &want, Tol tol, const Vec &x,
               const std::string &what) {
  double worst = 0;
  bool reported = false;
  for (size_t i = 0; i < want.size(); ++i) {
    float g = got[i], w = want[i];
    if ((std::isnan(g) && std::isnan(w)) || g == w)
      continue;
    double ratio = std::isfinite(g) && std::isfinite(w)
                       ? std::fabs(double(g) - w) /
                             (tol.atol + tol.rtol * std::fabs(double(w)))
                       : std::numeric_limits<double>::infinity();
    worst = std::max(worst, ratio);
    if (ratio > 1 && !reported) {
      ADD_FAILURE() << what << ": element " << i << " (x = " << x[i]
                    << "): got " << g << ", want " << w;
      reported = true;
    }
  }
  return worst;
}

const char *kT = "!mt.tensor<[B, S, 64], f32>";

std::string fusedFunc(const std::string &name,
                      const std::vector<std::string> &inTypes,
                      const std::vector<std::string> &outTypes,
                      const std::string &body, const std::string &yield) {
  std::string args, ins, argsT, blockArgs, outs;
  for (size_t k = 0; k < inTypes.size(); ++k) {
    std::string sep = k ? ", " : "";
    args += sep + "%x" + std::to_string(k) + ": " + inTypes[k];
    ins += sep + "%x" + std::to_string(k);
    argsT += sep + inTypes[k];
    blockArgs += sep + "%a" + std::to_string(k) + ": " + inTypes[k];
  }
  for (size_t r = 0; r < outTypes.size(); ++r)
    outs += (r ? ", " : "") + outTypes[r];
  std::string results =
      outTypes.size() == 1 ? "%r" : "%r#0, %r#1"; // at most two results here
  std::string rdecl =
      outTypes.size() == 1 ? "%r" : "%r:" + std::to_string(outTypes.size());
  return "func.func @" + name + "(" + args + ") -> (" + outs + ") {\n  " +
         rdecl + " = mt.fused(" + ins + ") : (" + argsT + ") -> (" + outs +
         ") {\n  ^bb0(" + blockArgs + "):\n" + body + "    mt.yield " + yield +
         " : " + outs + "\n  }\n  return " + results + " : " + outs + "\n}\n";
}

struct UnaryKind {
  const char *name; ///< unary_grad kind
  std::string op;   ///< the forward op's text, with %a0
  cpu::Unary unary;
  float param;
  bool positive; ///< domain x > 0
  Tol tol;
};

std::vector<UnaryKind> unaryKinds() {
  auto simple = [](const char *n, cpu::Unary u, bool pos = false,
                   Tol tol = kExact) {
    return UnaryKind{n,  std::string("mt.") + n + " %a0 : " + kT, u, 0, pos,
                     tol};
  };
  return {
      simple("neg", cpu::Unary::Neg),
      simple("exp", cpu::Unary::Exp),
      simple("log", cpu::Unary::Log, true, kApprox),
      simple("silu", cpu::Unary::Silu),
      simple("relu", cpu::Unary::Relu),
      simple("sigmoid", cpu::Unary::Sigmoid),
      simple("tanh", cpu::Unary::Tanh),
      simple("rsqrt", cpu::Unary::Rsqrt, true),
      simple("sqrt", cpu::Unary::Sqrt, true),
      simple("square", cpu::Unary::Square),
      {"gelu_erf", std::string("mt.gelu %a0 approximate = \"none\" : ") + kT,
       cpu::Unary::GeluErf, 0, false, kApprox},
      // dy (0.5 (1 + t) + 0.5 x (1 - t^2) u') cancels near x = -3.5.
      {"gelu_tanh", std::string("mt.gelu %a0 approximate = \"tanh\" : ") + kT,
       cpu::Unary::GeluTanh, 0, false, kApprox},
      {"softcap", std::string("mt.softcap %a0 cap = 5.0 : ") + kT,
       cpu::Unary::Softcap, 5.0f, false, kExact},
      simple("relu2", cpu::Unary::Relu2),
  };
}

/// Random inputs of \p n elements whose first entries are special values.
Vec unaryInput(const UnaryKind &k, size_t n, uint32_t seed) {
  Vec x = k.positive ? randomVec(n, 0.01f, 9.0f, seed)
                     : randomVec(n, -9.0f, 9.0f, seed);
  std::vector<float> special = {0.0f,    -0.0f, 1e-20f, -1e-20f, 100.0f,
                                -100.0f, 88.0f, -88.0f, 0.6f,    -0.6f,
                                kInf,    -kInf, kNaN,   1e-3f,   -1e-3f};
  if (k.positive)
    special = {1e-30f, 1e-6f, 1e6f, 1.0f, kInf, kNaN};
  std::copy(special.begin(), special.end(), x.begin());
  return x;
}

} // namespace

// The kinds below are every function of lib/Bundle/UnaryFns.def, in order.
TEST(CpuKernels, UnaryKindsAreEveryFunction) {
  std::vector<UnaryKind> kinds = unaryKinds();
  ASSERT_EQ(kinds.size(), bundle::kNumUnaryFns);
  for (size_t k = 0; k < kinds.size(); ++k) {
    EXPECT_EQ(kinds[k].unary, static_cast<cpu::Unary>(k));
    EXPECT_STREQ(kinds[k].name, bundle::unaryFnName(kinds[k].unary));
  }
}

// Every forward kind on a full input, at an n that is not a multiple of the
// vector width (the kernel does not check shapes; a region with only full
// inputs runs on any n).
TEST(CpuKernels, Unary) {
  std::string text;
  for (const UnaryKind &k : unaryKinds())
    text += fusedFunc(std::string("u_") + k.name, {kT}, {kT},
                      "    %y = " + k.op + "\n", "%y");
  Compiled c = compile(text);
  ASSERT_TRUE(c.loaded);
  const size_t n = 1003;
  std::vector<UnaryKind> kinds = unaryKinds();
  for (size_t k = 0; k < kinds.size(); ++k) {
    Vec x = unaryInput(kinds[k], n, 17 + k), got(n, -1.0f), want(n);
    cpu::unary(kinds[k].unary, x.data(), want.data(), n, kinds[k].param);
    const float *ins[] = {x.data()};
    float *outs[] = {got.data()};
    c.kernel(k)(ins, outs, n);
    double worst = compare(got, want, kinds[k].tol, x, kinds[k].name);
    std::printf("  %-10s worst error / tolerance = %.3g\n", kinds[k].name,
                worst);
  }
}

// dy * f'(x) for every unary_grad kind.
TEST(CpuKernels, UnaryGrad) {
  std::string text;
  std::vector<UnaryKind> kinds = unaryKinds();
  for (const UnaryKind &k : kinds)
    text += fusedFunc(std::string("g_") + k.name, {kT, kT}, {kT},
                      std::string("    %y = mt.unary_grad ") + k.name +
                          " %a0, %a1 param = " + std::to_string(k.param) +
                          " : " + kT + "\n",
                      "%y");
  Compiled c = compile(text);
  ASSERT_TRUE(c.loaded);
  const size_t n = 1003;
  for (size_t k = 0; k < kinds.size(); ++k) {
    Vec x = unaryInput(kinds[k], n, 31 + k);
    Vec dy = randomVec(n, -2.0f, 2.0f, 97 + k), got(n, -1.0f), want(n);
    cpu::unaryGrad(kinds[k].unary, x.data(), dy.data(), want.data(), n,
                   kinds[k].param);
    const float *ins[] = {x.data(), dy.data()};
    float *outs[] = {got.data()};
    c.kernel(k)(ins, outs, n);
    double worst = compare(got, want, kinds[k].tol, x,
                           std::string("grad ") + kinds[k].name);
    std::printf("  grad %-10s worst error / tolerance = %.3g\n", kinds[k].name,
                worst);
  }
}

// add/sub/mul/div with each operand full, scalar or a suffix.
TEST(CpuKernels, BinaryAccessModes) {
  struct Operand {
    const char *type;
    std::vector<int64_t> shape; ///< concrete, for cpu::binary
  };
  const int64_t B = 3, S = 5;
  std::vector<int64_t> full = {B, S, 64};
  std::vector<Operand> operands = {{kT, full},
                                   {"!mt.tensor<[], f32>", {}},
                                   {"!mt.tensor<[64], f32>", {64}},
                                   {"!mt.tensor<[1], f32>", {1}}};
  struct Pair {
    size_t a, b;
  };
  std::vector<Pair> pairs = {{0, 0}, {0, 1}, {0, 2}, {2, 0}, {1, 0}, {0, 3}};
  const char *ops[] = {"add", "sub", "mul", "div"};
  cpu::Binary kinds[] = {cpu::Binary::Add, cpu::Binary::Sub, cpu::Binary::Mul,
                         cpu::Binary::Div};
  std::string text;
  for (const char *op : ops)
    for (const Pair &p : pairs)
      text += fusedFunc(std::string("b_") + op + std::to_string(p.a) +
                            std::to_string(p.b),
                        {operands[p.a].type, operands[p.b].type}, {kT},
                        std::string("    %y = mt.") + op +
                            " %a0, %a1 : " + operands[p.a].type + ", " +
                            operands[p.b].type + " -> " + kT + "\n",
                        "%y");
  Compiled c = compile(text);
  ASSERT_TRUE(c.loaded);
  size_t n = B * S * 64, k = 0;
  auto numel = [](const std::vector<int64_t> &s) {
    size_t m = 1;
    for (int64_t d : s)
      m *= d;
    return m;
  };
  for (size_t o = 0; o < 4; ++o)
    for (const Pair &p : pairs) {
      const Operand &oa = operands[p.a], &ob = operands[p.b];
      Vec a = randomVec(numel(oa.shape), -4, 4, 5 + k);
      Vec b = randomVec(numel(ob.shape), 0.5f, 4, 7 + k);
      Vec got(n, -1.0f), want(n);
      cpu::binary(kinds[o], a.data(), oa.shape, b.data(), ob.shape, want.data(),
                  full);
      const float *ins[] = {a.data(), b.data()};
      float *outs[] = {got.data()};
      c.kernel(k)(ins, outs, n);
      compare(got, want, Tol{0, 0}, Vec(n, 0.0f),
              std::string(ops[o]) + " " + oa.type + ", " + ob.type);
      ++k;
    }
}

namespace {

// A SwiGLU-style chain with two results, a constant, a scalar input and two
// nested suffix sizes ([64] divides [7, 64]), including an intermediate value
// of suffix shape: iteration shape [B, 7, 64].
const char *kChain = R"(
func.func @chain(%x: !mt.tensor<[B, 7, 64], f32>, %y: !mt.tensor<[B, 7, 64], f32>, %w: !mt.tensor<[64], f32>, %v: !mt.tensor<[7, 64], f32>, %s: !mt.tensor<[], f32>) -> (!mt.tensor<[B, 7, 64], f32>, !mt.tensor<[B, 7, 64], f32>) {
  %r:2 = mt.fused (%x, %y, %w, %v, %s) : (!mt.tensor<[B, 7, 64], f32>, !mt.tensor<[B, 7, 64], f32>, !mt.tensor<[64], f32>, !mt.tensor<[7, 64], f32>, !mt.tensor<[], f32>) -> (!mt.tensor<[B, 7, 64], f32>, !mt.tensor<[B, 7, 64], f32>) {
  ^bb0(%a: !mt.tensor<[B, 7, 64], f32>, %b: !mt.tensor<[B, 7, 64], f32>, %c: !mt.tensor<[64], f32>, %d: !mt.tensor<[7, 64], f32>, %e: !mt.tensor<[], f32>):
    %0 = mt.silu %a : !mt.tensor<[B, 7, 64], f32>
    %1 = mt.mul %0, %b : !mt.tensor<[B, 7, 64], f32>, !mt.tensor<[B, 7, 64], f32> -> !mt.tensor<[B, 7, 64], f32>
    %k = mt.constant 5.000000e-01 : !mt.tensor<[], f32>
    %2 = mt.mul %1, %k : !mt.tensor<[B, 7, 64], f32>, !mt.tensor<[], f32> -> !mt.tensor<[B, 7, 64], f32>
    %3 = mt.add %2, %c : !mt.tensor<[B, 7, 64], f32>, !mt.tensor<[64], f32> -> !mt.tensor<[B, 7, 64], f32>
    %4 = mt.add %d, %c : !mt.tensor<[7, 64], f32>, !mt.tensor<[64], f32> -> !mt.tensor<[7, 64], f32>
    %5 = mt.mul %3, %4 : !mt.tensor<[B, 7, 64], f32>, !mt.tensor<[7, 64], f32> -> !mt.tensor<[B, 7, 64], f32>
    %6 = mt.sub %5, %e : !mt.tensor<[B, 7, 64], f32>, !mt.tensor<[], f32> -> !mt.tensor<[B, 7, 64], f32>
    mt.yield %3, %6 : !mt.tensor<[B, 7, 64], f32>, !mt.tensor<[B, 7, 64], f32>
  }
  return %r#0, %r#1 : !mt.tensor<[B, 7, 64], f32>, !mt.tensor<[B, 7, 64], f32>
}
)";

void checkChain(const Compiled &c) {
  const int64_t B = 3;
  const size_t n = B * 7 * 64;
  std::vector<int64_t> full = {B, 7, 64}, w64 = {64}, v = {7, 64}, sc = {};
  Vec x = randomVec(n, -6, 6, 1), y = randomVec(n, -2, 2, 2);
  Vec w = randomVec(64, -1, 1, 3), d = randomVec(7 * 64, -1, 1, 4);
  Vec s = {0.25f}, half = {0.5f};
  // The reference, op by op.
  Vec t0(n), t1(n), t2(n), r0(n), t4(7 * 64), t5(n), r1(n);
  cpu::unary(cpu::Unary::Silu, x.data(), t0.data(), n);
  cpu::binary(cpu::Binary::Mul, t0.data(), full, y.data(), full, t1.data(),
              full);
  cpu::binary(cpu::Binary::Mul, t1.data(), full, half.data(), sc, t2.data(),
              full);
  cpu::binary(cpu::Binary::Add, t2.data(), full, w.data(), w64, r0.data(),
              full);
  cpu::binary(cpu::Binary::Add, d.data(), v, w.data(), w64, t4.data(), v);
  cpu::binary(cpu::Binary::Mul, r0.data(), full, t4.data(), v, t5.data(), full);
  cpu::binary(cpu::Binary::Sub, t5.data(), full, s.data(), sc, r1.data(), full);
  Vec got0(n, -1.0f), got1(n, -1.0f);
  const float *ins[] = {x.data(), y.data(), w.data(), d.data(), s.data()};
  float *outs[] = {got0.data(), got1.data()};
  c.kernel(0)(ins, outs, n);
  compare(got0, r0, kExact, x, "chain result 0");
  compare(got1, r1, kExact, x, "chain result 1");
}

} // namespace

TEST(CpuKernels, ChainNestedSuffixesTwoResults) {
  Compiled c = compile(kChain);
  ASSERT_TRUE(c.loaded);
  checkChain(c);
  // The code is vectorised and calls nothing but LLVM intrinsics (no libm).
  EXPECT_NE(c.llvmIR.find(" x float>"), std::string::npos);
  std::istringstream lines(c.llvmIR);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("declare", 0) == 0)
      EXPECT_NE(line.find("@llvm."), std::string::npos) << line;
}

TEST(CpuKernels, GenericX86Target) {
  Compiled c = compile(kChain, "x86-64");
  ASSERT_TRUE(c.loaded);
  EXPECT_EQ(c.lib.cpu, "x86-64");
  checkChain(c);
}

TEST(CpuKernels, UnknownCpuIsAnError) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mt::MtDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(kChain, &ctx);
  ASSERT_TRUE(module);
  CpuKernelOptions options;
  options.cpu = "no-such-cpu";
  llvm::Expected<CpuKernelLibrary> lib = compileCpuKernels(*module, options);
  ASSERT_FALSE(lib);
  std::string err = llvm::toString(lib.takeError());
  EXPECT_NE(err.find("unknown CPU 'no-such-cpu'"), std::string::npos) << err;
}

// Identical regions share a kernel; different ones do not.
TEST(CpuKernels, IdenticalRegionsShareAKernel) {
  std::string body = std::string("    %y = mt.exp %a0 : ") + kT + "\n";
  std::string text =
      fusedFunc("f0", {kT}, {kT}, body, "%y") +
      fusedFunc("f1", {kT}, {kT}, body, "%y") +
      fusedFunc("f2", {kT}, {kT},
                std::string("    %y = mt.neg %a0 : ") + kT + "\n", "%y");
  Compiled c = compile(text);
  ASSERT_TRUE(c.loaded);
  EXPECT_EQ(c.lib.numKernels, 2u);
  ASSERT_EQ(c.names.size(), 3u);
  EXPECT_EQ(c.names[0], "mtc_fused_0");
  EXPECT_EQ(c.names[1], "mtc_fused_0");
  EXPECT_EQ(c.names[2], "mtc_fused_1");
}

TEST(CpuKernels, NoRegionsNoLibrary) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mt::MtDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(
      "func.func @f() { return }", &ctx);
  ASSERT_TRUE(module);
  llvm::Expected<std::string> so = compileCpuKernels(*module);
  ASSERT_TRUE(bool(so)) << llvm::toString(so.takeError());
  EXPECT_TRUE(so->empty());
}

// The bytes survive the bundle's JSON (base64) and load from there.
TEST(CpuKernels, BundleCarriesTheLibrary) {
  Compiled c = compile(kChain);
  ASSERT_TRUE(c.loaded);
  bundle::Bundle b;
  b.model = "M";
  b.cpuKernels = c.lib.sharedObject;
  b.cpuKernelsTarget = c.lib.cpu;
  Expected<bundle::Bundle> back = bundle::fromJson(bundle::toJson(b));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->cpuKernels, b.cpuKernels);
  EXPECT_EQ(back->cpuKernelsTarget, c.lib.cpu);
  Compiled fromBundle;
  Expected<std::unique_ptr<exec::KernelLibrary>> l =
      exec::KernelLibrary::load(back->cpuKernels);
  ASSERT_TRUE(l.ok()) << l.message();
  fromBundle.loaded = std::move(*l);
  fromBundle.names = c.names;
  checkChain(fromBundle);
}

TEST(KernelLibrary, Errors) {
  Expected<std::unique_ptr<exec::KernelLibrary>> bad =
      exec::KernelLibrary::load("not an object");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("not an ELF shared object"), std::string::npos);
  // A truncated ELF file: dlopen's own message comes through.
  Compiled c = compile(kChain);
  ASSERT_TRUE(c.loaded);
  Expected<std::unique_ptr<exec::KernelLibrary>> cut =
      exec::KernelLibrary::load(c.lib.sharedObject.substr(0, 100));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.message().find("cannot load the shared object"),
            std::string::npos)
      << cut.message();
  Expected<Kernel> missing = c.loaded->lookup("mtc_fused_99");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no kernel 'mtc_fused_99'"),
            std::string::npos);
}

namespace {

std::string tensorType(const std::string &dims) {
  return "!mt.tensor<[" + dims + "], f32>";
}

Vec runBinary(cpu::Binary op, const Vec &a, const std::vector<int64_t> &as,
              const Vec &b, const std::vector<int64_t> &bs,
              const std::vector<int64_t> &out) {
  size_t n = 1;
  for (int64_t d : out)
    n *= d;
  Vec y(n);
  cpu::binary(op, a.data(), as, b.data(), bs, y.data(), out);
  return y;
}

} // namespace

// sum, mean and max over the last axis (keepdim or not) after an
// elementwise prologue with a suffix and a scalar input, for row lengths
// below one 16-lane chunk, with a partial chunk, and over several 256-element
// blocks with a tail; the prologue value is a second (full) result. Against
// cpu::binary + cpu::reduce: bit-identical (the kernel adds in the runtime's
// order: 16 float lanes, blocks of 256 into a double). The prologue is
// (x + w) - s so that no multiply-add contracts: a fused x * w + s is one FMA
// where the runtime rounds twice (see checkChain's tolerance).
TEST(CpuKernels, Reductions) {
  const int64_t B = 3, S = 7;
  const int64_t lengths[] = {5, 16, 77, 300, 1037};
  struct Kind {
    const char *op;
    cpu::Reduce r;
    bool keepdim;
  };
  std::vector<Kind> kinds = {
      {"sum", cpu::Reduce::Sum, false},  {"mean", cpu::Reduce::Mean, false},
      {"max", cpu::Reduce::Max, false},  {"sum", cpu::Reduce::Sum, true},
      {"mean", cpu::Reduce::Mean, true}, {"max", cpu::Reduce::Max, true}};
  std::string text;
  for (int64_t N : lengths)
    for (const Kind &k : kinds) {
      std::string full = tensorType("B, 7, " + std::to_string(N));
      std::string w = tensorType(std::to_string(N)), sc = tensorType("");
      std::string row = tensorType(k.keepdim ? "B, 7, 1" : "B, 7");
      text += fusedFunc(
          std::string("r_") + k.op + (k.keepdim ? "k" : "") + std::to_string(N),
          {full, w, sc}, {row, full},
          "    %m = mt.add %a0, %a1 : " + full + ", " + w + " -> " + full +
              "\n    %t = mt.sub %m, %a2 : " + full + ", " + sc + " -> " +
              full + "\n    %y = mt." + k.op + " %t axis = 2" +
              (k.keepdim ? " keepdim" : "") + " : " + full + " -> " + row +
              "\n",
          "%y, %t");
    }
  Compiled c = compile(text);
  ASSERT_TRUE(c.loaded);
  size_t kernel = 0;
  for (int64_t N : lengths)
    for (const Kind &k : kinds) {
      std::vector<int64_t> full = {B, S, N};
      size_t n = B * S * N, rows = B * S;
      Vec x = randomVec(n, -3, 3, 11 + kernel), w = randomVec(N, 0.5f, 2, 3),
          sc = {0.125f};
      // Special values in some rows: NaN (max ignores it, sums propagate
      // it), infinities, signed zeros.
      x[N / 2] = kNaN;
      x[N + 1] = kInf;
      x[2 * N] = -kInf;
      if (N > 16) {
        for (int64_t j = 0; j < N; ++j)
          x[3 * N + j] = j % 2 ? 0.0f : -0.0f;
      }
      Vec t = runBinary(cpu::Binary::Sub,
                        runBinary(cpu::Binary::Add, x, full, w, {N}, full),
                        full, sc, {}, full);
      Vec want(rows);
      cpu::reduce(k.r, t.data(), want.data(), rows, N, 1);
      Vec got(rows, -1.0f), gotT(n, -1.0f);
      const float *ins[] = {x.data(), w.data(), sc.data()};
      float *outs[] = {got.data(), gotT.data()};
      c.kernel(kernel)(ins, outs, int64_t(n));
      std::string what = std::string(k.op) + (k.keepdim ? " keepdim" : "") +
                         " n = " + std::to_string(N);
      compare(gotT, t, Tol{0, 0}, x, what + " (prologue)");
      compare(got, want, Tol{0, 0}, Vec(rows, 0.0f), what);
      for (size_t r = 0; r < rows; ++r) // exact, signed zeros included
        if (!std::isnan(want[r]))
          EXPECT_EQ(std::signbit(got[r]), std::signbit(want[r])) << what;
      ++kernel;
    }
}

namespace {

// A hand-written RMSNorm as mtc-fuse splits it: rsqrt(mean(x^2) + eps) per
// row, then x * r * w with r read per row and w a suffix.
const char *kRmsNorm = R"(
func.func @rms(%x: !mt.tensor<[B, S, 96], f32>, %w: !mt.tensor<[96], f32>) -> !mt.tensor<[B, S, 96], f32> {
  %r = mt.fused(%x) : (!mt.tensor<[B, S, 96], f32>) -> !mt.tensor<[B, S, 1], f32> {
  ^bb0(%a: !mt.tensor<[B, S, 96], f32>):
    %q = mt.square %a : !mt.tensor<[B, S, 96], f32>
    %m = mt.mean %q axis = 2 keepdim : !mt.tensor<[B, S, 96], f32> -> !mt.tensor<[B, S, 1], f32>
    %e = mt.constant 1.000000e-05 : !mt.tensor<[], f32>
    %v = mt.add %m, %e : !mt.tensor<[B, S, 1], f32>, !mt.tensor<[], f32> -> !mt.tensor<[B, S, 1], f32>
    %s = mt.rsqrt %v : !mt.tensor<[B, S, 1], f32>
    mt.yield %s : !mt.tensor<[B, S, 1], f32>
  }
  %y = mt.fused(%x, %r, %w) : (!mt.tensor<[B, S, 96], f32>, !mt.tensor<[B, S, 1], f32>, !mt.tensor<[96], f32>) -> !mt.tensor<[B, S, 96], f32> {
  ^bb0(%a: !mt.tensor<[B, S, 96], f32>, %b: !mt.tensor<[B, S, 1], f32>, %c: !mt.tensor<[96], f32>):
    %0 = mt.mul %a, %b : !mt.tensor<[B, S, 96], f32>, !mt.tensor<[B, S, 1], f32> -> !mt.tensor<[B, S, 96], f32>
    %1 = mt.mul %0, %c : !mt.tensor<[B, S, 96], f32>, !mt.tensor<[96], f32> -> !mt.tensor<[B, S, 96], f32>
    mt.yield %1 : !mt.tensor<[B, S, 96], f32>
  }
  return %y : !mt.tensor<[B, S, 96], f32>
}
)";

// Two reductions of one prologue and row ops on them with a per-row input
// ([B, S]) and a scalar input: (sum(t) - max(t)) * o + s, t = tanh(x).
const char *kRowPhase = R"(
func.func @rows(%x: !mt.tensor<[B, S, 40], f32>, %o: !mt.tensor<[B, S], f32>, %s: !mt.tensor<[], f32>) -> (!mt.tensor<[B, S], f32>, !mt.tensor<[B, S], f32>) {
  %r:2 = mt.fused(%x, %o, %s) : (!mt.tensor<[B, S, 40], f32>, !mt.tensor<[B, S], f32>, !mt.tensor<[], f32>) -> (!mt.tensor<[B, S], f32>, !mt.tensor<[B, S], f32>) {
  ^bb0(%a: !mt.tensor<[B, S, 40], f32>, %b: !mt.tensor<[B, S], f32>, %c: !mt.tensor<[], f32>):
    %t = mt.tanh %a : !mt.tensor<[B, S, 40], f32>
    %0 = mt.sum %t axis = 2 : !mt.tensor<[B, S, 40], f32> -> !mt.tensor<[B, S], f32>
    %1 = mt.max %t axis = 2 : !mt.tensor<[B, S, 40], f32> -> !mt.tensor<[B, S], f32>
    %2 = mt.sub %0, %1 : !mt.tensor<[B, S], f32>, !mt.tensor<[B, S], f32> -> !mt.tensor<[B, S], f32>
    %3 = mt.mul %2, %b : !mt.tensor<[B, S], f32>, !mt.tensor<[B, S], f32> -> !mt.tensor<[B, S], f32>
    %4 = mt.add %3, %c : !mt.tensor<[B, S], f32>, !mt.tensor<[], f32> -> !mt.tensor<[B, S], f32>
    mt.yield %4, %1 : !mt.tensor<[B, S], f32>, !mt.tensor<[B, S], f32>
  }
  return %r#0, %r#1 : !mt.tensor<[B, S], f32>, !mt.tensor<[B, S], f32>
}
)";

} // namespace

TEST(CpuKernels, RmsNormChain) {
  Compiled c = compile(kRmsNorm);
  ASSERT_TRUE(c.loaded);
  const int64_t B = 2, S = 9, D = 96;
  std::vector<int64_t> full = {B, S, D}, rowShape = {B, S, 1};
  size_t n = B * S * D, rows = B * S;
  Vec x = randomVec(n, -2, 2, 5), w = randomVec(D, 0.5f, 1.5f, 6),
      eps = {1e-5f};
  // Reference: the runtime kernels op by op.
  Vec q(n), m(rows), r(rows);
  cpu::unary(cpu::Unary::Square, x.data(), q.data(), n);
  cpu::reduce(cpu::Reduce::Mean, q.data(), m.data(), rows, D, 1);
  Vec v = runBinary(cpu::Binary::Add, m, rowShape, eps, {}, rowShape);
  cpu::unary(cpu::Unary::Rsqrt, v.data(), r.data(), rows);
  Vec y = runBinary(cpu::Binary::Mul,
                    runBinary(cpu::Binary::Mul, x, full, r, rowShape, full),
                    full, w, {D}, full);
  Vec gotR(rows, -1.0f), gotY(n, -1.0f);
  {
    const float *ins[] = {x.data()};
    float *outs[] = {gotR.data()};
    c.kernel(0)(ins, outs, int64_t(n)); // n: elements of [B, S, 96]
  }
  {
    const float *ins[] = {x.data(), gotR.data(), w.data()};
    float *outs[] = {gotY.data()};
    c.kernel(1)(ins, outs, int64_t(n));
  }
  compare(gotR, r, Tol{0, 0}, Vec(rows, 0.0f), "rsqrt(mean(x^2) + eps)");
  compare(gotY, y, Tol{0, 0}, x, "x * r * w");
  // And against double precision: the runtime's order costs nothing.
  double worst = 0;
  for (size_t row = 0; row < rows; ++row) {
    double ss = 0;
    for (int64_t j = 0; j < D; ++j)
      ss += double(x[row * D + j]) * x[row * D + j];
    double truth = 1.0 / std::sqrt(ss / D + 1e-5);
    worst = std::max(worst, std::fabs(gotR[row] - truth) / truth);
  }
  EXPECT_LE(worst, 1e-6);
}

TEST(CpuKernels, RowPhaseInputs) {
  Compiled c = compile(kRowPhase);
  ASSERT_TRUE(c.loaded);
  const int64_t B = 3, S = 5, D = 40;
  std::vector<int64_t> rowShape = {B, S};
  size_t n = B * S * D, rows = B * S;
  Vec x = randomVec(n, -3, 3, 8), o = randomVec(rows, -1, 1, 9), sc = {0.75f};
  Vec t(n), sum(rows), mx(rows);
  cpu::unary(cpu::Unary::Tanh, x.data(), t.data(), n);
  cpu::reduce(cpu::Reduce::Sum, t.data(), sum.data(), rows, D, 1);
  cpu::reduce(cpu::Reduce::Max, t.data(), mx.data(), rows, D, 1);
  Vec want = runBinary(cpu::Binary::Add,
                       runBinary(cpu::Binary::Mul,
                                 runBinary(cpu::Binary::Sub, sum, rowShape, mx,
                                           rowShape, rowShape),
                                 rowShape, o, rowShape, rowShape),
                       rowShape, sc, {}, rowShape);
  Vec got(rows, -1.0f), gotMax(rows, -1.0f);
  const float *ins[] = {x.data(), o.data(), sc.data()};
  float *outs[] = {got.data(), gotMax.data()};
  c.kernel(0)(ins, outs, int64_t(n));
  compare(got, want, kExact, Vec(rows, 0.0f), "(sum - max) * o + s");
  compare(gotMax, mx, Tol{0, 0}, Vec(rows, 0.0f), "max");
}

// The kernels need the row length: a reduction over a symbolic last axis is
// an error (mtc-fuse never builds such a region).
TEST(CpuKernels, SymbolicRowLengthIsAnError) {
  std::string t = tensorType("B, S"), r = tensorType("B");
  std::string text = fusedFunc(
      "f", {t}, {r}, "    %y = mt.sum %a0 axis = 1 : " + t + " -> " + r + "\n",
      "%y");
  mlir::MLIRContext ctx;
  ctx.loadDialect<mt::MtDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  ASSERT_TRUE(module);
  llvm::Expected<CpuKernelLibrary> lib =
      compileCpuKernels(*module, CpuKernelOptions());
  ASSERT_FALSE(lib);
  std::string err = llvm::toString(lib.takeError());
  EXPECT_NE(err.find("needs a static last axis"), std::string::npos) << err;
}

// Prints the time of a fused silu(x) * y against cpu::unary + cpu::binary.
// Not a pass/fail check: the numbers in docs/compiler.md come from here.
TEST(CpuKernels, SiluMulSpeed) {
  std::string text = fusedFunc("swiglu", {kT, kT}, {kT},
                               std::string("    %s = mt.silu %a0 : ") + kT +
                                   "\n    %y = mt.mul %s, %a1 : " + kT + ", " +
                                   kT + " -> " + kT + "\n",
                               "%y");
  // The host CPU and generic x86-64 (SSE2); 256 KiB per tensor (in cache)
  // and 16 MiB (memory-bound).
  Compiled host = compile(text), generic = compile(text, "x86-64");
  ASSERT_TRUE(host.loaded && generic.loaded);
  for (size_t n : {size_t(1) << 16, size_t(1) << 22}) {
    std::vector<int64_t> shape = {int64_t(n)};
    Vec x = randomVec(n, -6, 6, 1), y = randomVec(n, -2, 2, 2), t(n), out(n),
        fused(n);
    for (const Compiled *cp : {&host, &generic}) {
      const Compiled &c = *cp;
      Kernel k = c.kernel(0);
      int reps = n < (size_t(1) << 20) ? 200 : 7;
      auto best = [&](const std::function<void()> &f) {
        double ms = 1e30;
        for (int rep = 0; rep < reps; ++rep) {
          auto t0 = std::chrono::steady_clock::now();
          f();
          ms = std::min(ms, std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - t0)
                                .count());
        }
        return ms;
      };
      auto separate = [&] {
        cpu::unary(cpu::Unary::Silu, x.data(), t.data(), n);
        cpu::binary(cpu::Binary::Mul, t.data(), shape, y.data(), shape,
                    out.data(), shape);
      };
      auto fusedRange = [&](size_t b, size_t e) {
        const float *ins[] = {x.data() + b, y.data() + b};
        float *outs[] = {fused.data() + b};
        k(ins, outs, int64_t(e - b));
      };
      int threads = cpu::threads();
      double sepN = best(separate);
      cpu::setThreads(1);
      double sep1 = best(separate);
      cpu::setThreads(threads);
      double fused1 = best([&] { fusedRange(0, n); });
      double fusedN = best([&] {
        std::vector<std::thread> pool;
        for (int w = 0; w < threads; ++w)
          pool.emplace_back(fusedRange, n * w / threads, n * (w + 1) / threads);
        for (std::thread &th : pool)
          th.join();
      });
      compare(fused, out, kExact, x, "silu*mul");
      std::printf(
          "  silu(x)*y, %zu elements, %s (best of %d):\n"
          "    runtime kernels: %8.3f ms (1 thread) %8.3f ms (%d threads)\n"
          "    fused kernel:    %8.3f ms (1 thread) %8.3f ms (%d threads)\n",
          n, c.lib.cpu.c_str(), reps, sep1, sepN, threads, fused1, fusedN,
          threads);
    }
  }
}

// erf and log are MLIR's polynomial approximations, not libm: their error
// against double precision stays at the runtime's level. gelu_erf: absolute
// error <= 6e-7 on [-10, 10] (runtime with libm erff: 4.5e-7; relative errors
// reach ~3e-5 where 1 + erf cancels, x < -2.5, and 4.4e-6 in the runtime);
// log: absolute error <= 5e-7 on (1e-4, 100] (libm logf: 4.2e-7).
TEST(CpuKernels, ErfAndLogAccuracy) {
  std::string text =
      fusedFunc("g", {kT}, {kT},
                std::string("    %y = mt.gelu %a0 approximate = \"none\" : ") +
                    kT + "\n",
                "%y") +
      fusedFunc("l", {kT}, {kT},
                std::string("    %y = mt.log %a0 : ") + kT + "\n", "%y");
  Compiled c = compile(text);
  ASSERT_TRUE(c.loaded);
  const size_t n = 2000001;
  Vec x(n), got(n);
  const float *ins[] = {x.data()};
  float *outs[] = {got.data()};
  for (size_t i = 0; i < n; ++i)
    x[i] = -10.0f + 20.0f * float(i) / float(n - 1);
  c.kernel(0)(ins, outs, n);
  double worstGelu = 0;
  for (size_t i = 0; i < n; ++i) {
    double v = x[i];
    double truth = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    worstGelu = std::max(worstGelu, std::fabs(got[i] - truth));
  }
  for (size_t i = 0; i < n; ++i)
    x[i] = 1e-4f + 100.0f * float(i) / float(n - 1);
  c.kernel(1)(ins, outs, n);
  double worstLog = 0;
  for (size_t i = 0; i < n; ++i)
    worstLog = std::max(worstLog, std::fabs(got[i] - std::log(double(x[i]))));
  std::printf("  gelu_erf abs error %.3g, log abs error %.3g\n", worstGelu,
              worstLog);
  EXPECT_LE(worstGelu, 6e-7);
  EXPECT_LE(worstLog, 5e-7);
}
