//===- StreamDialect.cpp - stream dialect registration ----------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "dialects/stream/StreamDialect.h"

using namespace mlir;
using namespace mtc::stream;

#include "dialects/stream/StreamDialect.cpp.inc"

void StreamDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/stream/StreamOps.cpp.inc"
      >();
}
