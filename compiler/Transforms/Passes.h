//===- Passes.h - mtc passes ------------------------------------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_TRANSFORMS_PASSES_H
#define MTC_COMPILER_TRANSFORMS_PASSES_H

#include "compiler/Transforms/Policies.h"
#include "dialects/mt/MtDialect.h"
#include "dialects/stream/StreamDialect.h"

#include "mlir/Pass/Pass.h"

namespace mtc {

#define GEN_PASS_DECL
#include "compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/Passes.h.inc"

} // namespace mtc

#endif // MTC_COMPILER_TRANSFORMS_PASSES_H
