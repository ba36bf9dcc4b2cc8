//===- SemaInternal.h - Private state of the .mt checker --------*- C++ -*-===//
//
// Part of mtc. Not a public interface: shared only by Sema.cpp (config, names,
// parameters, layers, counts), SemaExpr.cpp (forward bodies and expressions)
// and SemaOps*.cpp (operation calls, SemaOpCall.h). Everything else uses
// Sema.h.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_FRONTEND_SEMAINTERNAL_H
#define MTC_FRONTEND_SEMAINTERNAL_H

#include "frontend/AST.h"
#include "frontend/Sema.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace mtc::sema {

/// Largest static dimension or count accepted.
constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;
/// Integers are kept in doubles; beyond this they would lose precision.
constexpr int64_t kMaxExactInt = int64_t(1) << 53;
/// Cap on the operations of one forward after `repeat` unrolling.
constexpr size_t kMaxOps = 100000;
/// Cap on statements executed while unrolling `repeat` (empty bodies too).
constexpr size_t kMaxStmtExecutions = 1000000;

/// Forwards errors to the DiagnosticEngine, dropping exact duplicates (the
/// body of `repeat` is checked once per iteration).
class Reporter {
public:
  explicit Reporter(DiagnosticEngine &diags) : diags(diags) {}
  /// Reports an error; returns false when it was a duplicate.
  bool error(SourceLoc loc, const std::string &message);
  /// Attaches a note to the last error, unless that one was dropped.
  void note(SourceLoc loc, const std::string &message);
  unsigned count() const { return numErrors; }

private:
  DiagnosticEngine &diags;
  std::set<std::tuple<uint32_t, uint32_t, std::string>> seen;
  unsigned numErrors = 0;
  bool lastEmitted = false;
};

/// "3", "3.5", "1e-05".
std::string formatNumber(double v);
/// The source-like text of an expression ("dim / n_heads").
std::string exprText(const ast::Expr &e);
/// The candidate closest to \p name within edit distance 2, or "".
std::string closestName(const std::string &name,
                        const std::vector<std::string> &candidates);
/// "; did you mean 'x'?" or "".
std::string didYouMean(const std::string &name,
                       const std::vector<std::string> &candidates);
/// "1 value", "2 values".
std::string plural(size_t n, const char *word);
/// "[B, S, 256]", with the dtype appended unless it is f32 ("[B, S] i32").
std::string formatType(const ValueType &t);
/// f32 and bf16: the dtypes arithmetic accepts.
inline bool isFloat(DType t) { return t != DType::I32; }
/// "batch", "sequence", "expert token" for B, S, T; nullptr otherwise.
const char *reservedDimMeaning(const std::string &name);

/// Where a shape is written: decides which symbolic dims are legal.
enum class DimContext { Param, Model, Layer, Expert };

enum class ScopeKind { Model, Layer, Expert };

/// The result of checking an expression in a forward body.
struct Val {
  enum Kind { Poison, Tensor, Number };
  Kind kind = Poison;
  int id = -1;     ///< Tensor: value id
  ConfigValue num; ///< Number: a compile-time number
  static Val poison() { return {}; }
  static Val tensor(int id) {
    Val v;
    v.kind = Tensor;
    v.id = id;
    return v;
  }
  static Val number(ConfigValue c) {
    Val v;
    v.kind = Number;
    v.num = c;
    return v;
  }
};

/// One config entry as seen by later entries and by forward bodies.
struct ConfigSlot {
  SourceLoc loc;
  bool evaluated = false; ///< false until its entry has been reached
  bool ok = false;        ///< false: evaluation failed (uses stay silent)
  ConfigValue value;
};

/// Per-layer bookkeeping beyond the CheckedModel's Layer.
struct LayerInfo {
  const ast::LayerDecl *decl = nullptr;
  bool countOk = false;
  bool signatureOk = false;
  ValueType activation;
  std::map<std::string, size_t> params;  ///< name -> index in Layer::params
  std::map<std::string, size_t> experts; ///< name -> index in Layer::experts
  /// Per expert: parameter name -> index in Expert::params.
  std::vector<std::map<std::string, size_t>> expertParams;
  std::vector<bool> expertSignatureOk;
  std::vector<ValueType> expertInput;
  // Applications in the model forward.
  int64_t applied = 0;
  bool appliedAll = false;
  bool countsUnreliable = false;
};

/// The forward body being checked.
struct FnState {
  int serial = 0; ///< distinguishes forwards (diagnostic bookkeeping)
  Function *fn = nullptr;
  ScopeKind kind = ScopeKind::Model;
  int layer = -1;    ///< Layer and Expert scopes
  int expert = -1;   ///< Expert scope
  std::string what;  ///< "the model forward", "the forward of layer 'L'"
  std::string owner; ///< "the model forward", "layer 'L'", "expert 'E'"
  bool resultDeclOk = false; ///< the declared result shape is valid
  std::map<std::string, Val> locals;
  std::map<std::string, int> paramRefs;
  bool returned = false;
  bool aborted = false;
  size_t stmtExecutions = 0;
};

struct OpCall;

/// The checker: one instance per checkModel call.
class Checker {
public:
  Checker(const ast::Model &model, DiagnosticEngine &diags, CheckedModel &out)
      : model(model), rep(diags), out(out) {}
  bool run();

