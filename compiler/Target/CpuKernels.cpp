//===- CpuKernels.cpp - LLVM code for mt.fused regions ----------*- C++ -*-===//
//
// Part of mtc. Algorithm:
//
// 1. Name the regions (FusedRegions.h, shared with the CUDA target):
//    regions with the same ops, attributes and input access (the *key*)
//    share a kernel; each distinct one is named mtc_fused_N and the name is
//    stored in the op's `kernel` attribute.
// 2. Build each kernel in a private MLIR module (func + scf + arith + math +
//    llvm pointers): an internal body function taking one `noalias` pointer
//    per input and output (so LLVM vectorises without run-time alias checks)
//    and the C-ABI wrapper that loads those pointers from the two arrays.
//    The body is a loop nest over the iteration space. Without suffix inputs
//    it is one loop over i in [0, n). With suffix inputs of sizes
//    m1 | m2 | ... | mK (each a product of trailing dims of the iteration
//    shape, so each divides the next) it is K + 1 nested loops with strides
//    mK, ..., m1, 1: the index of a suffix input of size m is the sum of the
//    inner levels' offsets, with no division in the loop. Row inputs and
//    reductions add the row length m (static) to those sizes; a region with
//    reductions walks each row itself (16 float lanes over blocks of 256, as
//    cpu::reduce does), then runs the ops on the row values once per row.
// 3. The mt ops become scalar f32 arith with the exact formulas of the CPU
//    runtime (runtime/cpu/Elementwise.cpp): exp and tanh are the same Cephes
//    algorithms as runtime/cpu/FastMath.h written in arith; erf and log are
//    math ops expanded by MLIR's polynomial approximations; sqrt and fabs
//    become LLVM intrinsics. Nothing calls libm, so every loop vectorises.
//    Multiplies and adds carry the `contract` flag, so targets with FMA fuse
//    them as clang does for the runtime's kernels (-ffp-contract=on).
// 4. Lower to the LLVM dialect, translate, run LLVM's O3 pipeline for the
//    chosen CPU, emit an ELF object and link it with `ld.lld -shared`.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/CpuKernels.h"
#include "compiler/Target/FusedRegions.h"

#include "dialects/mt/MtDialect.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <limits>
#include <map>
#include <mutex>

using namespace mlir;

namespace mtc {
namespace {

using Access = FusedAccess;
using InputPlan = FusedInputPlan;

//===----------------------------------------------------------------------===//
// Scalar math with the runtime's formulas
//===----------------------------------------------------------------------===//

// The constants of runtime/cpu/Elementwise.cpp.
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
constexpr float kGeluCubic = 0.044715f;

/// Builds f32 scalar arithmetic at the builder's insertion point.
class Scalar {
public:
  Scalar(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value c(float v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
  }
  Value add(Value x, Value y) {
    return arith::AddFOp::create(b, loc, x, y, fm);
  }
  Value sub(Value x, Value y) {
    return arith::SubFOp::create(b, loc, x, y, fm);
  }
  Value mul(Value x, Value y) {
    return arith::MulFOp::create(b, loc, x, y, fm);
  }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value neg(Value x) { return arith::NegFOp::create(b, loc, x); }
  Value cmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value select(Value cond, Value x, Value y) {
    return arith::SelectOp::create(b, loc, cond, x, y);
  }
  Value sqrt(Value x) { return math::SqrtOp::create(b, loc, x); }
  Value erf(Value x) { return math::ErfOp::create(b, loc, x); }
  Value log(Value x) { return math::LogOp::create(b, loc, x); }

  /// detail::fexp: Cody-Waite reduction and the Cephes expf polynomial, 0
  /// below -87.3, +inf above 88.7, NaN kept.
  Value exp(Value x) {
    using P = arith::CmpFPredicate;
    Value lo = c(-87.3f), hi = c(88.7f);
    Value xc = select(cmp(P::OLT, x, lo), lo, x); // std::max(x, lo)
    xc = select(cmp(P::OLT, hi, xc), hi, xc);     // std::min(xc, hi)
    Value t = add(mul(xc, c(1.44269504088896341f)), c(12582912.0f));
    Value n = sub(t, c(12582912.0f));
    Value r = sub(xc, mul(n, c(0.693359375f)));
    r = sub(r, mul(n, c(-2.12194440e-4f)));
    Value p = c(1.9875691500e-4f);
    for (float k : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                    1.6666665459e-1f, 5.0000001201e-1f})
      p = add(mul(p, r), c(k));
    Value e = add(add(mul(p, mul(r, r)), r), c(1.0f));
    Type i32 = b.getI32Type();
    Value ni = arith::FPToSIOp::create(b, loc, i32, n);
    Value bits = arith::ShLIOp::create(
        b, loc,
        arith::AddIOp::create(b, loc, ni,
                              arith::ConstantIntOp::create(b, loc, i32, 127)),
        arith::ConstantIntOp::create(b, loc, i32, 23));
    Value scale = arith::BitcastOp::create(b, loc, b.getF32Type(), bits);
    Value res = mul(e, scale);
    res = select(cmp(P::OLT, x, lo), c(0.0f), res);
    res = select(cmp(P::OGT, x, hi), c(std::numeric_limits<float>::infinity()),
                 res);
    return select(cmp(P::UNO, x, x), x, res);
  }

