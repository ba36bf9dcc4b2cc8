//===- Sema.h - Checked, resolved form of a .mt model -----------*- C++ -*-===//
//
// Part of mtc. Sema evaluates the config block, resolves every name, infers and
// verifies every shape (with the rules of lib/Support/Shape.h) and flattens
// each forward body into a list of typed operations in SSA form. MLIRGen
// translates a CheckedModel one operation at a time into the mt dialect; the
// summary printer and the parameter counts read it directly.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_FRONTEND_SEMA_H
#define MTC_FRONTEND_SEMA_H

#include "frontend/AST.h"
#include "lib/Support/Diagnostics.h"
#include "lib/Support/Shape.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mtc {

/// An evaluated config value.
struct ConfigValue {
  double value = 0;
  bool isInt = false;
};

/// A compile-time attribute of an operation.
using AttrValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

/// The families of operations (DslOps.def): each family's calls are checked
/// by one group of rules.
enum class OpFamily {
#define MTC_DSL_FAMILY(Family) Family,
#include "frontend/DslOps.def"
};

/// The operations of a checked forward body, one per line of DslOps.def, in
/// its order. Each maps to one mt dialect op (see dialects/mt/MtOps.td); the
/// operands and the attribute names MLIRGen reads are listed in DslOps.def.
enum class OpKind {
#define MTC_DSL_OP(Kind, Name, Family, Form, Args) Kind,
#include "frontend/DslOps.def"
};

/// The number of operations (lines of DslOps.def).
constexpr size_t kNumDslOps = 0
#define MTC_DSL_OP(Kind, Name, Family, Form, Args) +1
#include "frontend/DslOps.def"
    ;

/// The language's name for \p kind ("matmul", "rmsnorm", ...).
const char *opKindName(OpKind kind);
/// The operation called \p name (internal ones included), if any.
std::optional<OpKind> opKindByName(const std::string &name);
/// The family whose rules check \p kind.
OpFamily opFamily(OpKind kind);
/// The family's name in DslOps.def ("Elementwise").
const char *opFamilyName(OpFamily family);
/// True when the language calls \p kind by name (`rmsnorm(x, w, eps)`);
/// false for operations Sema makes itself (constants, infix operators, ...).
bool isCallableOp(OpKind kind);
/// The call signature of \p kind as messages show it: "(x, w, eps[, offset])",
/// "(x, ...[, axis])"; "" when it is not callable.
std::string opSignature(OpKind kind);

struct ValueType {
  Shape shape;
  DType dtype = DType::F32;
};

struct Operation {
  OpKind kind;
  SourceLoc loc;
  std::vector<int> operands; ///< value ids
  std::vector<int> results;  ///< value ids
  std::string symbol;        ///< ParamRef, Moe, ApplyLayers
  std::vector<std::pair<std::string, AttrValue>> attrs;

  /// The attribute called \p name, or nullptr.
  const AttrValue *attr(const std::string &name) const;
};

/// A forward body in SSA form. Values 0..args.size()-1 are the arguments; every
/// operation result gets the next id. `types[id]` is the type of value id.
struct Function {
  std::vector<std::string> argNames;
  std::vector<ValueType> types;
  size_t numArgs = 0;
  std::vector<Operation> ops;
  int result = -1;
  ValueType resultType;
};

/// A parameter. Its shape is static; for layer and expert parameters it is the
/// shape of one instance (one layer, one expert).
struct Param {
  std::string name;
  SourceLoc loc;
  Shape shape;
  DType dtype = DType::F32;
  ast::InitKind init = ast::InitKind::Zeros;
  double initA = 0, initB = 0; ///< normal/scaled_normal: std; uniform: lo, hi
  int64_t numel() const;
};

struct Expert {
  std::string name;
  SourceLoc loc;
  int64_t count = 0; ///< number of experts
  std::vector<Param> params;
  Function forward;
  int64_t paramsPerExpert() const;
};

struct Layer {
  std::string name;
  SourceLoc loc;
  int64_t count = 0; ///< number of instances
  std::vector<Param> params;
  std::vector<Expert> experts;
  Function forward;
  /// Parameters of one instance, experts included.
  int64_t paramsPerInstance() const;
};

struct CheckedModel {
  std::string name;
  std::vector<std::pair<std::string, ConfigValue>> config;
  std::vector<Param> params; ///< model-level
  std::vector<Layer> layers;
  Function forward;
  /// Sum over layers of their instance counts.
  int64_t totalLayerInstances() const;
  /// Every parameter of the model, all instances counted.
  int64_t totalParams() const;
};

/// Checks \p model, reporting every error to \p diags. Returns true (and fills
/// \p out) when there were none.
bool checkModel(const ast::Model &model, DiagnosticEngine &diags,
                CheckedModel &out);

} // namespace mtc

#endif // MTC_FRONTEND_SEMA_H
