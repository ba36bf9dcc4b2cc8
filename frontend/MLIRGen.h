//===- MLIRGen.h - CheckedModel to the mt dialect ---------------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_FRONTEND_MLIRGEN_H
#define MTC_FRONTEND_MLIRGEN_H

#include "frontend/Sema.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

namespace mtc {

/// Translates a checked model into a module holding one `mt.model`. Every op
/// carries the source position (`fileName:line:col`) it came from. The mt and
/// func dialects must be loaded in \p context. Returns null if the generated IR
/// fails to verify (which would be a compiler bug: Sema accepts only programs
/// the dialect accepts); the verifier's diagnostics go to the context's
/// handler.
mlir::OwningOpRef<mlir::ModuleOp> mlirGen(mlir::MLIRContext &context,
                                          const CheckedModel &model,
                                          llvm::StringRef fileName);

} // namespace mtc

#endif // MTC_FRONTEND_MLIRGEN_H