  /// detail::ftanh: x + x^3 P(x^2) below |x| = 0.625, else
  /// sign(x) (1 - 2 / (exp(2|x|) + 1)).
  Value tanh(Value x) {
    Value ax = math::AbsFOp::create(b, loc, x);
    Value z = mul(x, x);
    Value p = c(-5.70498872745e-3f);
    for (float k : {2.06390887954e-2f, -5.37397155531e-2f, 1.33314422036e-1f,
                    -3.33332819422e-1f})
      p = add(mul(p, z), c(k));
    Value small = add(mul(mul(p, z), x), x);
    Value big = sub(c(1.0f), div(c(2.0f), add(exp(mul(c(2.0f), ax)), c(1.0f))));
    big = math::CopySignOp::create(b, loc, big, x);
    return select(cmp(arith::CmpFPredicate::OLT, ax, c(0.625f)), small, big);
  }

  Value sigmoid(Value x) { return div(c(1.0f), add(c(1.0f), exp(neg(x)))); }

  /// f(x) for a function of UnaryFns.def, as cpu::unary computes it.
  Value unary(mt::UnaryFn fn, Value x, float param) {
    using F = mt::UnaryFn;
    switch (fn) {
    case F::Neg:
      return neg(x);
    case F::Exp:
      return exp(x);
    case F::Log:
      return log(x);
    case F::Silu:
      return mul(x, sigmoid(x));
    case F::Relu:
      return select(cmp(arith::CmpFPredicate::OGT, x, c(0.0f)), x, c(0.0f));
    case F::Sigmoid:
      return sigmoid(x);
    case F::Tanh:
      return tanh(x);
    case F::Rsqrt:
      return div(c(1.0f), sqrt(x));
    case F::Sqrt:
      return sqrt(x);
    case F::Square:
      return mul(x, x);
    case F::GeluErf:
      return mul(mul(c(0.5f), x), add(c(1.0f), erf(mul(x, c(kInvSqrt2)))));
    case F::GeluTanh:
      return mul(mul(c(0.5f), x), add(c(1.0f), tanh(geluTanhArg(x))));
    case F::Softcap:
      return mul(c(param), tanh(div(x, c(param))));
    case F::Relu2: {
      Value r = select(cmp(arith::CmpFPredicate::OGT, x, c(0.0f)), x, c(0.0f));
      return mul(r, r);
    }
    }
    llvm_unreachable("a function of UnaryFns.def without a formula");
  }

