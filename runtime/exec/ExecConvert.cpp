//===- ExecConvert.cpp - The CPU kernels on a bf16 plan's storage -*- C++ -*-=//
//
// Part of mtc. Under a bf16 step plan the CPU device stores weights,
// activations and checkpoints as bf16, exactly as the plan lays them out
// (lib/Bundle/Plan.h, valueStorage), and computes in fp32 with the same
// numerics contract as the CUDA backend (docs/cuda.md, "Precisions"). The
// CPU kernels are fp32 kernels, so this conversion layer runs each of them
// on fp32 copies:
//
//   1. every bf16 operand is widened (exactly) into an fp32 copy in host
//      memory outside the device arena, the CPU counterpart of the CUDA
//      backend's scratch region; where the CUDA entry reads an f32 operand
//      as its bf16 compute type (a scalar constant times a bf16
//      activation), the copy is rounded through bf16 as there;
//   2. every result stored as bf16 is computed into an fp32 buffer there
//      (an attention's log-sum-exp, f32 under every precision, still goes
//      to its planned place);
//   3. the fp32 kernel runs; then each such result is rounded to nearest
//      even into its planned place in the device arena (or, unplanned, a
//      bf16 tensor allocated where the kernel would have allocated it).
//
// Results stored as f32 (parameter gradients, scalars) are the kernel's own.
// Views (param_ref, reshape), zeros and the ops that run
// functions of the bundle (apply_layers, moe: ExecMoE.cpp converts at the
// expert boundary itself) run as they are. The cost: per op, one fp32 copy
// of each bf16 operand and result (4 bytes written per element, then read
// again), held in host memory only while the op runs.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/OpContext.h"

#include "lib/Format/Safetensors.h"
#include "runtime/cpu/Bf16.h"

#include <algorithm>

namespace mtc::exec {

Tensor widened(const Tensor &t) {
  if (t.isInt || !t.f || t.dtype != DType::BF16)
    return t;
  Workspace::Scope onHost(nullptr);
  Tensor w = Tensor::empty(t.shape);
  cpu::widenBF16(reinterpret_cast<const uint16_t *>(t.data()), w.data(),
                 t.numel());
  w.lse = t.lse;
  return w;
}

void storeNarrowed(const Tensor &src, Tensor &dst) {
  if (src.numel() != dst.numel() || src.dtype != DType::F32)
    raise("internal error: storing a " + formatTensorShape(src.shape) +
          " tensor into " + formatTensorShape(dst.shape));
  if (dst.dtype == DType::BF16)
    cpu::narrowToBF16(src.data(), reinterpret_cast<uint16_t *>(dst.data()),
                      src.numel());
  else if (dst.data() != src.data())
    std::copy(src.data(), src.data() + src.numel(), dst.data());
}

namespace {

/// Which tensor's storage type the CUDA entry of \p k computes in (its
/// `t`, runtime/exec/cuda): every float operand is read as that type, so
/// under a bf16 plan an f32 operand of such an op is rounded to bf16 first.
enum class ComputeType {
  Native,   ///< each operand as it is stored
  Result0,  ///< the first result's
  Operand0, ///< the first operand's (its parameter-gradient result is f32)
};

ComputeType computeType(OpKind k) {
  switch (k) {
  case OpKind::WeightGrad:
  case OpKind::RmsNormGrad:
  case OpKind::LayerNormGrad:
  case OpKind::LinearCrossEntropy:
    return ComputeType::Operand0;
  case OpKind::ParamGrad:
  case OpKind::ReduceTo:
  case OpKind::EmbeddingGrad:
  case OpKind::CrossEntropy:
  case OpKind::Split:
  case OpKind::Fused:
    return ComputeType::Native;
  default:
    return ComputeType::Result0;
  }
}

/// The operand a Result0/Operand0 entry still reads as f32: the loss
/// gradient of the losses' backward (-1: none).
int64_t f32Operand(OpKind k) {
  if (k == OpKind::CrossEntropyGrad)
    return 2;
  if (k == OpKind::LinearCrossEntropyGrad)
    return 3;
  return -1;
}

/// Puts the operands' original tensors back, also when the kernel fails.
class OperandRestore {
public:
  explicit OperandRestore(OpContext &c) : c(c) {}
  ~OperandRestore() {
    for (auto &[i, t] : saved)
      c.operandSlot(i) = std::move(t);
  }
  OperandRestore(const OperandRestore &) = delete;
  OperandRestore &operator=(const OperandRestore &) = delete;

