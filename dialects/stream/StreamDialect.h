//===- StreamDialect.h - The stream dialect ---------------------*- C++ -*-===//
//
// Part of mtc. Include this header to use the stream dialect (see
// StreamOps.td for the documentation of each op).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_DIALECTS_STREAM_STREAMDIALECT_H
#define MTC_DIALECTS_STREAM_STREAMDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"

#include "dialects/stream/StreamDialect.h.inc"
#include "dialects/stream/StreamEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/stream/StreamAttrs.h.inc"

namespace mtc::stream {
class StepOp;
class LayersOp;
} // namespace mtc::stream

#define GET_OP_CLASSES
#include "dialects/stream/StreamOps.h.inc"

#endif // MTC_DIALECTS_STREAM_STREAMDIALECT_H