  /// dy * f'(x), as cpu::unaryGrad computes it.
  Value unaryGrad(mt::UnaryFn fn, Value x, Value dy, float param) {
    using F = mt::UnaryFn;
    switch (fn) {
    case F::Neg:
      return neg(dy);
    case F::Exp:
      return mul(dy, exp(x));
    case F::Log:
      return div(dy, x);
    case F::Silu: {
      Value s = sigmoid(x);
      return mul(mul(dy, s), add(c(1.0f), mul(x, sub(c(1.0f), s))));
    }
    case F::Relu:
      return select(cmp(arith::CmpFPredicate::OGT, x, c(0.0f)), dy, c(0.0f));
    case F::Sigmoid: {
      Value s = sigmoid(x);
      return mul(mul(dy, s), sub(c(1.0f), s));
    }
    case F::Tanh:
    case F::Softcap: {
      Value t = tanh(fn == F::Tanh ? x : div(x, c(param)));
      return mul(dy, sub(c(1.0f), mul(t, t)));
    }
    case F::Rsqrt: {
      Value r = div(c(1.0f), sqrt(x));
      return mul(dy, mul(mul(mul(c(-0.5f), r), r), r));
    }
    case F::Sqrt:
      return mul(dy, div(c(0.5f), sqrt(x)));
    case F::Square:
      return mul(dy, mul(c(2.0f), x));
    case F::GeluErf: {
      Value cdf = mul(c(0.5f), add(c(1.0f), erf(mul(x, c(kInvSqrt2)))));
      Value pdf = mul(c(kInvSqrt2Pi), exp(mul(mul(c(-0.5f), x), x)));
      return mul(dy, add(cdf, mul(x, pdf)));
    }
    case F::GeluTanh: {
      Value t = tanh(geluTanhArg(x));
      Value du = mul(c(kSqrt2OverPi),
                     add(c(1.0f), mul(mul(c(3.0f * kGeluCubic), x), x)));
      Value left = mul(c(0.5f), add(c(1.0f), t));
      Value right = mul(mul(mul(c(0.5f), x), sub(c(1.0f), mul(t, t))), du);
      return mul(dy, add(left, right));
    }
    case F::Relu2: {
      Value r = select(cmp(arith::CmpFPredicate::OGT, x, c(0.0f)), x, c(0.0f));
      return mul(dy, mul(c(2.0f), r));
    }
    }
    llvm_unreachable("a function of UnaryFns.def without a derivative");
  }

private:
  /// sqrt(2/pi) (x + 0.044715 x^3), evaluated left to right as in C++.
  Value geluTanhArg(Value x) {
    Value cube = mul(mul(mul(c(kGeluCubic), x), x), x);
    return mul(c(kSqrt2OverPi), add(x, cube));
  }