  /// Replaces operand \p i with \p copy, keeping the original.
  void replace(size_t i, Tensor copy) {
    saved.emplace_back(i, c.operandSlot(i));
    c.operandSlot(i) = std::move(copy);
  }

private:
  OpContext &c;
  std::vector<std::pair<size_t, Tensor>> saved;
};

/// Runs \p kernel (an fp32 CPU kernel) on fp32 copies (the file comment).
void runConverted(OpContext &c, OpKernel kernel) {
  const OpKind kind = c.kind();
  const ComputeType ct = computeType(kind);
  bool roundF32 = false;
  if (ct == ComputeType::Result0)
    roundF32 = !c.op.results.empty() && c.resultType(0) == DType::BF16;
  else if (ct == ComputeType::Operand0)
    roundF32 = c.numOperands() > 0 && c.in(0).dtype == DType::BF16;
  const int64_t keepF32 = f32Operand(kind);

  OperandRestore restore(c);
  for (size_t i = 0; i < c.numOperands(); ++i) {
    // An operand used twice is converted once (its slot is shared).
    const int id = c.op.operands[i];
    if (std::find(c.op.operands.begin(), c.op.operands.begin() + i, id) !=
        c.op.operands.begin() + i)
      continue;
    const Tensor &t = c.in(i);
    if (t.isInt || !t.f)
      continue;
    if (t.dtype == DType::BF16) {
      restore.replace(i, widened(t));
    } else if (roundF32 && static_cast<int64_t>(i) != keepF32) {
      Workspace::Scope onHost(nullptr);
      Tensor r = Tensor::empty(t.shape);
      cpu::roundThroughBF16(t.data(), r.data(), t.numel());
      r.lse = t.lse;
      restore.replace(i, std::move(r));
    }
  }

  const size_t numResults = c.op.results.size();
  std::vector<Tensor> planned(numResults);
  std::vector<bool> narrow(numResults, false);
  for (size_t r = 0; r < numResults; ++r) {
    if (c.resultType(r) != DType::BF16)
      continue;
    narrow[r] = true;
    planned[r] = c.resultSlot(r);
    Tensor wide;
    {
      Workspace::Scope onHost(nullptr);
      wide = Tensor::empty(c.resultShape(r));
    }
    wide.lse = planned[r].lse; // an attention's log-sum-exp: in place
    c.resultSlot(r) = std::move(wide);
  }

  kernel(c);

  for (size_t r = 0; r < numResults; ++r) {
    if (!narrow[r])
      continue;
    Tensor &got = c.resultSlot(r);
    if (got.dtype == DType::BF16)
      continue;
    Tensor out = planned[r].f ? planned[r]
                              : Tensor::empty(c.resultShape(r), DType::BF16);
    storeNarrowed(got, out);
    out.lse = got.lse;
    got = std::move(out);
  }
}

void converted(OpContext &c) { runConverted(c, cpuKernelTable()[c.kind()]); }

} // namespace

const KernelTable &cpuBf16KernelTable() {
  static const KernelTable table = [] {
    const KernelTable &cpu = cpuKernelTable();
    KernelTable t("CPU");
    for (size_t k = 0; k < bundle::kNumOpKinds; ++k)
      if (cpu[static_cast<OpKind>(k)])
        t.set(static_cast<OpKind>(k), converted);
    // Views, zero fills and the ops
    // that run the bundle's functions handle their storage themselves.
    for (OpKind k :
         {OpKind::ParamRef, OpKind::Reshape, OpKind::Zeros, OpKind::ApplyLayers,
          OpKind::ApplyLayersGrad, OpKind::Moe, OpKind::MoeGrad})
      t.set(k, cpu[k]);
    return t;
  }();
  return table;
}

} // namespace mtc::exec
