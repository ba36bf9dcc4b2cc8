//===- CudaKernels.cpp - CUDA C for mt.fused regions ------------*- C++ -*-===//
//
// Part of mtc. Algorithm (see CudaKernels.h for the kernels' contract):
//
// 1. Name the regions (FusedRegions.h): the same keys, names and order as
//    the CPU target.
// 2. Per region, a `__device__` template mtc_fused_N_impl over the storage
//    types of its inputs and outputs (and, for element kernels, the step V):
//    every body value is an fp32 local (`v<id>`), every op one statement
//    calling fused.cuh's helpers with the CPU runtime's formulas; constants
//    are literals that round-trip exactly.
// 3. Per signature, an `extern "C" __global__` entry instantiating it, and
//    the entry's launch rule (block, items per block, grid cap) for the
//    bundle.
//
//===----------------------------------------------------------------------===//

#include "compiler/Target/CudaKernels.h"

#include "compiler/Target/FusedRegions.h"
#include "dialects/mt/MtDialect.h"
#include "lib/Bundle/OpKind.h"
#include "lib/Bundle/Plan.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace mlir;

namespace mtc {
namespace {

/// Element kernels: threads per block and the grid cap.
constexpr int64_t kElementBlock = 256, kElementMaxBlocks = 2048;
/// Rows kernels: a row per warp up to this row length, else a row per block.
constexpr int64_t kWarpRowMax = bundle::kCudaWarpRowMax, kRowsBlock = 256;

/// A float literal that reads back as exactly \p v.
std::string literal(float v) {
  if (std::isnan(v) || std::isinf(v)) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    char buf[32];
    std::snprintf(buf, sizeof buf, "__int_as_float(0x%08x)", bits);
    return buf;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9ef", static_cast<double>(v));
  return buf;
}

std::string where(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->getLoc().print(os);
  return s;
}

/// The device function of fused.cuh computing \p fn: its enumerator in
/// lowerCamelCase ("geluTanh"); "<name>Grad" computes dy * f'(x).
std::string unaryDeviceFunction(mt::UnaryFn fn) {
  static const char *const names[] = {
#define MTC_UNARY_FN(Enum, Name, Param) #Enum,
#include "lib/Bundle/UnaryFns.def"
  };
  std::string name = names[static_cast<size_t>(fn)];
  name[0] =
      static_cast<char>(std::tolower(static_cast<unsigned char>(name[0])));
  return name;
}

/// The C expression of body op \p op over operand expressions \p in; empty
/// with \p err for an op the generator does not know.
std::string expression(Operation &op, ArrayRef<std::string> in,
                       std::string &err) {
  if (isa<mt::AddOp>(op))
    return in[0] + " + " + in[1];
  if (isa<mt::SubOp>(op))
    return in[0] + " - " + in[1];
  if (isa<mt::MulOp>(op))
    return in[0] + " * " + in[1];
  if (isa<mt::DivOp>(op))
    return in[0] + " / " + in[1];
  if (auto c = dyn_cast<mt::ConstantOp>(op))
    return literal(static_cast<float>(c.getValue().convertToDouble()));
  if (std::optional<mt::UnaryFnCall> f = mt::getUnaryFnCall(&op)) {
    // fused.cuh's device function of f (lowerCamelCase of its enumerator)
    // or of f', over x (and dy), and the parameter of those that take one.
    std::string text = "mtc_fused::" + unaryDeviceFunction(f->fn) +
                       (f->grad ? "Grad(" + in[0] + ", " + in[1] : "(" + in[0]);
    if (bundle::unaryFnTakesParam(static_cast<bundle::UnaryFn>(f->fn)))
      text += ", " + literal(static_cast<float>(f->param));
    return text + ")";
  }
  err = where(&op) + ": the CUDA code generator cannot lower '" +
        op.getName().getStringRef().str() + "' in an mt.fused region";
  return "";
}

/// Emits one region's template and entries.
class RegionEmitter {
public:
  RegionEmitter(const FusedRegion &r, llvm::raw_ostream &os)
      : r(r), fused(r.op), os(os), body(fused.getBody().front()) {}