  OpBuilder &b;
  Location loc;
  arith::FastMathFlags fm = arith::FastMathFlags::contract;
};

/// The scalar value of one body op from its operands' scalars.
FailureOr<Value> lowerBodyOp(Operation &op, ArrayRef<Value> in, Scalar &s,
                             std::string &err) {
  Value r;
  if (isa<mt::AddOp>(op))
    r = s.add(in[0], in[1]);
  else if (isa<mt::SubOp>(op))
    r = s.sub(in[0], in[1]);
  else if (isa<mt::MulOp>(op))
    r = s.mul(in[0], in[1]);
  else if (isa<mt::DivOp>(op))
    r = s.div(in[0], in[1]);
  else if (auto c = dyn_cast<mt::ConstantOp>(op))
    r = s.c(static_cast<float>(c.getValue().convertToDouble()));
  else if (std::optional<mt::UnaryFnCall> f = mt::getUnaryFnCall(&op))
    r = f->grad ? s.unaryGrad(f->fn, in[0], in[1], static_cast<float>(f->param))
                : s.unary(f->fn, in[0], static_cast<float>(f->param));
  if (!r) {
    err = "the CPU code generator cannot lower '" +
          op.getName().getStringRef().str() + "' in an mt.fused region";
    return failure();
  }
  return r;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Runtime row reductions: 16 float lanes, element j of a row in lane
/// j mod 16; sums restart the lanes every 256 elements and add each block's
/// lanes (in lane order, in float) into a double (detail::sumRow), maxima
/// keep their lanes over the row (detail::maxRow).
constexpr int64_t kLanes = 16, kBlock = 256;

/// Adds `name` (the C-ABI wrapper) and `name_body` (the loop nest) to \p kmod.
LogicalResult buildKernel(mt::FusedOp fused, ArrayRef<InputPlan> plan,
                          StringRef name, ModuleOp kmod, std::string &err) {
  MLIRContext *ctx = kmod.getContext();
  Location loc = UnknownLoc::get(ctx);
  OpBuilder b = OpBuilder::atBlockEnd(kmod.getBody());
  Type ptr = LLVM::LLVMPointerType::get(ctx), i64 = b.getI64Type(),
       f32 = b.getF32Type(), f64 = b.getF64Type();
  unsigned numIn = plan.size(), numOut = fused.getNumResults();
  llvm::Expected<int64_t> rowLength = fusedRowLength(fused, plan);
  if (!rowLength) {
    err = llvm::toString(rowLength.takeError());
    return failure();
  }
  int64_t nLast = *rowLength;
  bool reduce = fused.hasReductions();
  llvm::SmallPtrSet<Operation *, 8> rowOps = fused.getRowOps();

  // The body: (in_0 .. in_k, out_0 .. out_r, n), every pointer noalias.
  SmallVector<Type> argTypes(numIn + numOut, ptr);
  argTypes.push_back(i64);
  auto bodyFn = func::FuncOp::create(b, loc, (name + "_body").str(),
                                     b.getFunctionType(argTypes, {}));
  bodyFn->setAttr("llvm.linkage",
                  LLVM::LinkageAttr::get(ctx, LLVM::Linkage::Internal));
  for (unsigned a = 0; a < numIn + numOut; ++a) {
    bodyFn.setArgAttr(a, LLVM::LLVMDialect::getNoAliasAttrName(),
                      b.getUnitAttr());
    if (a < numIn)
      bodyFn.setArgAttr(a, LLVM::LLVMDialect::getReadonlyAttrName(),
                        b.getUnitAttr());
  }
  Block *entry = bodyFn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value n = entry->getArgument(numIn + numOut);
  auto i64c = [&](int64_t v) -> Value {
    return arith::ConstantIntOp::create(b, loc, i64, v);
  };
  auto elementAt = [&](Value base, Value index, Type type) -> Value {
    return LLVM::GEPOp::create(b, loc, ptr, type, base, ValueRange{index},
                               LLVM::GEPNoWrapFlags::inbounds);
  };
  auto load = [&](Type type, Value base, Value index) -> Value {
    return LLVM::LoadOp::create(b, loc, type, elementAt(base, index, type),
                                type.getIntOrFloatBitWidth() / 8);
  };
  auto store = [&](Value v, Value base, Value index) {
    Type type = v.getType();
    LLVM::StoreOp::create(b, loc, v, elementAt(base, index, type),
                          type.getIntOrFloatBitWidth() / 8);
  };
  auto forLoop = [&](Value lo, Value hi) {
    auto loop = scf::ForOp::create(b, loc, lo, hi, i64c(1));
    b.setInsertionPointToStart(loop.getBody());
    return loop;
  };

  // Loop levels, outermost first: strides mK, ..., m1, 1 when the suffix
  // sizes (and the row length, when rows matter) form a divisibility chain;
  // else (nLast, 1) or one loop, and `i mod m` per suffix input. A reduction
  // kernel walks the stride-1 level (one row) itself.
  SmallVector<int64_t> moduli;
  for (const InputPlan &p : plan)
    if (p.access == Access::Suffix && !llvm::is_contained(moduli, p.modulus))
      moduli.push_back(p.modulus);
  if (nLast > 0 && !llvm::is_contained(moduli, nLast))
    moduli.push_back(nLast);
  llvm::sort(moduli);
  bool chain = true;
  for (size_t k = 1; k < moduli.size(); ++k)
    chain = chain && moduli[k] % moduli[k - 1] == 0;
  SmallVector<int64_t> strides;
  if (chain)
    strides.assign(moduli.rbegin(), moduli.rend());
  else if (nLast > 0)
    strides.push_back(nLast);
  strides.push_back(1);

  // Loop-invariant values before the loops: scalar inputs, constants.
  Scalar s(b, loc);
  Block &body = fused.getBody().front();
  llvm::DenseMap<Value, Value> invariant;
  for (unsigned k = 0; k < numIn; ++k)
    if (plan[k].access == Access::Scalar)
      invariant[body.getArgument(k)] =
          load(f32, entry->getArgument(k), i64c(0));
  for (Operation &op : body)
    if (auto c = dyn_cast<mt::ConstantOp>(op))
      invariant[c.getResult()] =
          s.c(static_cast<float>(c.getValue().convertToDouble()));

  // Reduction state (allocas in the entry block): 16 lanes each, plus a
  // double total for sums and means.
  struct Red {
    Operation *op;
    bool isMax;
    Value lanes, total;
  };
  SmallVector<Red> reds;
  for (Operation &op : body)
    if (mt::FusedOp::isReduction(&op)) {
      Red r{&op, isa<mt::MaxOp>(op), nullptr, nullptr};
      r.lanes = LLVM::AllocaOp::create(b, loc, ptr, f32, i64c(kLanes), 64);
      if (!r.isMax)
        r.total = LLVM::AllocaOp::create(b, loc, ptr, f64, i64c(1), 8);
      reds.push_back(r);
    }

  // The outer levels (all of them without reductions).
  size_t outerLevels = reduce ? strides.size() - 1 : strides.size();
  SmallVector<Value> ivs;
  for (size_t l = 0; l < outerLevels; ++l) {
    Value upper =
        l == 0 ? (strides[0] == 1
                      ? n
                      : arith::DivUIOp::create(b, loc, n, i64c(strides[0])))
               : i64c(strides[l - 1] / strides[l]);
    ivs.push_back(forLoop(i64c(0), upper).getInductionVar());
  }
  if (reduce)
    ivs.push_back(nullptr); // the position in the row, set per element
  // Offset of the levels whose stride is below `limit` (all: the index i).
  auto offsetBelow = [&](int64_t limit) -> Value {
    Value sum;
    for (size_t l = 0; l < strides.size(); ++l) {
      if (strides[l] >= limit)
        continue;
      Value term = strides[l] == 1
                       ? ivs[l]
                       : arith::MulIOp::create(b, loc, ivs[l], i64c(strides[l]))
                             .getResult();
      sum = sum ? arith::AddIOp::create(b, loc, sum, term).getResult() : term;
    }
    return sum ? sum : i64c(0);
  };
  // The row of the current element: i / nLast (outer levels only).
  auto rowIndex = [&]() -> Value {
    if (!chain)
      return strides.size() == 2 && strides[0] == nLast
                 ? ivs[0]
                 : arith::DivUIOp::create(
                       b, loc, offsetBelow(std::numeric_limits<int64_t>::max()),
                       i64c(nLast))
                       .getResult();
    Value sum;
    for (size_t l = 0; l < outerLevels; ++l) {
      if (strides[l] < nLast)
        continue;
      int64_t per = strides[l] / nLast;
      Value term =
          per == 1
              ? ivs[l]
              : arith::MulIOp::create(b, loc, ivs[l], i64c(per)).getResult();
      sum = sum ? arith::AddIOp::create(b, loc, sum, term).getResult() : term;
    }
    return sum ? sum : i64c(0);
  };
  auto fail = [&](Operation &op) {
    std::string where;
    llvm::raw_string_ostream os(where);
    op.getLoc().print(os);
    err = where + ": " + err;
    return failure();
  };
  Operation *yield = body.getTerminator();

  // One element of the element phase at the current ivs: loads, element
  // ops, stores of element results, and (with \p lane) accumulation into the
  // reductions' lanes.
  auto emitElement = [&](Value lane) -> LogicalResult {
    Value i = offsetBelow(std::numeric_limits<int64_t>::max());
    Value row = nLast > 0 ? rowIndex() : nullptr;
    llvm::DenseMap<Value, Value> scalarOf = invariant;
    for (unsigned k = 0; k < numIn; ++k) {
      BlockArgument arg = body.getArgument(k);
      if (plan[k].access == Access::Scalar ||
          llvm::none_of(arg.getUsers(), [&](Operation *u) {
            return !rowOps.contains(u) || mt::FusedOp::isReduction(u);
          }))
        continue; // loop-invariant, or read only per row
      Value index = i;
      if (plan[k].access == Access::Suffix)
        index = chain ? offsetBelow(plan[k].modulus)
                      : arith::RemUIOp::create(b, loc, i, i64c(plan[k].modulus))
                            .getResult();
      else if (plan[k].access == Access::Row)
        index = row;
      scalarOf[arg] = load(f32, entry->getArgument(k), index);
    }
    for (Operation &op : body.without_terminator()) {
      if (rowOps.contains(&op) || isa<mt::ConstantOp>(op))
        continue;
      SmallVector<Value> in;
      for (Value v : op.getOperands())
        in.push_back(scalarOf.lookup(v));
      FailureOr<Value> r = lowerBodyOp(op, in, s, err);
      if (failed(r))
        return fail(op);
      scalarOf[op.getResult(0)] = *r;
    }
    for (auto [r, v] : llvm::enumerate(yield->getOperands())) {
      Operation *def = v.getDefiningOp();
      if (!def || !rowOps.contains(def))
        store(scalarOf.lookup(v), entry->getArgument(numIn + r), i);
    }
    for (Red &red : reds) {
      Value x = scalarOf.lookup(red.op->getOperand(0));
      Value old = load(f32, red.lanes, lane);
      // No `contract`: the runtime adds stored values.
      Value acc =
          red.isMax ? s.select(s.cmp(arith::CmpFPredicate::OGT, x, old), x, old)
                    : arith::AddFOp::create(b, loc, old, x).getResult();
      store(acc, red.lanes, lane);
    }
    return success();
  };

  if (!reduce) {
    if (failed(emitElement(nullptr)))
      return failure();
  } else {
    // One row: blocks of 256 (chunks of 16 lanes, then a partial chunk).
    for (Red &red : reds) {
      if (red.isMax) {
        Value ninf = s.c(-std::numeric_limits<float>::infinity());
        for (int64_t l = 0; l < kLanes; ++l)
          store(ninf, red.lanes, i64c(l));
      } else {
        store(arith::ConstantOp::create(b, loc, b.getF64FloatAttr(0.0)),
              red.total, i64c(0));
      }
    }
    auto emitBlock = [&](Value start, int64_t size) -> LogicalResult {
      OpBuilder::InsertionGuard guard(b);
      for (Red &red : reds)
        if (!red.isMax)
          for (int64_t l = 0; l < kLanes; ++l)
            store(s.c(0.0f), red.lanes, i64c(l));
      int64_t chunks = size / kLanes, rest = size % kLanes;
      auto lanesFrom = [&](Value first, int64_t count) -> LogicalResult {
        OpBuilder::InsertionGuard g(b);
        auto loop = forLoop(i64c(0), i64c(count));
        Value lane = loop.getInductionVar();
        ivs.back() = arith::AddIOp::create(b, loc, first, lane);
        return emitElement(lane);
      };
      if (chunks > 0) {
        OpBuilder::InsertionGuard g(b);
        auto loop = forLoop(i64c(0), i64c(chunks));
        Value first = arith::AddIOp::create(
            b, loc, start,
            arith::MulIOp::create(b, loc, loop.getInductionVar(),
                                  i64c(kLanes)));
        if (failed(lanesFrom(first, kLanes)))
          return failure();
      }
      if (rest > 0 &&
          failed(lanesFrom(
              arith::AddIOp::create(b, loc, start, i64c(chunks * kLanes)),
              rest)))
        return failure();
      for (Red &red : reds) {
        if (red.isMax)
          continue;
        Value sum = s.c(0.0f);
        for (int64_t l = 0; l < kLanes; ++l)
          sum =
              arith::AddFOp::create(b, loc, sum, load(f32, red.lanes, i64c(l)));
        Value total =
            arith::AddFOp::create(b, loc, load(f64, red.total, i64c(0)),
                                  arith::ExtFOp::create(b, loc, f64, sum));
        store(total, red.total, i64c(0));
      }
      return success();
    };
    int64_t fullBlocks = nLast / kBlock, tail = nLast % kBlock;
    if (fullBlocks > 0) {
      OpBuilder::InsertionGuard g(b);
      auto loop = forLoop(i64c(0), i64c(fullBlocks));
      Value start =
          arith::MulIOp::create(b, loc, loop.getInductionVar(), i64c(kBlock));
      if (failed(emitBlock(start, kBlock)))
        return failure();
    }
    if (tail > 0 && failed(emitBlock(i64c(fullBlocks * kBlock), tail)))
      return failure();

    // The row phase, once per row.
    ivs.back() = i64c(0);
    Value row = rowIndex();
    llvm::DenseMap<Value, Value> scalarOf = invariant;
    for (unsigned k = 0; k < numIn; ++k)
      if (plan[k].access == Access::Row)
        scalarOf[body.getArgument(k)] = load(f32, entry->getArgument(k), row);
    for (Red &red : reds) {
      Value v;
      if (red.isMax) {
        v = load(f32, red.lanes, i64c(0));
        for (int64_t l = 1; l < kLanes; ++l) {
          Value m = load(f32, red.lanes, i64c(l));
          v = s.select(s.cmp(arith::CmpFPredicate::OGT, m, v), m, v);
        }
      } else {
        Value total = load(f64, red.total, i64c(0));
        if (isa<mt::MeanOp>(red.op))
          total = arith::DivFOp::create(
              b, loc, total,
              arith::ConstantOp::create(b, loc,
                                        b.getF64FloatAttr(double(nLast))));
        v = arith::TruncFOp::create(b, loc, f32, total);
      }
      scalarOf[red.op->getResult(0)] = v;
    }
    for (Operation &op : body.without_terminator()) {
      if (!rowOps.contains(&op) || mt::FusedOp::isReduction(&op))
        continue;
      SmallVector<Value> in;
      for (Value v : op.getOperands())
        in.push_back(scalarOf.lookup(v));
      FailureOr<Value> r = lowerBodyOp(op, in, s, err);
      if (failed(r))
        return fail(op);
      scalarOf[op.getResult(0)] = *r;
    }
    for (auto [r, v] : llvm::enumerate(yield->getOperands())) {
      Operation *def = v.getDefiningOp();
      if (def && rowOps.contains(def))
        store(scalarOf.lookup(v), entry->getArgument(numIn + r), row);
    }
  }
  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, loc);

  // The C-ABI wrapper.
  b.setInsertionPointToEnd(kmod.getBody());
  auto wrapper = func::FuncOp::create(b, loc, name,
                                      b.getFunctionType({ptr, ptr, i64}, {}));
  Block *we = wrapper.addEntryBlock();
  b.setInsertionPointToStart(we);
  SmallVector<Value> args;
  for (unsigned a = 0; a < numIn + numOut; ++a) {
    bool isIn = a < numIn;
    int32_t slot = static_cast<int32_t>(isIn ? a : a - numIn);
    Value addr = LLVM::GEPOp::create(
        b, loc, ptr, ptr, we->getArgument(isIn ? 0 : 1),
        ArrayRef<LLVM::GEPArg>{slot}, LLVM::GEPNoWrapFlags::inbounds);
    args.push_back(LLVM::LoadOp::create(b, loc, ptr, addr, 8));
  }
  args.push_back(we->getArgument(2));
  func::CallOp::create(b, loc, bodyFn, args);
  func::ReturnOp::create(b, loc);
  return success();
}

/// Math approximations, then everything to the LLVM dialect.
LogicalResult lowerToLLVMDialect(ModuleOp kmod, std::string &err) {
  std::string diags;
  ScopedDiagnosticHandler handler(kmod.getContext(), [&](Diagnostic &d) {
    diags += d.str() + "\n";
    return success();
  });
  RewritePatternSet patterns(kmod.getContext());
  // erf and log (and anything those expand to) become polynomials.
  populateMathPolynomialApproximationPatterns(patterns);
  if (failed(applyPatternsGreedily(kmod, std::move(patterns)))) {
    err = "math approximation did not converge\n" + diags;
    return failure();
  }
  PassManager pm(kmod.getContext());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(kmod))) {
    err = "lowering the CPU kernels to the LLVM dialect failed\n" + diags;
    return failure();
  }
  return success();
}