  // --- Sema.cpp ------------------------------------------------------------
  void checkConfig();
  void checkDeclarations();
  void checkParam(const ast::ParamDecl &decl, Param &out);
  void checkLayerHeaders();
  void checkFinalCounts();
  void checkTotals();

  /// Evaluates a compile-time number; reports and returns false on error
  /// (silently when it depends on a failed config entry).
  bool evalConst(const ast::Expr &e, ConfigValue &out);
  /// Folds `a OP b` (OP in + - * / % ^) with the integer rules of the
  /// language; reports at \p loc and returns false on error.
  bool foldBinary(char op, const ConfigValue &a, const ConfigValue &b,
                  SourceLoc loc, ConfigValue &out);
  /// Evaluates an integer; \p what names it in messages ("dimension").
  /// \p minValue is the smallest legal value (1: positive).
  bool evalInt(const ast::Expr &e, const char *what, int64_t minValue,
               int64_t maxValue, int64_t &out);
  /// One dimension of a written shape.
  bool evalDim(const ast::Expr &e, DimContext where, const std::string &owner,
               Dim &out);
  bool evalShape(const ast::ShapeDecl &s, DimContext where,
                 const std::string &owner, Shape &out);
  /// Names visible to a constant expression (for did-you-mean).
  std::vector<std::string> constCandidates() const;
  /// True if \p name is a model parameter, layer, expert, local or parameter
  /// of the current scope: a name that exists but is not a constant.
  bool isNonConstName(const std::string &name) const;

  // --- SemaExpr.cpp --------------------------------------------------------
  void checkLayerForward(size_t layerIdx);
  void checkExpertForward(size_t layerIdx, size_t expertIdx);
  void checkModelForward();

  bool checkSignature(const ast::ForwardDecl &f, DimContext where, FnState &st);
  void checkBody(const ast::ForwardDecl &f, FnState &st);
  void execStmts(const std::vector<ast::StmtPtr> &stmts, FnState &st,
                 bool inRepeat);
  void execAssign(const ast::Stmt &s, FnState &st);
  void execReturn(const ast::Stmt &s, FnState &st);
  void execRepeat(const ast::Stmt &s, FnState &st);

  Val evalExpr(const ast::Expr &e, FnState &st);
  Val evalName(const ast::Expr &e, FnState &st);
  Val evalUnary(const ast::Expr &e, FnState &st);
  Val evalBinary(const ast::Expr &e, FnState &st);
  Val evalCall(const ast::Expr &e, FnState &st);
  /// Checks one call of a DSL operation: binds the arguments to its
  /// DslOps.def signature, evaluates the tensors, then hands the call to the
  /// checker of its family.
  std::vector<Val> evalOp(const ast::Expr &e, FnState &st, size_t wanted);
  Val evalLayerApply(const ast::Expr &e, FnState &st, size_t layerIdx);
  bool isConstExpr(const ast::Expr &e, const FnState &st) const;

  // --- SemaOps*.cpp: one checker per family of DslOps.def ----------------
  std::vector<Val> checkLinearOp(OpCall &c);      ///< SemaOpsMath.cpp
  std::vector<Val> checkElementwiseOp(OpCall &c); ///< SemaOpsMath.cpp
  std::vector<Val> checkReductionOp(OpCall &c);   ///< SemaOpsMath.cpp
  std::vector<Val> checkNormOp(OpCall &c);        ///< SemaOpsMath.cpp
  std::vector<Val> checkLossOp(OpCall &c);        ///< SemaOpsMath.cpp
  std::vector<Val> checkShapeOp(OpCall &c);       ///< SemaOpsShape.cpp
  std::vector<Val> checkAttentionOp(OpCall &c);   ///< SemaOpsAttention.cpp
  std::vector<Val> checkMoeOp(OpCall &c);         ///< SemaOpsAttention.cpp

  /// Materialises a number as a Constant op; tensors pass through.
  Val toTensor(const Val &v, SourceLoc loc, FnState &st);
  int emit(FnState &st, OpKind kind, SourceLoc loc, std::vector<int> operands,
           std::vector<ValueType> results, std::string symbol = {},
           std::vector<std::pair<std::string, AttrValue>> attrs = {});
  const ValueType &typeOf(const FnState &st, int id) const {
    return st.fn->types[id];
  }
  /// The parameters visible in \p st.
  const std::vector<Param> *scopeParams(const FnState &st) const;
  const std::map<std::string, size_t> *scopeParamIndex(const FnState &st) const;

  // --- State ---------------------------------------------------------------
  const ast::Model &model;
  Reporter rep;
  CheckedModel &out;
  std::map<std::string, ConfigSlot> config;
  std::map<std::string, size_t> modelParams; ///< name -> index in out.params
  std::map<std::string, size_t> layerIndex;  ///< name -> index in out.layers
  std::vector<LayerInfo> layers;             ///< parallel to out.layers
  /// Duplicated declarations (by address) that are skipped after reporting.
  std::set<const void *> skipped;
  /// The forward being checked, or null (config, parameter shapes).
  FnState *current = nullptr;
  /// Unknown names already reported, per forward (null: outside forwards):
  /// a missing definition is reported at its first use only.
  std::set<std::pair<int, std::string>> unknownReported;
  /// Serial numbers of FnState (0: no forward).
  int numForwards = 0;
  bool modelForwardOk = false;
};

} // namespace mtc::sema

#endif // MTC_FRONTEND_SEMAINTERNAL_H
