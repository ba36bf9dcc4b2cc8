//===- MtDialect.h - The mt dialect -----------------------------*- C++ -*-===//
//
// Part of mtc. Include this header to use the mt dialect: its types, attributes
// and operations (see MtOps.td for the documentation of each).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_DIALECTS_MT_MTDIALECT_H
#define MTC_DIALECTS_MT_MTDIALECT_H

#include "lib/Support/Shape.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/mt/MtDialect.h.inc"
#include "dialects/mt/MtEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/mt/MtAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/mt/MtTypes.h.inc"

namespace mtc::mt {
class LayerOp;
} // namespace mtc::mt

#define GET_OP_CLASSES
#include "dialects/mt/MtOps.h.inc"

namespace mtc::mt {

/// What an elementwise op computes with a function of UnaryFns.def: the
/// unary ops (f(x): neg ... square, gelu, softcap) and unary_grad
/// (dy * f'(x)).
struct UnaryFnCall {
  UnaryFn fn;
  /// softcap's cap, unary_grad's param; 0 otherwise.
  double param = 0;
  /// unary_grad: the derivative, of (input, grad).
  bool grad = false;
};

/// The function \p op computes, or nothing for an op that is no unary
/// function of UnaryFns.def. An op named after a function (mt.relu) computes
/// it; gelu is gelu_erf or gelu_tanh by its `approximate`.
std::optional<UnaryFnCall> getUnaryFnCall(mlir::Operation *op);

} // namespace mtc::mt

#endif // MTC_DIALECTS_MT_MTDIALECT_H
