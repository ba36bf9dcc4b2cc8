//===- CudaEmit.h - mtc compile --emit=cuda|ptx|kernel-stats ----*- C++ -*-===//
//
// Part of mtc. What `mtc compile MODEL --target cuda` prints besides a bundle:
// the CUDA C of every kernel the model runs on the CUDA backend (the library
// kernels of runtime/cuda/kernels, then the model's fused regions), their
// PTX through NVRTC for one architecture, or ptxas' statistics per kernel.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TOOLS_MTC_CUDAEMIT_H
#define MTC_TOOLS_MTC_CUDAEMIT_H

#include "lib/Bundle/Bundle.h"
#include "lib/Support/Status.h"

#include <ostream>
#include <string>

namespace mtc {

/// Writes what \p emit ("cuda", "ptx" or "kernel-stats") asks for of \p b to
/// \p os, compiling for \p arch ("sm_90") where NVRTC is needed. Errors:
/// NVRTC or the toolkit's headers not found, a kernel that does not compile
/// (with NVRTC's log).
Status emitCuda(const bundle::Bundle &b, const std::string &emit,
                const std::string &arch, std::ostream &os);

} // namespace mtc

#endif // MTC_TOOLS_MTC_CUDAEMIT_H