/// The target machine for \p cpu (empty: the host, with its features).
std::unique_ptr<llvm::TargetMachine> makeTargetMachine(const std::string &cpu,
                                                       std::string &cpuName,
                                                       std::string &err) {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  llvm::Triple triple(llvm::sys::getProcessTriple());
  std::string lookupErr;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, lookupErr);
  if (!target) {
    err = "no LLVM target for " + triple.str() + ": " + lookupErr;
    return nullptr;
  }
  std::string features;
  if (cpu.empty()) {
    cpuName = llvm::sys::getHostCPUName().str();
    llvm::SubtargetFeatures f;
    for (const auto &kv : llvm::sys::getHostCPUFeatures())
      f.AddFeature(kv.first(), kv.second);
    features = f.getString();
  } else {
    // Checked before the target machine exists (it would warn on stderr).
    std::unique_ptr<llvm::MCSubtargetInfo> generic(
        target->createMCSubtargetInfo(triple, "", ""));
    if (generic && !generic->isCPUStringValid(cpu)) {
      err = "unknown CPU '" + cpu + "' for " + triple.str() +
            " (try x86-64, x86-64-v2, x86-64-v3, x86-64-v4 or a name such as "
            "znver3)";
      return nullptr;
    }
    cpuName = cpu;
  }
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, cpuName, features, llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!tm) {
    err = "LLVM cannot generate code for CPU '" + cpuName + "'";
    return nullptr;
  }
  return tm;
}

