//===- Gemm.h - Matrix products on the GPU ----------------------*- C++ -*-===//
//
// Part of mtc. The CUDA backend's GEMMs, row-major as the rest of mtc:
//
//   C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b],  b < batch
//
// op(X) is X or its transpose; A, B are f32 or bf16, C f32 or bf16; the
// product accumulates in fp32 (f32 inputs: full fp32, no TF32, for parity
// runs; bf16 inputs: tensor cores). A GemmEngine runs them in stream order:
// cuBLASLt opened with dlopen (libcublasLt.so.13 / .12, or $MTC_CUBLASLT),
// or, under `--device cuda-emu`, the CPU GEMM of runtime/cpu in stream order
// on the emulated driver (runtime/cuda/emu/EmulatedGemm.h).
//
// Thread safety: one engine per device; gemm() from one host thread at a time.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_GEMM_H
#define MTC_RUNTIME_CUDA_GEMM_H

#include "lib/Support/Status.h"
#include "runtime/cuda/CudaDriver.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mtc::cuda {

enum class ElemType { F32, BF16 };

/// One (batched) GEMM; dimensions of op(A): [m, k], op(B): [k, n], C: [m, n],
/// all row-major and dense (leading dimension = row length); batch strides
/// in elements (0: the operand is shared by every batch).
struct GemmShape {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
};

struct GemmOperands {
  const void *a = nullptr, *b = nullptr; ///< device pointers
  void *c = nullptr;
  ElemType aType = ElemType::F32, bType = ElemType::F32, cType = ElemType::F32;
  float alpha = 1, beta = 0;
};

class GemmEngine {
public:
  virtual ~GemmEngine() = default;
  /// "cuBLASLt 130001", "cpu (emulated)".
  virtual std::string name() const = 0;
  /// Queues the product on \p stream (a CUstream of the engine's driver);
  /// \p workspace / \p workspaceBytes: device scratch the engine may use.
  virtual Status gemm(const GemmShape &shape, const GemmOperands &ops,
                      void *stream, void *workspace, size_t workspaceBytes) = 0;
};

/// The semi-opaque cuBLASLt structs the table passes (cublasLt.h: 64 and 96
/// bytes; SignatureCheck.cpp checks the sizes).
struct CublasLtAlgo {
  uint64_t data[8];
};
struct CublasLtHeuristicResult {
  CublasLtAlgo algo;
  size_t workspaceSize;
  int state;
  float wavesCount;
  int reserved[4];
};

/// cuBLASLt through dlopen; errors name the library and cuBLASLt's status
/// ("cuBLASLt: cublasLtCreate: CUBLAS_STATUS_NOT_INITIALIZED ...").
Expected<std::unique_ptr<GemmEngine>> openCublasLt();

/// Checks \p shape and \p ops (positive sizes, non-null pointers, strides
/// covering a matrix); the message names what is wrong.
Status checkGemm(const GemmShape &shape, const GemmOperands &ops);

} // namespace mtc::cuda

#endif // MTC_RUNTIME_CUDA_GEMM_H
