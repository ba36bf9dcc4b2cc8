//===- OpContext.h - What a kernel of the executor sees ---------*- C++ -*-===//
//
// Part of mtc. Internal to runtime/exec. A kernel-table entry (KernelTable.h)
// gets one OpContext per op it runs: the decoded op with its typed
// attributes, its operands, the placement of its results (planned in a
// workspace or allocated afresh) and the executor state a few ops need (the
// KV cache, the loss, parameters, running layer and expert functions). The
// context is a friend of the Executor, so that the kernels stay free
// functions in the op-family files (Exec*.cpp) without making the executor's
// state public.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_OPCONTEXT_H
#define MTC_RUNTIME_EXEC_OPCONTEXT_H

#include "runtime/cpu/Kernels.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/Failure.h"
#include "runtime/exec/KernelTable.h"

#include <cstring>
#include <string>
#include <vector>

namespace mtc::exec {

/// A run-time error of \p op: "file:line:col: error in 'matmul': msg".
[[noreturn]] void failOp(const bundle::Op &op, const std::string &msg);

/// The product of dims [from, to) of \p s.
int64_t product(const std::vector<int64_t> &s, size_t from, size_t to);
/// [outer, n, inner] around \p axis.
void split3(const std::vector<int64_t> &s, int64_t axis, int64_t &outer,
            int64_t &n, int64_t &inner);

/// The runtime/cpu form of decoded attributes, shared by the CPU kernels
/// and the CUDA ones (whose launchers mirror runtime/cpu). A UnaryFn is
/// already a cpu::Unary (both are lib/Bundle/UnaryFns.def's).
cpu::Binary cpuBinary(BinaryFn fn);
cpu::Reduce cpuReduce(ReduceFn fn);
cpu::RopeParams ropeParams(const RopeAttrs &a);
cpu::AttentionParams attentionParams(const AttentionAttrs &a);

/// Releases what the current Workspace allocated during the guard's
/// lifetime (a moe op's expert temporaries, once its output is added in).
class WorkspaceRelease {
public:
  WorkspaceRelease() : w(Workspace::current()), mark(w ? w->mark() : 0) {}
  ~WorkspaceRelease() {
    if (w)
      w->release(mark);
  }
  WorkspaceRelease(const WorkspaceRelease &) = delete;
  WorkspaceRelease &operator=(const WorkspaceRelease &) = delete;

private:
  Workspace *w;
  int64_t mark;
};

/// The sizes of a moe op: N tokens of D, E experts, the top K of them.
struct MoeShape {
  int64_t N = 0, D = 0, E = 0, K = 0;
};
/// Checks a moe op's operands, h [.., D] and router [D, E] with E =
/// \p numExperts, and 1 <= \p topK <= E (the CPU and CUDA entries share
/// it; ExecMoE.cpp).
MoeShape moeShape(const bundle::Op &op, int64_t topK, const Tensor &h,
                  const Tensor &router, int64_t numExperts);

class OpContext {
public:
  OpContext(Executor &ex, const DecodedOp &op, std::vector<Tensor> &values,
            const bundle::Function &fn, const Executor::Scope &scope)
      : decoded(op), op(*op.op), ex(ex), vals(values), fn(fn), scope(scope) {}

  const DecodedOp &decoded;
  const bundle::Op &op;

  bundle::OpKind kind() const { return decoded.kind; }
  /// The op's typed attributes (DecodedOp.h).
  template <typename A> const A &attrs() const { return decoded.get<A>(); }
  size_t numOperands() const { return op.operands.size(); }

  Tensor &in(size_t i) {
    if (i >= op.operands.size())
      fail("missing operand");
    return vals[op.operands[i]];
  }
  std::vector<int64_t> resultShape(size_t i = 0) const {
    return ex.concrete(fn.values[op.results.at(i)]);
  }
  void setResult(Tensor t, size_t i = 0) {
    vals[op.results.at(i)] = std::move(t);
  }
  /// How result \p i is stored (Executor::storageOf).
  DType resultType(size_t i = 0) const {
    return ex.storageOf(fn, op.results.at(i));
  }
  /// How value \p v of function \p f is stored (Executor::storageOf): what
  /// an op that calls \p f (an expert's) must pass it.
  DType storageOf(const bundle::Function &f, int v) const {
    return ex.storageOf(f, v);
  }
  /// Zero-filled, for kernels that accumulate into (or only partly write)
  /// their result. A planned result is already in place: it is used.
  Tensor newResult(size_t i = 0) {
    const Tensor &pre = vals[op.results.at(i)];
    if (!pre.f)
      return Tensor::zeros(resultShape(i), resultType(i));
    ex.backend->zero(pre.f.get(), pre.bytes());
    return pre;
  }
  /// Uninitialised, for kernels that write every element.
  Tensor newOutput(size_t i = 0) {
    const Tensor &pre = vals[op.results.at(i)];
    return pre.f ? pre : Tensor::empty(resultShape(i), resultType(i));
  }
  [[noreturn]] void fail(const std::string &msg) const { failOp(op, msg); }
  /// The value slots of operand \p i and result \p i: the conversion layer
  /// (ExecConvert.cpp) swaps fp32 copies in and out around a kernel.
  Tensor &operandSlot(size_t i) { return vals[op.operands.at(i)]; }
  Tensor &resultSlot(size_t i) { return vals[op.results.at(i)]; }

