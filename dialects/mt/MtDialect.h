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

#endif // MTC_DIALECTS_MT_MTDIALECT_H
