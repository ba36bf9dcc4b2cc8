//===- DecodedOp.cpp - Bundle ops decoded once, at load -------------------===//
//
// Part of mtc. See DecodedOp.h. Arity and attribute types are checked against
// the bundle format's op table (lib/Bundle/Validate.h), the same table the
// reader validates with, so a bundle built in memory gets the same errors as
// one read from a file; the decoder of the op's family (its row of
// lib/Bundle/Ops.def) then reads its attributes into its struct, an absent
// one as the row's default (the defaults docs/bundle.md documents).
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

/// The attributes of one op as its Ops.def row declares them: an absent one
/// reads as the row's default (a required one is present: checkAttributes
/// ran first). Reading an attribute the row does not declare is a bug of
/// this file and throws DecodeError saying so.
class AttrReader {
public:
  AttrReader(const bundle::Op &op, const bundle::OpSpec &spec)
      : op(op), spec(spec) {}

  OpKind kind() const { return spec.kind; }
  bool declares(const char *key) const { return spec.attr(key) != nullptr; }
  bool present(const char *key) const {
    decl(key);
    return op.attr(key) != nullptr;
  }

  int64_t i(const char *key) const {
    return op.intAttr(key, dflt<int64_t>(key));
  }
  double f(const char *key) const {
    return op.floatAttr(key, dflt<double>(key));
  }
  bool b(const char *key) const { return op.boolAttr(key, dflt<bool>(key)); }
  std::string s(const char *key) const {
    return op.strAttr(key, dflt<std::string>(key));
  }
  std::vector<int64_t> list(const char *key) const {
    decl(key);
    return op.listAttr(key);
  }
  /// A string attribute from a vocabulary; another value throws DecodeError.
  std::string choice(const char *key,
                     std::initializer_list<const char *> allowed) const {
    std::string v = s(key);
    std::string names;
    for (const char *a : allowed) {
      if (v == a)
        return v;
      names += std::string(names.empty() ? "" : ", ") + "'" + a + "'";
    }
    fail("attribute '" + std::string(key) + "' must be one of " + names +
         ", got '" + v + "'");
  }

private:
  const bundle::AttrSpec &decl(const char *key) const {
    const bundle::AttrSpec *a = spec.attr(key);
    if (!a)
      fail("reads attribute '" + std::string(key) +
           "', which its row of lib/Bundle/Ops.def does not declare (a bug)");
    return *a;
  }
  template <typename T> T dflt(const char *key) const {
    const bundle::AttrSpec &a = decl(key);
    return a.dflt ? std::get<T>(*a.dflt) : T();
  }

  const bundle::Op &op;
  const bundle::OpSpec &spec;
};

// One decoder per family of Ops.def (its Family column): the family's
// struct from the op's attributes. A value outside an op's vocabulary
// throws DecodeError.

OpAttrs decodeNone(const AttrReader &) { return NoAttrs{}; }

OpAttrs decodeConstant(const AttrReader &r) {
  return ConstantAttrs{r.f("value")};
}

OpAttrs decodeBinary(const AttrReader &r) {
  switch (r.kind()) {
  case OpKind::Add:
    return BinaryAttrs{BinaryFn::Add};
  case OpKind::Sub:
    return BinaryAttrs{BinaryFn::Sub};
  case OpKind::Mul:
    return BinaryAttrs{BinaryFn::Mul};
  case OpKind::Div:
    return BinaryAttrs{BinaryFn::Div};
  default:
    fail("is a binary op without a function (a bug)");
  }
}