/// LLVM's O3 pipeline (the loop and SLP vectorisers included) for \p tm.
void optimize(llvm::Module &m, llvm::TargetMachine &tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm =
      pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(m, mam);
}

bool emit(llvm::Module &m, llvm::TargetMachine &tm, llvm::CodeGenFileType type,
          std::string &out, std::string &err) {
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type)) {
    err = "the LLVM target cannot emit this file type";
    return false;
  }
  pm.run(m);
  out.assign(buffer.begin(), buffer.end());
  return true;
}

std::string defaultLinker() {
#ifdef MTC_LLD_PATH
  if (llvm::sys::fs::can_execute(MTC_LLD_PATH))
    return MTC_LLD_PATH;
#endif
  if (llvm::ErrorOr<std::string> p = llvm::sys::findProgramByName("ld.lld"))
    return *p;
  return "";
}

/// Links one object into a shared object with ld.lld.
bool linkShared(const std::string &object, const std::string &linkerOpt,
                std::string &so, std::string &err) {
  std::string linker = linkerOpt.empty() ? defaultLinker() : linkerOpt;
  if (linker.empty()) {
    err = "cannot find ld.lld (install lld, or pass its path in "
          "CpuKernelOptions::linker)";
    return false;
  }
  llvm::SmallString<128> objPath, soPath, logPath;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("mtc-kernels", "o", fd, objPath)) {
    err = "cannot create a temporary file: " + ec.message();
    return false;
  }
  llvm::FileRemover removeObj(objPath);
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << object;
    if (os.has_error()) {
      err = "cannot write '" + objPath.str().str() + "'";
      return false;
    }
  }
  if (llvm::sys::fs::createTemporaryFile("mtc-kernels", "so", soPath) ||
      llvm::sys::fs::createTemporaryFile("mtc-kernels", "log", logPath)) {
    err = "cannot create a temporary file";
    return false;
  }
  llvm::FileRemover removeSo(soPath), removeLog(logPath);
  llvm::SmallVector<llvm::StringRef> args = {
      linker, "-shared", "--strip-all", "-z",   "noexecstack",
      "-z",   "now",     "-o",          soPath, objPath};
  std::string execErr;
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, logPath.str(),
                                                logPath.str()};
  int rc = llvm::sys::ExecuteAndWait(linker, args, std::nullopt, redirects, 0,
                                     0, &execErr);
  if (rc != 0) {
    std::string log;
    if (auto buf = llvm::MemoryBuffer::getFile(logPath))
      log = (*buf)->getBuffer().str();
    err = "linking the CPU kernels with '" + linker + "' failed" +
          (execErr.empty() ? "" : ": " + execErr) +
          (log.empty() ? "" : "\n" + log);
    return false;
  }
  auto buf = llvm::MemoryBuffer::getFile(soPath, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf) {
    err = "cannot read the linked kernels '" + soPath.str().str() +
          "': " + buf.getError().message();
    return false;
  }
  so = (*buf)->getBuffer().str();
  return true;
}

