//===- RuntimeCompile.h - CUDA C compiled for the emulator at run time -*- C++
//-*-===//
//
// Part of mtc. Kernels that exist only at run time -- the CUDA C of a bundle's
// fused regions (docs/cuda-kernels.md, "Fused regions as CUDA C") -- reach the
// emulated driver as text. compileAndRegister() does at run time what
// mtc_cuda_emu_kernels does at build time: it writes the text and the
// library headers (runtime/cuda/kernels/*.cuh) to a private temporary
// directory, wraps it (Wrap.h), compiles the wrapper as a shared object with
// the host C++ compiler and dlopens it; the object's static registrations
// put its entry points in the KernelRegistry under the module name.
//
// The compiler is $MTC_CUDA_EMU_CXX, else the C++ compiler mtc was built
// with; the emulator's headers are found under $MTC_CUDA_EMU_SOURCE (a
// checkout of mtc), else the source tree mtc was built from. The object
// resolves the emulator's entry points (mtc::emu) against the running
// program, which exports them (runtime/cuda/emu/CMakeLists.txt).
//
// Thread safety: calls are serialised; a module is compiled once per
// process.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_EMU_RUNTIMECOMPILE_H
#define MTC_RUNTIME_CUDA_EMU_RUNTIMECOMPILE_H

#include "lib/Support/Status.h"

#include <string>

namespace mtc::emu {

/// Compiles CUDA C \p text for the emulator and registers its entry points as
/// module \p module (a file name: "fused-0123abcd.cu"). Nothing happens when
/// the module is registered already. Errors: no compiler or emulator headers
/// (naming the paths tried and the variables that set them), a compile
/// error (with the compiler's output), a shared object that does not load.
Status compileAndRegister(const std::string &module, const std::string &text);

} // namespace mtc::emu

#endif // MTC_RUNTIME_CUDA_EMU_RUNTIMECOMPILE_H