/// The unary ops compute the function of UnaryFns.def they are named after;
/// gelu's `approximate` picks gelu_erf or gelu_tanh, softcap's `cap` is the
/// parameter; unary_grad names its function in `kind`.
OpAttrs decodeUnary(const AttrReader &r) {
  switch (r.kind()) {
  case OpKind::UnaryGrad: {
    std::optional<UnaryFn> fn = bundle::unaryFnOf(r.s("kind"));
    if (!fn)
      fail("unknown elementwise function '" + r.s("kind") + "'");
    return UnaryAttrs{*fn, r.f("param")};
  }
  case OpKind::Gelu:
    return UnaryAttrs{r.choice("approximate", {"none", "tanh"}) == "tanh"
                          ? UnaryFn::GeluTanh
                          : UnaryFn::GeluErf,
                      0.0};
  case OpKind::Softcap:
    return UnaryAttrs{UnaryFn::Softcap, r.f("cap")};
  default: {
    std::optional<UnaryFn> fn = bundle::unaryFnOf(opKindName(r.kind()));
    if (!fn)
      fail("is a unary op that names no function of UnaryFns.def (a bug)");
    return UnaryAttrs{*fn, 0.0};
  }
  }
}

OpAttrs decodeReduce(const AttrReader &r) {
  ReduceFn fn = ReduceFn::Max;
  if (r.kind() == OpKind::Sum)
    fn = ReduceFn::Sum;
  else if (r.kind() == OpKind::Mean)
    fn = ReduceFn::Mean;
  else if (r.kind() == OpKind::ReduceGrad) {
    std::string k = r.choice("kind", {"sum", "mean", "max"});
    fn = k == "sum" ? ReduceFn::Sum : k == "mean" ? ReduceFn::Mean : fn;
  }
  return ReduceAttrs{fn, r.i("axis"), r.b("keepdim")};
}

OpAttrs decodeAxis(const AttrReader &r) { return AxisAttrs{r.i("axis")}; }

OpAttrs decodeSplit(const AttrReader &r) {
  return SplitAttrs{r.i("axis"), r.list("sizes")};
}

OpAttrs decodeRange(const AttrReader &r) {
  return RangeAttrs{r.i("axis"), r.i("start"), r.i("end")};
}

OpAttrs decodeTranspose(const AttrReader &r) {
  return TransposeAttrs{r.list("perm")};
}

/// layernorm has no `offset`.
OpAttrs decodeNorm(const AttrReader &r) {
  return NormAttrs{r.f("eps"), r.declares("offset") ? r.f("offset") : 0.0};
}

OpAttrs decodeRope(const AttrReader &r) {
  RopeAttrs a;
  a.theta = r.f("theta");
  a.fraction = r.f("fraction");
  if (r.present("scaling") && r.choice("scaling", {"llama3"}) == "llama3") {
    a.llama3 = true;
    a.factor = r.f("factor");
    a.lowFreqFactor = r.f("low_freq_factor");
    a.highFreqFactor = r.f("high_freq_factor");
    a.originalMaxPosition = r.i("original_max_position");
  }
  a.inverse = r.b("inverse");
  return a;
}

OpAttrs decodeAttention(const AttrReader &r) {
  return AttentionAttrs{r.b("causal"), r.i("window"), r.f("softcap"),
                        r.f("scale")};
}

OpAttrs decodeCrossEntropy(const AttrReader &r) {
  return CrossEntropyAttrs{r.i("ignore_index")};
}

OpAttrs decodeLinearCrossEntropy(const AttrReader &r) {
  return LinearCrossEntropyAttrs{r.b("transpose_weight"), r.f("softcap"),
                                 r.i("ignore_index")};
}

OpAttrs decodeLayers(const AttrReader &r) {
  return LayersAttrs{r.i("first"), r.i("count")};
}

OpAttrs decodeMoe(const AttrReader &r) {
  return MoeAttrs{r.i("top_k"), r.b("normalize"), r.f("aux_loss")};
}

OpAttrs decodeFused(const AttrReader &r) { return FusedAttrs{r.s("kernel")}; }

/// The typed attributes of \p op: the decoder of its family (Ops.def).
OpAttrs decodeAttrs(const bundle::Op &op, const bundle::OpSpec &spec) {
  AttrReader r(op, spec);
  switch (spec.kind) {
#define MTC_OP(Kind, Name, MinOperands, MaxOperands, MinResults, MaxResults,   \
               Symbol, Where, Family, ...)                                     \
  case OpKind::Kind:                                                           \
    return decode##Family(r);
#include "lib/Bundle/Ops.def"
  }
  fail("has no decoder (a bug)");
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
      dop.attrs = decodeAttrs(op, *spec);
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
