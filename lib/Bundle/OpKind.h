//===- OpKind.h - The ops of the bundle format as an enum -------*- C++ -*-===//
//
// Part of mtc. OpKind numbers the ops of Ops.def, so that the runtime decodes
// an op's name once, at load, and afterwards switches or indexes tables on a
// small integer instead of comparing strings. UnaryFn does the same for the
// elementwise functions of UnaryFns.def (the unary ops, unary_grad's kind).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_BUNDLE_OPKIND_H
#define MTC_LIB_BUNDLE_OPKIND_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mtc::bundle {

/// One enumerator per line of Ops.def, in its order.
enum class OpKind : uint8_t {
#define MTC_OP(Kind, Name, ...) Kind,
#include "lib/Bundle/Ops.def"
};

/// The number of op kinds (the size of a kernel table).
constexpr size_t kNumOpKinds = 0
#define MTC_OP(Kind, Name, ...) +1
#include "lib/Bundle/Ops.def"
    ;

/// Whether \p kind computes a function of UnaryFns.def of its operand: the
/// rows of Ops.def whose rule is Unary (neg ... square, gelu, softcap). A
/// backend has one kernel for them all, entered for each of these kinds.
constexpr bool isUnaryFnOp(OpKind kind) {
  constexpr bool unary[] = {
#define MTC_OP(Kind, Name, MinOperands, MaxOperands, MinResults, MaxResults,   \
               Symbol, Where, Family, Rule, ...)                               \
  std::string_view(#Rule) == "Unary",
#include "lib/Bundle/Ops.def"
  };
  return unary[static_cast<size_t>(kind)];
}

/// The bundle name of \p kind ("matmul").
const char *opKindName(OpKind kind);
/// The kind of the op named \p name, or nothing for a name the runtime does
/// not know.
std::optional<OpKind> opKindOf(const std::string &name);

/// One enumerator per line of UnaryFns.def, in its order: the function of a
/// unary op, or the derivative a unary_grad computes.
enum class UnaryFn : uint8_t {
#define MTC_UNARY_FN(Enum, Name, Param) Enum,
#include "lib/Bundle/UnaryFns.def"
};

/// The number of elementwise functions.
constexpr size_t kNumUnaryFns = 0
#define MTC_UNARY_FN(Enum, Name, Param) +1
#include "lib/Bundle/UnaryFns.def"
    ;

/// The name of \p fn ("gelu_tanh"): unary_grad's `kind`.
const char *unaryFnName(UnaryFn fn);
/// The function named \p name, or nothing.
std::optional<UnaryFn> unaryFnOf(const std::string &name);
/// Whether \p fn reads a parameter (softcap's cap).
bool unaryFnTakesParam(UnaryFn fn);
/// Every name, in order, quoted and comma-separated ("'neg', 'exp', ...")
/// for messages.
std::string unaryFnNames();

} // namespace mtc::bundle

#endif // MTC_LIB_BUNDLE_OPKIND_H