  LogicalResult emit(const std::set<std::string> &signatures,
                     bundle::CudaFusedKernel &out, std::string &err) {
    llvm::Expected<int64_t> rowLength = fusedRowLength(fused, r.plan);
    if (!rowLength) {
      err = llvm::toString(rowLength.takeError());
      return failure();
    }
    m = *rowLength;
    reduce = fused.hasReductions();
    rowOps = fused.getRowOps();
    numIn = r.plan.size();
    numOut = fused.getNumResults();
    Operation *yield = body.getTerminator();
    for (Value v : yield->getOperands()) {
      Operation *def = v.getDefiningOp();
      rowResult.push_back(def && rowOps.contains(def));
    }
    for (unsigned k = 0; k < numIn; ++k)
      argName[body.getArgument(k)] = "x" + std::to_string(k);
    out.name = r.name;
    out.launch = reduce ? "rows" : "elements";
    out.row = reduce ? m : 0;

    os << "// " << r.name << ": inputs (";
    static const char *accessNames[] = {"full", "scalar", "suffix", "row"};
    for (unsigned k = 0; k < numIn; ++k) {
      unsigned a = static_cast<unsigned>(r.plan[k].access);
      os << (k ? ", " : "") << (a < 4 ? accessNames[a] : "?");
      if (r.plan[k].access == FusedAccess::Suffix)
        os << " " << r.plan[k].modulus;
    }
    os << "), outputs " << numOut << ", " << out.launch;
    if (m > 0)
      os << ", last axis " << m;
    os << " (" << where(fused) << ")\n";
    if (failed(emitTemplate(err)))
      return failure();
    for (const std::string &sig : signatures) {
      if (sig.size() != numIn + numOut + 1 || sig[numIn] != '_') {
        err = where(fused) + ": storage signature '" + sig + "' does not fit " +
              r.name + " (" + std::to_string(numIn) + " inputs, " +
              std::to_string(numOut) + " outputs)";
        return failure();
      }
      out.entries.push_back(emitEntry(sig));
    }
    os << "\n";
    return success();
  }

private:
  static const char *typeOf(char letter) {
    return letter == 'b' ? "mtc_cuda::bf16" : "float";
  }

  std::string valueName(Value v) {
    auto it = argName.find(v);
    if (it != argName.end())
      return it->second;
    return "v" + std::to_string(ids.lookup(v));
  }

  /// The statements of the ops of one phase (row or element) at \p indent.
  LogicalResult emitOps(bool rowPhase, const std::string &indent,
                        std::string &err) {
    for (Operation &op : body.without_terminator()) {
      if (rowOps.contains(&op) != rowPhase || mt::FusedOp::isReduction(&op) ||
          isa<mt::ConstantOp>(op))
        continue;
      if (!ids.count(op.getResult(0)))
        ids[op.getResult(0)] = static_cast<int>(ids.size());
      SmallVector<std::string> in;
      for (Value v : op.getOperands())
        in.push_back(valueName(v));
      std::string e = expression(op, in, err);
      if (e.empty())
        return failure();
      os << indent << "const float " << valueName(op.getResult(0)) << " = " << e
         << ";\n";
    }
    return success();
  }

  /// The load of input \p k at element index \p i (row index \p row).
  std::string loadOf(unsigned k, const std::string &i, const std::string &row) {
    std::string in = "in" + std::to_string(k);
    switch (r.plan[k].access) {
    case FusedAccess::Scalar:
      return "mtc_fused::toFloat(" + in + "[0])";
    case FusedAccess::Suffix:
      return "mtc_fused::toFloat(" + in + "[" + i + " % " +
             std::to_string(r.plan[k].modulus) + "LL])";
    case FusedAccess::Row:
      return "mtc_fused::toFloat(" + in + "[" + row + "])";
    default:
      return "mtc_fused::toFloat(" + in + "[" + i + "])";
    }
  }

  /// Whether input \p k is read by the element phase.
  bool readPerElement(unsigned k) {
    return llvm::any_of(body.getArgument(k).getUsers(), [&](Operation *u) {
      return !rowOps.contains(u) || mt::FusedOp::isReduction(u);
    });
  }

  LogicalResult emitTemplate(std::string &err) {
    os << "template <int V, ";
    for (unsigned k = 0; k < numIn; ++k)
      os << (k ? ", " : "") << "typename I" << k;
    for (unsigned o = 0; o < numOut; ++o)
      os << ", typename O" << o;
    os << ">\n__device__ __forceinline__ void " << r.name << "_impl(";
    for (unsigned k = 0; k < numIn; ++k)
      os << "const I" << k << " *__restrict__ in" << k << ", ";
    for (unsigned o = 0; o < numOut; ++o)
      os << "O" << o << " *__restrict__ out" << o << ", ";
    os << "long long n) {\n";
    // Constants once, visible to both phases.
    for (Operation &op : body.without_terminator())
      if (auto c = dyn_cast<mt::ConstantOp>(op)) {
        ids[c.getResult()] = static_cast<int>(ids.size());
        os << "  const float " << valueName(c.getResult()) << " = "
           << literal(static_cast<float>(c.getValue().convertToDouble()))
           << ";\n";
      }
    LogicalResult res = reduce ? emitRowsBody(err) : emitElementsBody(err);
    os << "}\n";
    return res;
  }

