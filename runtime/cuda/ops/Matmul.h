//===- Matmul.h - Matrix products on the GPU --------------------*- C++ -*-===//
//
// Part of mtc. The launchers of runtime/cpu's dense algebra (cpu::gemm,
// matmul, batchedMatmul, matmulGradInput, matmulGradWeight,
// matmulGradWeightAcc in runtime/cpu/Kernels.h) with device pointers: each
// is one GEMM of the Launch's engine (runtime/cuda/Gemm.h: cuBLASLt, or the
// CPU GEMM under the emulated driver), row-major as the CPU, queued on
// L.stream; none synchronises.
//
// Precision: the products accumulate in fp32; f32 storage is full fp32 (no
// TF32), bf16 storage runs on tensor cores. `dtype` is the storage of every
// tensor of a call, except the weight gradients' dw (`dwType`: bf16
// activations may accumulate into an f32 gradient).
//
// Bias (matmul): y is first filled with the bias row (movement.cu's
// broadcast_rows, one write of y), then the GEMM adds x @ w with beta = 1,
// as cpu::matmul does: one rounding of the sum, also under bf16 storage,
// and no extra pass over y after the product.
//
// Empty products: M or N == 0 queue nothing; K == 0 leaves beta * C
// (zeros for beta = 0, the bias alone for matmul), as runtime/cpu.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_MATMUL_H
#define MTC_RUNTIME_CUDA_OPS_MATMUL_H

#include "runtime/cuda/ops/Launch.h"

#include <cstdint>

namespace mtc::cuda::ops {

/// C[M, N] = alpha * op(A) * op(B) + beta * C, row-major; op(X) = X or X^T
/// (cpu::gemm). A and B of \p abType, C of \p cType. Errors: negative
/// sizes, sizes beyond the engine's 32-bit dimensions, a null pointer for a
/// non-empty operand.
Status gemm(const Launch &L, bool transA, bool transB, int64_t M, int64_t N,
            int64_t K, float alpha, DevPtr A, DevPtr B, float beta, DevPtr C,
            DType abType = DType::F32, DType cType = DType::F32);

/// y[rows, N] = x[rows, K] @ w[K, N] (+ bias[N] if non-zero).
Status matmul(const Launch &L, DevPtr x, DevPtr w, DevPtr bias, DevPtr y,
              int64_t rows, int64_t K, int64_t N, DType dtype = DType::F32);

/// y[b] = x[b] @ w[b] for b in [0, batch); x [M, K], w [K, N], y [M, N]
/// each, dense: one strided batched GEMM.
Status batchedMatmul(const Launch &L, DevPtr x, DevPtr w, DevPtr y,
                     int64_t batch, int64_t M, int64_t K, int64_t N,
                     DType dtype = DType::F32);

/// dx[rows, K] = dy[rows, N] @ w[K, N]^T.
Status matmulGradInput(const Launch &L, DevPtr dy, DevPtr w, DevPtr dx,
                       int64_t rows, int64_t K, int64_t N,
                       DType dtype = DType::F32);

/// dw[K, N] = x[rows, K]^T @ dy[rows, N] (overwrites). x, dy of \p dtype,
/// dw of \p dwType.
Status matmulGradWeight(const Launch &L, DevPtr x, DevPtr dy, DevPtr dw,
                        int64_t rows, int64_t K, int64_t N,
                        DType dtype = DType::F32, DType dwType = DType::F32);

/// dw[K, N] += x[rows, K]^T @ dy[rows, N] (the GEMM with beta = 1: weights
/// used several times sum up).
Status matmulGradWeightAcc(const Launch &L, DevPtr x, DevPtr dy, DevPtr dw,
                           int64_t rows, int64_t K, int64_t N,
                           DType dtype = DType::F32, DType dwType = DType::F32);

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_MATMUL_H
