//===- Validate.h - What the runtime may assume of a bundle -----*- C++ -*-===//
//
// Part of mtc. The reader (fromJson) checks a bundle's syntax; validate()
// checks its meaning, so that the runtime can run any bundle the reader
// accepts without crashing: every function is in SSA form over its value ids,
// every op is one the runtime knows, with the operand and result counts,
// attributes, dtypes and shapes its kernel relies on (the shape rules of
// lib/Support/Shape.h, the ones Sema and the mt dialect's verifiers use), and
// every parameter, layer and expert an op names exists. The ops are one
// table (OpSpec below) generated from the rows of lib/Bundle/Ops.def: arity,
// attributes with their types and defaults, the symbol an op names, where it
// may appear and its type rule.
//
// Errors name the function, the op (index, name, source location) and what is
// wrong, expected against got: "layer Block: function forward: op 7 'matmul'
// (tiny.mt:45:12): matmul inner dimensions differ: [B, S, 64] @ [32, 64]".
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_BUNDLE_VALIDATE_H
#define MTC_LIB_BUNDLE_VALIDATE_H

#include "lib/Bundle/Bundle.h"
#include "lib/Bundle/OpKind.h"

#include <optional>
#include <string>
#include <vector>

namespace mtc::bundle {

/// The type an op attribute must have (the alternatives of Attr). A Float
/// attribute may also be written as an integer.
enum class AttrType { Int, Float, Bool, String, IntList };

/// One attribute of an op: its name, type, whether it must be present and,
/// for one that need not be, the value it reads as when absent.
struct AttrSpec {
  const char *name;
  AttrType type;
  bool required;
  std::optional<Attr> dflt; ///< set exactly when !required
};

/// What an op's `symbol` names.
enum class SymbolKind {
  None,   ///< the op has no symbol
  Param,  ///< a parameter of the function's model, layer or expert
  Layer,  ///< a layer of the model
  Expert, ///< an expert of the function's layer
};

/// Where a function sits; it decides which ops it may hold and which
/// parameters `param_ref` and `param_grad` see.
enum class FunctionKind : unsigned {
  Model = 1,  ///< "forward", "forward_backward" of the model
  Layer = 2,  ///< a layer's "forward" or "backward"
  Expert = 4, ///< an expert's "forward" or "backward"
  Fused = 8,  ///< the body of a `fused` op
};

class OpChecker;

/// One entry of the op table: a row of Ops.def.
struct OpSpec {
  OpKind kind;
  const char *name;
  int minOperands, maxOperands; ///< maxOperands -1: any number
  int minResults, maxResults;   ///< maxResults -1: any number
  SymbolKind symbol;
  unsigned where; ///< FunctionKind bits of the functions it may appear in
  std::vector<AttrSpec> attrs;
  /// Checks dtypes, shapes and attribute values; arity, attribute types and
  /// the symbol are checked before it runs.
  void (*rule)(OpChecker &);

  /// The entry of attribute \p name, or null for one the op does not have.
  const AttrSpec *attr(const std::string &name) const;
};

/// The op table entry of \p name, or null for an op the runtime does not
/// know.
const OpSpec *findOp(const std::string &name);
/// The op table entry of \p kind.
const OpSpec &opSpec(OpKind kind);

/// Checks the attributes of \p op against \p spec (its op table entry): an
/// attribute the op does not have, one of the wrong type, a required one
/// missing. The error says which ("missing attribute 'eps' (a number)"); the
/// caller adds where the op is.
Status checkAttributes(const Op &op, const OpSpec &spec);

/// Checks everything the runtime relies on beyond the syntax fromJson reads
/// (see the file comment and docs/bundle.md, "Validation"). The error names
/// the first problem and where it is.
Status validate(const Bundle &b);

} // namespace mtc::bundle

#endif // MTC_LIB_BUNDLE_VALIDATE_H