/// compileCpuKernels with the message of a failure in \p err (the steps
/// below hand it on as a string; the public entry points make it an error).
LogicalResult compileKernels(ModuleOp module, const CpuKernelOptions &options,
                             CpuKernelLibrary &out, std::string &err) {
  out = CpuKernelLibrary();
  // 1. Name the regions; build one kernel per distinct region.
  MLIRContext kctx;
  kctx.loadDialect<func::FuncDialect, scf::SCFDialect, arith::ArithDialect,
                   math::MathDialect, cf::ControlFlowDialect,
                   LLVM::LLVMDialect>();
  OwningOpRef<ModuleOp> kmod = ModuleOp::create(UnknownLoc::get(&kctx));
  std::vector<FusedRegion> regions = nameFusedRegions(module);
  for (const FusedRegion &r : regions)
    if (failed(buildKernel(r.op, r.plan, r.name, *kmod, err)))
      return failure();
  out.numKernels = regions.size();
  if (regions.empty())
    return success();

  // 2. To LLVM IR, optimised for the target CPU.
  if (failed(lowerToLLVMDialect(*kmod, err)))
    return failure();
  std::unique_ptr<llvm::TargetMachine> tm =
      makeTargetMachine(options.cpu, out.cpu, err);
  if (!tm)
    return failure();
  registerBuiltinDialectTranslation(kctx);
  registerLLVMDialectTranslation(kctx);
  llvm::LLVMContext lctx;
  std::unique_ptr<llvm::Module> lmod =
      translateModuleToLLVMIR(*kmod, lctx, "mtc_cpu_kernels");
  if (!lmod) {
    err = "translating the CPU kernels to LLVM IR failed";
    return failure();
  }
  lmod->setTargetTriple(tm->getTargetTriple());
  lmod->setDataLayout(tm->createDataLayout());
  optimize(*lmod, *tm);
  if (options.llvmIR) {
    options.llvmIR->clear();
    llvm::raw_string_ostream os(*options.llvmIR);
    lmod->print(os, nullptr);
  }
  if (options.assembly) {
    // Code generation changes the IR it runs on: print a copy.
    std::unique_ptr<llvm::Module> copy = llvm::CloneModule(*lmod);
    if (!emit(*copy, *tm, llvm::CodeGenFileType::AssemblyFile,
              *options.assembly, err))
      return failure();
  }

  // 3. Object file, then a shared object.
  std::string object;
  if (!emit(*lmod, *tm, llvm::CodeGenFileType::ObjectFile, object, err))
    return failure();
  if (!linkShared(object, options.linker, out.sharedObject, err))
    return failure();
  return success();
}

} // namespace

llvm::Expected<CpuKernelLibrary>
compileCpuKernels(ModuleOp module, const CpuKernelOptions &options) {
  CpuKernelLibrary lib;
  std::string err;
  if (failed(compileKernels(module, options, lib, err)))
    return llvm::createStringError(err);
  return lib;
}

llvm::Expected<std::string> compileCpuKernels(ModuleOp module) {
  llvm::Expected<CpuKernelLibrary> lib =
      compileCpuKernels(module, CpuKernelOptions());
  if (!lib)
    return lib.takeError();
  return std::move(lib->sharedObject);
}

} // namespace mtc
