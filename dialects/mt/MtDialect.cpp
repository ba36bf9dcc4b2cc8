//===- MtDialect.cpp - mt dialect registration ------------------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "dialects/mt/MtDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mtc::mt;

#include "dialects/mt/MtDialect.cpp.inc"
#include "dialects/mt/MtEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/mt/MtAttrs.cpp.inc"

void MtDialect::initialize() {
  registerTypes();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/mt/MtAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/mt/MtOps.cpp.inc"
      >();
}
