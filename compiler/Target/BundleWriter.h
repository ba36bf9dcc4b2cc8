//===- BundleWriter.h - mt dialect to a runtime bundle ----------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_TARGET_BUNDLEWRITER_H
#define MTC_COMPILER_TARGET_BUNDLEWRITER_H

#include "lib/Bundle/Bundle.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mtc {

/// Flattens the (single) mt.model of \p module into a bundle: parameters,
/// layers with their functions, and the model's functions. Fails (with a
/// diagnostic at the offending op) on IR the runtime cannot execute.
mlir::LogicalResult translateToBundle(mlir::ModuleOp module,
                                      bundle::Bundle &out);

} // namespace mtc

#endif // MTC_COMPILER_TARGET_BUNDLEWRITER_H
