//===- SemaOpCall.h - One call of a .mt operation being checked -*- C++ -*-===//
//
// Part of mtc. Not a public interface: shared by SemaOps.cpp (the op table
// generated from DslOps.def, argument binding, the family dispatch) and the
// family checkers SemaOpsMath.cpp, SemaOpsShape.cpp and SemaOpsAttention.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_FRONTEND_SEMAOPCALL_H
#define MTC_FRONTEND_SEMAOPCALL_H

#include "frontend/SemaInternal.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mtc::sema {

/// How an operation argument is given and checked.
enum class ArgKind {
  Tensor,    ///< a tensor expression (a number becomes a Constant op)
  OptTensor, ///< an optional tensor (matmul bias, layernorm b)
  Number,    ///< a compile-time number
  Int,       ///< a compile-time integer
  Bool,      ///< true / false
  String,    ///< "tanh"
  IntList,   ///< [64, 64]
  DimList,   ///< [B, S, n_heads, head_dim]
  Expert,    ///< the name of an expert of the current layer
  Scaling,   ///< llama3(factor, low_freq_factor, high_freq_factor, max_pos)
};

/// How an operation appears in the language (the Form column of DslOps.def).
enum class OpForm {
  Call,     ///< name(args)
  Variadic, ///< name(x, ...) then the named args
  Internal, ///< made by Sema itself, not callable
};

struct ArgSpec {
  const char *name;
  ArgKind kind;
  bool required;
};

/// One line of DslOps.def.
struct OpSpec {
  const char *name;
  OpKind kind;
  OpFamily family;
  OpForm form;
  std::vector<ArgSpec> args;
};

/// The op table: every line of DslOps.def, indexed by OpKind.
const std::vector<OpSpec> &opTable();
/// The spec of \p kind.
inline const OpSpec &opSpec(OpKind kind) {
  return opTable()[static_cast<size_t>(kind)];
}

/// One call `name(args)` being checked: its arguments bound to the signature,
/// the tensor arguments already evaluated, and the helpers a family checker
/// reads the compile-time arguments with. Every helper reports its own error
/// and clears `ok`; checkers report everything they can before giving up.
struct OpCall {
  OpCall(Checker &ck, const ast::Expr &e, FnState &st, const OpSpec &spec,
         size_t wanted)
      : ck(ck), e(e), st(st), spec(spec), kind(spec.kind), wanted(wanted),
        opName("'" + std::string(spec.name) + "'"),
        bound(spec.args.size(), nullptr), boundLoc(spec.args.size(), e.loc),
        ids(spec.args.size(), -1) {}

  Checker &ck;
  const ast::Expr &e;
  FnState &st;
  const OpSpec &spec;
  OpKind kind;
  /// Names on the left of `=` (0: the call is an operand).
  size_t wanted;
  /// "'rmsnorm'", as messages quote it.
  std::string opName;
  /// Per argument of the signature: its expression, or null when absent.
  std::vector<const ast::Expr *> bound;
  std::vector<SourceLoc> boundLoc;
  /// Per argument: the value id of a tensor argument, or -1.
  std::vector<int> ids;
  /// Variadic operations: the value ids of the positional tensors.
  std::vector<int> inputs;
  bool ok = true;

  /// "argument 'eps' of 'rmsnorm'".
  std::string argName(size_t i) const;
  /// A number (\p dflt when absent); false when given but not a valid number.
  bool number(size_t i, double dflt, double &v);
  /// An integer in [minValue, 2^53] (\p dflt when absent).
  void integer(size_t i, int64_t dflt, int64_t minValue, int64_t &v);
  void boolean(size_t i, bool dflt, bool &v);
  void string(size_t i, const char *dflt, std::string &v);
  /// A list of integers in [minValue, kMaxDim], appended to \p v.
  void intList(size_t i, int64_t minValue, std::vector<int64_t> &v);
  /// Reports a given number that is negative (or zero unless \p allowZero).
  void positive(size_t i, double v, bool allowZero);
  /// Reports an i32 tensor; true for f32/bf16 and for an absent one (-1).
  bool requireFloat(int id);
  /// "shape mismatch in 'op': <err>".
  void shapeError(const std::string &err);
  /// The type of value \p id (a copy: emitting grows the type list).
  ValueType type(int id) const { return ck.typeOf(st, id); }
  /// Where dims written in this call are legal.
  DimContext dimContext() const;

  /// Poison for every wanted result.
  std::vector<Val> failed() const;
  /// \p id as the first result, poison for the rest.
  std::vector<Val> one(int id) const;
  /// Emits the operation; returns the id of its first result.
  int emit(std::vector<int> operands, std::vector<ValueType> results,
           std::string symbol = {},
           std::vector<std::pair<std::string, AttrValue>> attrs = {});
  /// Reports an operation its family has no rule for (a DslOps.def line
  /// whose checker case is missing); never reached for a consistent table.
  std::vector<Val> unhandled();
};

} // namespace mtc::sema

#endif // MTC_FRONTEND_SEMAOPCALL_H
