//===- CpuKernels.h - LLVM code for mt.fused regions ------------*- C++ -*-===//
//
// Part of mtc. Compiles every mt.fused region of a module into one function of
// an ELF shared object that the runtime loads with dlopen
// (runtime/exec/KernelLibrary.h). Each kernel has the C ABI
//
//   void mtc_fused_N(const float *const *inputs, float *const *outputs,
//                    int64_t n);
//
// where n is the number of elements of the region's iteration shape
// [R..., m] (with reductions: the shape they reduce). Input k is read at
// element i (full), 0 (scalar), i mod numel(input) (suffix) or i / m (row);
// an element result r is written to outputs[r][i], a row result (reductions
// over the last axis and the ops after them) to outputs[r][i / m]. Outputs
// must not overlap the inputs or each other. See docs/compiler.md, "CPU
// kernels".
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_TARGET_CPUKERNELS_H
#define MTC_COMPILER_TARGET_CPUKERNELS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mtc {

struct CpuKernelOptions {
  /// The CPU to generate code for. Empty: the host CPU with all of its
  /// features (llvm::sys::getHostCPUName/getHostCPUFeatures). Otherwise an
  /// LLVM CPU name with that CPU's default features: "x86-64" (SSE2, runs on
  /// every x86-64 machine), "x86-64-v3" (AVX2 + FMA), "znver3", ...
  std::string cpu;
  /// The linker; empty: ld.lld next to the LLVM tools this build was
  /// configured with, else ld.lld on PATH.
  std::string linker;
  /// If set, receives the optimised LLVM IR of all kernels (tests, debugging).
  std::string *llvmIR = nullptr;
  /// If set, receives the target assembly of all kernels.
  std::string *assembly = nullptr;
};

struct CpuKernelLibrary {
  /// The ELF shared object (bytes); empty when the module has no mt.fused.
  std::string sharedObject;
  /// The CPU the code was generated for (the host's name when options.cpu was
  /// empty).
  std::string cpu;
  /// Distinct kernels: structurally identical regions (same ops, attributes
  /// and input access) share one.
  unsigned numKernels = 0;
};

/// Names every mt.fused op of \p module (attribute `kernel` = "mtc_fused_N",
/// N from 0 in walk order of the distinct regions) and compiles the regions
/// into one shared object. After an error the module may carry partial
/// `kernel` attributes.
llvm::Expected<CpuKernelLibrary>
compileCpuKernels(mlir::ModuleOp module, const CpuKernelOptions &options);

/// The same for the host CPU, returning only the shared object's bytes.
llvm::Expected<std::string> compileCpuKernels(mlir::ModuleOp module);

} // namespace mtc

#endif // MTC_COMPILER_TARGET_CPUKERNELS_H