  /// Whether the executor is decoding with its KV cache (Executor::decode),
  /// and the absolute position of the first new token.
  bool decoding() const { return ex.decoding; }
  int64_t cachePosition() const { return ex.cacheLength; }
  /// Fails when decoding and \p axis of operand 0 is the sequence axis: the
  /// op would mix positions the KV cache does not keep.
  void checkDecodable(int64_t axis) const;
  /// The KV cache of this attention op in this layer instance.
  Executor::KV &kvCache();
  /// The bundle the executor runs (a `fused` op's CUDA kernels).
  const bundle::Bundle &bundle() const { return ex.bundle; }
  /// \p t's shape with B, S and T bound (a fused body's values).
  std::vector<int64_t> concrete(const bundle::ValueType &t) const {
    return ex.concrete(t);
  }
  /// The backend the op runs on (its memory operations; the CUDA kernels
  /// reach their launch context through it).
  Backend &backend() const { return *ex.backend; }
  /// Records the loss a cross-entropy op computed, in double precision.
  void setLoss(double loss) { ex.lastLoss = loss; }
  /// The parameter the op names, in its scope (model, layer, expert).
  ParamSlot &param() { return *ex.slot(op, scope); }
  /// Where \p s's value (\p grad false) or gradient lives.
  float *paramData(ParamSlot &s, bool grad) {
    return ex.paramLocator ? ex.paramLocator(s, grad)
                           : (grad ? s.grad.data() : s.value.data());
  }

  /// The ops that run functions of the bundle (ExecLayers.cpp, ExecMoE.cpp).
  void applyLayers() { ex.applyLayers(*this); }
  void applyLayersGrad() { ex.applyLayersGrad(*this); }
  void fused() { ex.fused(*this); }
  void moe() { ex.moe(*this); }
  void moeGrad() { ex.moeGrad(*this); }

  /// What a moe op's kernels need beyond their operands (ExecMoE.cpp): the
  /// expert the op names in its layer, running one of its functions
  /// ("forward", "backward") as expert \p e on \p args (the first one
  /// [T, D]: T is bound to its rows), whether the op is recomputed inside a
  /// layer's backward (its aux loss is not counted again), whether routing
  /// is pinned (gradient checks), and recording an aux loss term a device
  /// backend computes (Backend::reserveAuxTerm).
  const bundle::Expert &expert() const;
  std::vector<Tensor> runExpert(const bundle::Expert &expert,
                                const std::string &fn, int64_t e,
                                std::vector<Tensor> args);
  bool inLayerBackward() const { return scope.backward; }
  bool routingPinned() const { return ex.pin != Executor::RoutingPin::Off; }
  void addAuxTerm(int64_t term) { ex.aux.terms.push_back(term); }

private:
  friend class Executor;
  Executor &ex;
  std::vector<Tensor> &vals;
  const bundle::Function &fn;
  const Executor::Scope &scope;
};

/// \p t with fp32 elements: itself unless it is stored as bf16, else an
/// exact fp32 copy in host memory outside any Workspace (ExecConvert.cpp).
Tensor widened(const Tensor &t);
/// The fp32 tensor \p src stored into \p dst of as many elements: rounded
/// to nearest even where \p dst is bf16, copied where it is f32.
void storeNarrowed(const Tensor &src, Tensor &dst);

/// The CPU kernels of each op family (Exec*.cpp) enter themselves into
/// \p t.
void addLayerKernels(KernelTable &t);
void addMatmulKernels(KernelTable &t);
void addElementwiseKernels(KernelTable &t);
void addNormKernels(KernelTable &t);
void addMovementKernels(KernelTable &t);
void addAttentionKernels(KernelTable &t);
void addLossKernels(KernelTable &t);
void addMoeKernels(KernelTable &t);

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_OPCONTEXT_H
