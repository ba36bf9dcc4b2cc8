//===- EmulatedGemm.h - GEMMs of the cuda-emu device ------------*- C++ -*-===//
//
// Part of mtc. The GemmEngine (runtime/cuda/Gemm.h) of `--device cuda-emu`:
// each product runs runtime/cpu's GEMM in stream order, as a host function
// of the emulated driver (where device memory is host memory). bf16
// operands are widened to fp32 first and a bf16 result rounded to nearest
// even, so the products accumulate in fp32 as on the GPU (in another
// order: results agree within rounding, not bit for bit, with cuBLASLt).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_EMU_EMULATEDGEMM_H
#define MTC_RUNTIME_CUDA_EMU_EMULATEDGEMM_H

#include "runtime/cuda/Gemm.h"

#include <memory>

namespace mtc::emu {

/// A GEMM engine queuing its products on streams of \p driver, which must
/// be the emulated driver (emulatedCudaDriver()).
std::unique_ptr<cuda::GemmEngine>
emulatedGemm(std::shared_ptr<const cuda::CudaDriverApi> driver);

} // namespace mtc::emu

#endif // MTC_RUNTIME_CUDA_EMU_EMULATEDGEMM_H