  LogicalResult emitElementsBody(std::string &err) {
    if (!rowOps.empty() || llvm::any_of(rowResult, [](bool b) { return b; })) {
      err = where(fused) + ": row ops without a reduction";
      return failure();
    }
    // 16-byte steps for the element-indexed tensors.
    os << "  const bool vec = mtc_fused::aligned16(";
    bool first = true;
    for (unsigned k = 0; k < numIn; ++k)
      if (r.plan[k].access == FusedAccess::Full) {
        os << (first ? "" : ", ") << "in" << k;
        first = false;
      }
    for (unsigned o = 0; o < numOut; ++o) {
      os << (first ? "" : ", ") << "out" << o;
      first = false;
    }
    os << ");\n";
    for (unsigned k = 0; k < numIn; ++k)
      if (r.plan[k].access == FusedAccess::Scalar)
        os << "  const float x" << k << " = " << loadOf(k, "", "") << ";\n";
    os << "  const long long step = static_cast<long long>(gridDim.x) * "
          "blockDim.x * V;\n"
          "  for (long long base = (static_cast<long long>(blockIdx.x) * "
          "blockDim.x + threadIdx.x) * V;\n"
          "       base < n; base += step) {\n";
    for (unsigned k = 0; k < numIn; ++k)
      if (r.plan[k].access == FusedAccess::Full)
        os << "    float a" << k << "[V];\n    mtc_fused::loadElems<V>(in" << k
           << ", base, n, vec, a" << k << ");\n";
    for (unsigned o = 0; o < numOut; ++o)
      os << "    float r" << o << "[V];\n";
    os << "#pragma unroll\n    for (int j = 0; j < V; ++j) {\n";
    if (llvm::any_of(r.plan, [](const FusedInputPlan &p) {
          return p.access == FusedAccess::Suffix ||
                 p.access == FusedAccess::Row;
        }))
      os << "      const long long i = base + j < n ? base + j : n - 1;\n";
    for (unsigned k = 0; k < numIn; ++k) {
      FusedAccess a = r.plan[k].access;
      if (a == FusedAccess::Scalar)
        continue;
      if (a == FusedAccess::Full)
        os << "      const float x" << k << " = a" << k << "[j];\n";
      else
        os << "      const float x" << k << " = "
           << loadOf(k, "i", "i / " + std::to_string(m) + "LL") << ";\n";
    }
    if (failed(emitOps(false, "      ", err)))
      return failure();
    for (auto [o, v] : llvm::enumerate(body.getTerminator()->getOperands()))
      os << "      r" << o << "[j] = " << valueName(v) << ";\n";
    os << "    }\n";
    for (unsigned o = 0; o < numOut; ++o)
      os << "    mtc_fused::storeElems<V>(out" << o << ", base, n, vec, r" << o
         << ");\n";
    os << "  }\n";
    return success();
  }

  /// The per-element part of a row kernel at \p indent: loads, element
  /// ops, element outputs and accumulations; from the arrays of a 16-byte
  /// step at index q when \p step, else from memory at element index i.
  LogicalResult emitElementStep(bool step, ArrayRef<Operation *> reds,
                                const std::string &indent, std::string &err) {
    for (unsigned k = 0; k < numIn; ++k)
      if (r.plan[k].access != FusedAccess::Scalar && readPerElement(k))
        os << indent << "const float x" << k << " = "
           << (step && r.plan[k].access == FusedAccess::Full
                   ? "a" + std::to_string(k) + "[q]"
                   : loadOf(k, "i", "row"))
           << ";\n";
    if (failed(emitOps(false, indent, err)))
      return failure();
    for (auto [o, v] : llvm::enumerate(body.getTerminator()->getOperands()))
      if (!rowResult[o]) {
        if (step)
          os << indent << "r" << o << "[q] = " << valueName(v) << ";\n";
        else
          os << indent << "out" << o << "[i] = mtc_fused::fromFloat<O" << o
             << ">(" << valueName(v) << ");\n";
      }
    for (auto [q, red] : llvm::enumerate(reds)) {
      std::string x = valueName(red->getOperand(0)),
                  acc = "acc" + std::to_string(q);
      if (isa<mt::MaxOp>(red))
        os << indent << acc << " = " << x << " > " << acc << " ? " << x << " : "
           << acc << ";\n";
      else
        os << indent << acc << " += " << x << ";\n";
    }
    return success();
  }

