//===- DecodedOp.cpp - Bundle ops decoded once, at load -------------------===//
//
// Part of mtc. See DecodedOp.h. Arity and attribute types are checked against
// the bundle format's op table (lib/Bundle/Validate.h), the same table the
// reader validates with, so a bundle built in memory gets the same errors as
// one read from a file; the op's family then reads its attributes into its
// struct, with the defaults the bundle format documents (docs/bundle.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/DecodedOp.h"

#include "lib/Bundle/Validate.h"

#include <optional>

namespace mtc::exec {

namespace {

/// Thrown inside this file only; decode() turns it into a Status.
struct DecodeError {
  std::string message;
};

[[noreturn]] void fail(const std::string &what) { throw DecodeError{what}; }

/// The typed attributes of \p op (kind \p kind); its attribute types have
/// been checked. A value outside the op's vocabulary throws DecodeError.
OpAttrs decodeAttrs(OpKind kind, const bundle::Op &op) {
  auto choice =
      [&](const char *key, const std::string &dflt,
          std::initializer_list<const char *> allowed) -> std::string {
    std::string v = op.strAttr(key, dflt);
    std::string list;
    for (const char *a : allowed) {
      if (v == a)
        return v;
      list += std::string(list.empty() ? "" : ", ") + "'" + a + "'";
    }
    fail("attribute '" + std::string(key) + "' must be one of " + list +
         ", got '" + v + "'");
  };
  switch (kind) {
  case OpKind::Constant:
    return ConstantAttrs{op.floatAttr("value")};
  case OpKind::Add:
    return BinaryAttrs{BinaryFn::Add};
  case OpKind::Sub:
    return BinaryAttrs{BinaryFn::Sub};
  case OpKind::Mul:
    return BinaryAttrs{BinaryFn::Mul};
  case OpKind::Div:
    return BinaryAttrs{BinaryFn::Div};
  case OpKind::Neg:
  case OpKind::Exp:
  case OpKind::Log:
  case OpKind::Silu:
  case OpKind::Relu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Rsqrt:
  case OpKind::Sqrt:
  case OpKind::Square:
    return UnaryAttrs{*bundle::unaryFnOf(op.name), 0.0};
  case OpKind::Gelu:
    return UnaryAttrs{choice("approximate", "none", {"none", "tanh"}) == "tanh"
                          ? UnaryFn::GeluTanh
                          : UnaryFn::GeluErf,
                      0.0};
  case OpKind::Softcap:
    return UnaryAttrs{UnaryFn::Softcap, op.floatAttr("cap")};
  case OpKind::UnaryGrad: {
    std::optional<UnaryFn> fn = bundle::unaryFnOf(op.strAttr("kind"));
    if (!fn)
      fail("unknown elementwise function '" + op.strAttr("kind") + "'");
    return UnaryAttrs{*fn, op.floatAttr("param")};
  }
  case OpKind::Sum:
  case OpKind::Mean:
  case OpKind::Max:
  case OpKind::ReduceGrad: {
    std::string k = kind == OpKind::ReduceGrad
                        ? choice("kind", "", {"sum", "mean", "max"})
                        : op.name;
    ReduceFn fn = k == "sum"    ? ReduceFn::Sum
                  : k == "mean" ? ReduceFn::Mean
                                : ReduceFn::Max;
    return ReduceAttrs{fn, op.intAttr("axis"), op.boolAttr("keepdim")};
  }
  case OpKind::Softmax:
  case OpKind::SoftmaxGrad:
  case OpKind::Concat:
    return AxisAttrs{op.intAttr("axis")};
  case OpKind::Split:
    return SplitAttrs{op.intAttr("axis"), op.listAttr("sizes")};
  case OpKind::Slice:
  case OpKind::Pad:
    return RangeAttrs{op.intAttr("axis"), op.intAttr("start"),
                      op.intAttr("end")};
  case OpKind::Transpose:
    return TransposeAttrs{op.listAttr("perm")};
  case OpKind::RmsNorm:
  case OpKind::RmsNormGrad:
  case OpKind::LayerNorm:
  case OpKind::LayerNormGrad:
    return NormAttrs{op.floatAttr("eps"), op.floatAttr("offset")};
  case OpKind::Rope: {
    RopeAttrs a;
    a.theta = op.floatAttr("theta", 10000.0);
    a.fraction = op.floatAttr("fraction", 1.0);
    if (op.attr("scaling") && choice("scaling", "", {"llama3"}) == "llama3") {
      a.llama3 = true;
      a.factor = op.floatAttr("factor", 1.0);
      a.lowFreqFactor = op.floatAttr("low_freq_factor", 1.0);
      a.highFreqFactor = op.floatAttr("high_freq_factor", 4.0);
      a.originalMaxPosition = op.intAttr("original_max_position", 8192);
    }
    a.inverse = op.boolAttr("inverse");
    return a;
  }
  case OpKind::Attention:
  case OpKind::AttentionGrad:
    return AttentionAttrs{op.boolAttr("causal", false), op.intAttr("window", 0),
                          op.floatAttr("softcap", 0.0),
                          op.floatAttr("scale", 0.0)};
  case OpKind::CrossEntropy:
  case OpKind::CrossEntropyGrad:
    return CrossEntropyAttrs{op.intAttr("ignore_index", -100)};
  case OpKind::LinearCrossEntropy:
  case OpKind::LinearCrossEntropyGrad:
    return LinearCrossEntropyAttrs{op.boolAttr("transpose_weight"),
                                   op.floatAttr("softcap"),
                                   op.intAttr("ignore_index", -100)};
  case OpKind::ApplyLayers:
  case OpKind::ApplyLayersGrad:
    return LayersAttrs{op.intAttr("first"), op.intAttr("count")};
  case OpKind::Moe:
  case OpKind::MoeGrad:
    return MoeAttrs{op.intAttr("top_k", 1), op.boolAttr("normalize"),
                    op.floatAttr("aux_loss")};
  case OpKind::Fused:
    return FusedAttrs{op.strAttr("kernel")};
  case OpKind::ParamRef:
  case OpKind::ParamGrad:
  case OpKind::Zeros:
  case OpKind::Embedding:
  case OpKind::EmbeddingGrad:
  case OpKind::Matmul:
  case OpKind::WeightGrad:
  case OpKind::ReduceTo:
  case OpKind::Reshape:
    return NoAttrs{};
  }
  fail("has no decoder (a bug: an Ops.def line without a case here)");
}

} // namespace

Range resolveRange(const RangeAttrs &a, const Shape &part, const Shape &whole,
                   int64_t position) {
  if (a.end != kDimS)
    return {a.start, a.end, ""};
  int64_t rows = whole.at(a.axis), n = part.at(a.axis);
  Range r{position, position + n, ""};
  if (r.end > rows)
    r.error = "positions " + std::to_string(r.start) + " to " +
              std::to_string(r.end - 1) + " need rows past the " +
              std::to_string(rows) + " of the table " + formatShape(whole) +
              " whose first S rows the model uses (the sequence is longer "
              "than its position table)";
  return r;
}

std::string DecodedProgram::describe(const DecodedFunction &fn,
                                     const DecodedOp &op) {
  return fn.where + ": op " + std::to_string(op.index) + " '" + op.op->name +
         "'" + (op.op->loc.empty() ? "" : " at " + op.op->loc);
}

Status DecodedProgram::add(const bundle::Function &fn, std::string where) {
  auto d = std::make_unique<DecodedFunction>();
  d->fn = &fn;
  d->where = std::move(where);
  d->ops.reserve(fn.ops.size());
  for (size_t i = 0; i < fn.ops.size(); ++i) {
    const bundle::Op &op = fn.ops[i];
    DecodedOp dop;
    dop.op = &op;
    dop.index = i;
    std::string at = d->where + ": op " + std::to_string(i) + " '" + op.name +
                     "'" + (op.loc.empty() ? "" : " at " + op.loc);
    auto error = [&](const std::string &what) -> Status {
      return Status::error(at + ": " + what);
    };
    std::optional<OpKind> kind = bundle::opKindOf(op.name);
    const bundle::OpSpec *spec = bundle::findOp(op.name);
    if (!kind || !spec)
      return error("unknown op (the runtime has no kernel for '" + op.name +
                   "')");
    dop.kind = *kind;
    auto arity = [&](const char *what, size_t got, int min, int max) -> Status {
      if (static_cast<int>(got) >= min &&
          (max < 0 || static_cast<int>(got) <= max))
        return Status::success();
      std::string want =
          max < 0      ? "at least " + std::to_string(min)
          : min == max ? std::to_string(min)
                       : std::to_string(min) + " to " + std::to_string(max);
      return error("expected " + want + " " + what + ", got " +
                   std::to_string(got));
    };
    if (Status st = arity("operands", op.operands.size(), spec->minOperands,
                          spec->maxOperands);
        !st.ok())
      return st;
    if (Status st = arity("results", op.results.size(), spec->minResults,
                          spec->maxResults);
        !st.ok())
      return st;
    for (int v : op.operands)
      if (v < 0 || static_cast<size_t>(v) >= fn.values.size())
        return error("operand value " + std::to_string(v) +
                     " is not a value of the function");
    for (int v : op.results)
      if (v < 0 || static_cast<size_t>(v) >= fn.values.size())
        return error("result value " + std::to_string(v) +
                     " is not a value of the function");
    if (Status st = bundle::checkAttributes(op, *spec); !st.ok())
      return error(st.message());
    try {
      dop.attrs = decodeAttrs(*kind, op);
    } catch (const DecodeError &e) {
      return error(e.message);
    }
    if (dop.kind == OpKind::Fused) {
      if (!op.region)
        return error("has no region (its body)");
      if (Status st = add(*op.region, at + ": region"); !st.ok())
        return st;
      dop.region = functions.at(op.region.get()).get();
    } else if (op.region) {
      return error("has a region, but only fused ops have one");
    }
    d->ops.push_back(std::move(dop));
  }
  functions[&fn] = std::move(d);
  return Status::success();
}

Expected<DecodedProgram> DecodedProgram::decode(const bundle::Bundle &b) {
  DecodedProgram p;
  for (const bundle::Layer &l : b.layers) {
    std::string wl = "layer '" + l.name + "'";
    for (const bundle::Expert &e : l.experts)
      for (const auto &[name, fn] : e.functions)
        if (Status st = p.add(fn, wl + ": expert '" + e.name + "': function '" +
                                      name + "'");
            !st.ok())
          return st;
    for (const auto &[name, fn] : l.functions)
      if (Status st = p.add(fn, wl + ": function '" + name + "'"); !st.ok())
        return st;
  }
  for (const auto &[name, fn] : b.functions)
    if (Status st = p.add(fn, "function '" + name + "'"); !st.ok())
      return st;
  return p;
}

} // namespace mtc::exec
