//===- DecodedOp.h - Bundle ops decoded once, at load -----------*- C++ -*-===//
//
// Part of mtc. The executor does not interpret a bundle's ops by name: when
// it is constructed, every op of every function (model, layer, expert and
// fused bodies) is decoded into its OpKind (lib/Bundle/Ops.def) and typed
// attributes, one small struct per op family. An op the runtime does not
// know, an attribute missing, misspelt or of the wrong type is a load error
// naming the function, the op (index, name) and its source location, instead
// of a silent default or a failure when the op first runs.
//
// The attributes are backend-neutral: each backend's kernel table
// (KernelTable.h) reads them and maps them onto its own kernels' parameters.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_DECODEDOP_H
#define MTC_RUNTIME_EXEC_DECODEDOP_H

#include "lib/Bundle/Bundle.h"
#include "lib/Bundle/OpKind.h"
#include "lib/Support/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace mtc::exec {

using bundle::OpKind;

/// The function of an elementwise unary op (neg ... softcap) or of the
/// derivative a unary_grad computes (its `kind`): lib/Bundle/UnaryFns.def.
using bundle::UnaryFn;
/// add, sub, mul, div.
enum class BinaryFn { Add, Sub, Mul, Div };
/// sum, mean, max, and the reduction a reduce_grad differentiates.
enum class ReduceFn { Sum, Mean, Max };

/// Ops without attributes.
struct NoAttrs {};
/// constant.
struct ConstantAttrs {
  double value = 0;
};
/// add, sub, mul, div (the function comes from the op kind).
struct BinaryAttrs {
  BinaryFn fn = BinaryFn::Add;
};
/// neg ... softcap, gelu (`approximate` chooses GeluErf or GeluTanh),
/// unary_grad (`kind`). param: softcap's `cap`, unary_grad's `param`.
struct UnaryAttrs {
  UnaryFn fn = UnaryFn::Neg;
  double param = 0;
};
/// sum, mean, max, reduce_grad (`kind`).
struct ReduceAttrs {
  ReduceFn fn = ReduceFn::Sum;
  int64_t axis = 0;
  bool keepdim = false;
};
/// softmax, softmax_grad, concat.
struct AxisAttrs {
  int64_t axis = 0;
};
/// split.
struct SplitAttrs {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
};
/// slice, pad. `end` is kDimS for the first S entries of the axis (a
/// learned position table); resolveRange gives the bound range.
struct RangeAttrs {
  int64_t axis = 0, start = 0, end = 0;
};

/// The [start, end) a slice or pad covers at run time, or why it cannot run.
struct Range {
  int64_t start = 0, end = 0;
  std::string error;
};

/// Resolves \p a for a run: \p part is the slice's result (the pad's
/// input), \p whole the sliced tensor (the pad's result). A range ending at
/// S covers the part's S entries, starting at \p position: 0 in training,
/// the absolute position of the first new token when decoding with a KV
/// cache, so that a position table gives each token its own row. Shared by
/// every backend's slice and pad.
Range resolveRange(const RangeAttrs &a, const Shape &part, const Shape &whole,
                   int64_t position);
/// transpose.
struct TransposeAttrs {
  std::vector<int64_t> perm;
};
/// rmsnorm(_grad) and layernorm(_grad) (offset: rmsnorm only, else 0).
struct NormAttrs {
  double eps = 0, offset = 0;
};
/// rope; the llama3 fields only when `scaling` is "llama3".
struct RopeAttrs {
  double theta = 10000.0, fraction = 1.0;
  bool llama3 = false;
  double factor = 1.0, lowFreqFactor = 1.0, highFreqFactor = 4.0;
  int64_t originalMaxPosition = 8192;
  bool inverse = false;
};
/// attention, attention_grad.
struct AttentionAttrs {
  bool causal = false;
  int64_t window = 0;
  double softcap = 0, scale = 0;
};
/// cross_entropy, cross_entropy_grad.
struct CrossEntropyAttrs {
  int64_t ignoreIndex = -100;
};
/// linear_cross_entropy(_grad).
struct LinearCrossEntropyAttrs {
  bool transposeWeight = false;
  double softcap = 0;
  int64_t ignoreIndex = -100;
};
/// apply_layers(_grad): instances [first, first + count) of the symbol's
/// layer.
struct LayersAttrs {
  int64_t first = 0, count = 0;
};
/// moe, moe_grad.
struct MoeAttrs {
  int64_t topK = 1;
  bool normalize = false;
  double auxLoss = 0;
};
/// fused: the compiled kernel's symbol ("" to run the body op by op).
struct FusedAttrs {
  std::string kernel;
};

using OpAttrs =
    std::variant<NoAttrs, ConstantAttrs, BinaryAttrs, UnaryAttrs, ReduceAttrs,
                 AxisAttrs, SplitAttrs, RangeAttrs, TransposeAttrs, NormAttrs,
                 RopeAttrs, AttentionAttrs, CrossEntropyAttrs,
                 LinearCrossEntropyAttrs, LayersAttrs, MoeAttrs, FusedAttrs>;

struct DecodedFunction;

/// One op of a function, decoded.
struct DecodedOp {
  OpKind kind = OpKind::Zeros;
  /// The bundle's op: operands, results, symbol, source location.
  const bundle::Op *op = nullptr;
  size_t index = 0; ///< in its function
  OpAttrs attrs;
  /// fused: the decoded body (op->region).
  const DecodedFunction *region = nullptr;

  /// The attributes of the op's family (a mismatch is a bug of the kernel
  /// table: std::bad_variant_access).
  template <typename A> const A &get() const { return std::get<A>(attrs); }
};

/// A function with its ops decoded; `where` names it in messages
/// ("layer 'Block': function 'forward'").
struct DecodedFunction {
  const bundle::Function *fn = nullptr;
  std::string where;
  std::vector<DecodedOp> ops;
};

/// Every function of a bundle, decoded. The bundle must outlive it and not
/// change: decoded functions are found by the address of their bundle
/// function.
class DecodedProgram {
public:
  /// Decodes every function of \p b (and the fused bodies inside them).
  /// Errors: "layer 'Block': function 'forward': op 7 'rmsnorm' at
  /// tiny.mt:4:9: missing attribute 'eps' (a number)".
  static Expected<DecodedProgram> decode(const bundle::Bundle &b);

  /// The decoded form of \p fn, or null if it is no function of the bundle.
  const DecodedFunction *find(const bundle::Function &fn) const {
    auto it = functions.find(&fn);
    return it == functions.end() ? nullptr : it->second.get();
  }

  /// Calls \p f on every decoded op (bodies of fused ops included).
  template <typename F> void forEachOp(F &&f) const {
    for (const auto &[fn, d] : functions)
      for (const DecodedOp &op : d->ops)
        f(*d, op);
  }

  /// "<function>: op 3 'matmul' at tiny.mt:4:9" for messages about \p op.
  static std::string describe(const DecodedFunction &fn, const DecodedOp &op);

private:
  Status add(const bundle::Function &fn, std::string where);
  std::unordered_map<const bundle::Function *, std::unique_ptr<DecodedFunction>>
      functions;
};

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_DECODEDOP_H