  LogicalResult emitRowsBody(std::string &err) {
    bool warpRows = m <= kWarpRowMax;
    std::string M = std::to_string(m) + "LL";
    if (warpRows)
      os << "  const int lanes = 32, t = threadIdx.x % 32;\n"
            "  const long long row = static_cast<long long>(blockIdx.x) * "
            "(blockDim.x / 32) + threadIdx.x / 32;\n";
    else
      os << "  __shared__ float scratch[32];\n"
            "  const int lanes = blockDim.x, t = threadIdx.x;\n"
            "  const long long row = blockIdx.x;\n";
    os << "  if (row >= n / " << M << ")\n    return; // uniform over the "
       << (warpRows ? "warp" : "block") << "\n";
    for (unsigned k = 0; k < numIn; ++k)
      if (r.plan[k].access == FusedAccess::Scalar)
        os << "  const float x" << k << " = " << loadOf(k, "", "") << ";\n";
    SmallVector<Operation *> reds;
    for (Operation &op : body)
      if (mt::FusedOp::isReduction(&op)) {
        reds.push_back(&op);
        ids[op.getResult(0)] = static_cast<int>(ids.size());
        os << "  float acc" << reds.size() - 1 << " = "
           << (isa<mt::MaxOp>(op) ? "__int_as_float(0xff800000)" : "0.0f")
           << ";\n";
      }
    // 16-byte steps of V consecutive elements per lane when the row length
    // is whole steps and every element-indexed pointer is 16-byte aligned
    // (then every row starts aligned), else one element at a time.
    std::vector<std::string> vecPtrs;
    for (unsigned k = 0; k < numIn; ++k)
      if (r.plan[k].access == FusedAccess::Full && readPerElement(k))
        vecPtrs.push_back("in" + std::to_string(k));
    for (unsigned o = 0; o < numOut; ++o)
      if (!rowResult[o])
        vecPtrs.push_back("out" + std::to_string(o));
    os << "  const bool vec = " << M << " % V == 0 && mtc_fused::aligned16(";
    for (auto [q, p] : llvm::enumerate(vecPtrs))
      os << (q ? ", " : "") << p;
    os << ");\n  if (vec) { // 16-byte steps\n"
       << "    for (long long j = static_cast<long long>(t) * V; j < " << M
       << "; j += static_cast<long long>(lanes) * V) {\n"
       << "      const long long base = row * " << M << " + j;\n";
    for (unsigned k = 0; k < numIn; ++k)
      if (r.plan[k].access == FusedAccess::Full && readPerElement(k))
        os << "      float a" << k << "[V];\n      mtc_fused::loadElems<V>(in"
           << k << ", base, n, true, a" << k << ");\n";
    for (unsigned o = 0; o < numOut; ++o)
      if (!rowResult[o])
        os << "      float r" << o << "[V];\n";
    os << "#pragma unroll\n      for (int q = 0; q < V; ++q) {\n";
    if (llvm::any_of(llvm::seq(0u, numIn), [&](unsigned k) {
          return r.plan[k].access == FusedAccess::Suffix && readPerElement(k);
        }))
      os << "        const long long i = base + q;\n";
    if (failed(emitElementStep(true, reds, "        ", err)))
      return failure();
    os << "      }\n";
    for (unsigned o = 0; o < numOut; ++o)
      if (!rowResult[o])
        os << "      mtc_fused::storeElems<V>(out" << o << ", base, n, true, r"
           << o << ");\n";
    os << "    }\n  } else { // one element at a time\n"
       << "    for (long long j = t; j < " << M << "; j += lanes) {\n"
       << "      const long long i = row * " << M << " + j;\n";
    if (failed(emitElementStep(false, reds, "      ", err)))
      return failure();
    os << "    }\n";
    os << "  }\n";
    for (auto [q, red] : llvm::enumerate(reds)) {
      std::string acc = "acc" + std::to_string(q);
      bool isMax = isa<mt::MaxOp>(red);
      if (warpRows)
        os << "  " << acc << " = mtc_cuda::" << (isMax ? "warpMax" : "warpSum")
           << "(" << acc << ");\n";
      else
        os << "  " << acc
           << " = mtc_cuda::" << (isMax ? "blockMax" : "blockSum") << "(" << acc
           << ", scratch);\n";
      os << "  const float " << valueName(red->getResult(0)) << " = " << acc;
      if (isa<mt::MeanOp>(red))
        os << " / " << literal(static_cast<float>(m));
      os << ";\n";
    }
    os << "  if (t != 0)\n    return;\n";
    for (unsigned k = 0; k < numIn; ++k)
      if (r.plan[k].access != FusedAccess::Scalar && !readPerElement(k))
        os << "  const float x" << k << " = " << loadOf(k, "", "row") << ";\n";
    if (failed(emitOps(true, "  ", err)))
      return failure();
    for (auto [o, v] : llvm::enumerate(body.getTerminator()->getOperands()))
      if (rowResult[o])
        os << "  out" << o << "[row] = mtc_fused::fromFloat<O" << o << ">("
           << valueName(v) << ");\n";
    return success();
  }

