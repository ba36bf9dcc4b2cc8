//===- StreamDialect.cpp - stream dialect registration ----------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "dialects/stream/StreamDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mtc::stream;

#include "dialects/stream/StreamDialect.cpp.inc"
#include "dialects/stream/StreamEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/stream/StreamAttrs.cpp.inc"

void StreamDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/stream/StreamAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/stream/StreamOps.cpp.inc"
      >();
}