  bundle::CudaFusedEntry emitEntry(const std::string &sig) {
    bundle::CudaFusedEntry e;
    e.signature = sig;
    e.entry = r.name + "_" + sig;
    // 16 bytes of the narrowest element-indexed storage.
    int v = 4;
    for (unsigned k = 0; k < numIn; ++k)
      if (r.plan[k].access == FusedAccess::Full && sig[k] == 'b' &&
          (!reduce || readPerElement(k)))
        v = 8;
    for (unsigned o = 0; o < numOut; ++o)
      if (sig[numIn + 1 + o] == 'b' && (!reduce || !rowResult[o]))
        v = 8;
    if (!reduce) {
      e.block = kElementBlock;
      e.perBlock = kElementBlock * v;
      e.maxBlocks = kElementMaxBlocks;
    } else if (m <= kWarpRowMax) {
      e.block = kRowsBlock;
      e.perBlock = kRowsBlock / 32;
    } else {
      int64_t threads = 64;
      while (threads < 1024 && threads * 8 < m)
        threads *= 2;
      e.block = threads;
      e.perBlock = 1;
    }
    os << "extern \"C\" __global__ void __launch_bounds__(" << e.block << ") "
       << e.entry << "(";
    for (unsigned k = 0; k < numIn; ++k)
      os << "const " << typeOf(sig[k]) << " *in" << k << ", ";
    for (unsigned o = 0; o < numOut; ++o)
      os << typeOf(sig[numIn + 1 + o]) << " *out" << o << ", ";
    os << "long long n) {\n  " << r.name << "_impl<" << v << ", ";
    for (unsigned k = 0; k < numIn; ++k)
      os << (k ? ", " : "") << typeOf(sig[k]);
    for (unsigned o = 0; o < numOut; ++o)
      os << ", " << typeOf(sig[numIn + 1 + o]);
    os << ">(";
    for (unsigned k = 0; k < numIn; ++k)
      os << "in" << k << ", ";
    for (unsigned o = 0; o < numOut; ++o)
      os << "out" << o << ", ";
    os << "n);\n}\n";
    return e;
  }

  const FusedRegion &r;
  mt::FusedOp fused;
  llvm::raw_ostream &os;
  Block &body;
  int64_t m = 0;
  bool reduce = false;
  llvm::SmallPtrSet<Operation *, 8> rowOps;
  unsigned numIn = 0, numOut = 0;
  SmallVector<bool> rowResult;
  llvm::DenseMap<Value, std::string> argName;
  llvm::DenseMap<Value, int> ids;
};

} // namespace

llvm::Expected<bundle::CudaKernels>
emitCudaKernels(ModuleOp module, const CudaSignatures &signatures) {
  bundle::CudaKernels out;
  std::vector<FusedRegion> regions = nameFusedRegions(module);
  if (regions.empty())
    return out;
  llvm::raw_string_ostream os(out.source);
  os << "// Generated by mtc (compiler/Target/CudaKernels.h): the mt.fused "
        "regions of\n// one model as CUDA C, one entry per storage signature "
        "(docs/cuda.md).\n#include \"fused.cuh\"\n\n";
  for (const FusedRegion &r : regions) {
    std::set<std::string> sigs;
    auto it = signatures.find(r.name);
    if (it != signatures.end())
      sigs = it->second;
    if (sigs.empty())
      sigs.insert(std::string(r.plan.size(), 'f') + "_" +
                  std::string(mt::FusedOp(r.op).getNumResults(), 'f'));
    bundle::CudaFusedKernel k;
    std::string err;
    if (failed(RegionEmitter(r, os).emit(sigs, k, err)))
      return llvm::createStringError(err);
    out.kernels.push_back(std::move(k));
  }
  return out;
}

CudaSignatures fusedSignatures(const bundle::Bundle &b) {
  CudaSignatures out;
  bundle::forEachFusedKernelOp(
      b, [&](const bundle::Op &op, const std::string &sig) {
        out[op.strAttr("kernel")].insert(sig);
      });
  return out;
}

} // namespace mtc
