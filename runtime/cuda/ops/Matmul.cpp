//===- Matmul.cpp - Matrix products on the GPU ----------------------------===//
//
// Part of mtc. Each launcher is the runtime/cpu function of the same name
// (runtime/cpu/Gemm.cpp) with its cpu::gemm call turned into one GemmShape
// for the Launch's engine; the transposes are the CPU's, term by term.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/ops/Matmul.h"

#include "runtime/cuda/ops/Movement.h"

#include <climits>
#include <string>

namespace mtc::cuda::ops {

namespace {

ElemType elemType(DType t) {
  return t == DType::F32 ? ElemType::F32 : ElemType::BF16;
}

std::string dims(int64_t M, int64_t N, int64_t K) {
  return "M=" + std::to_string(M) + " N=" + std::to_string(N) +
         " K=" + std::to_string(K);
}

/// An error unless M, N, K are sizes the engines take (non-negative, below
/// 2^31: the emulated engine's BLAS has int dimensions).
Status checkDims(const char *op, int64_t M, int64_t N, int64_t K) {
  if (M < 0 || N < 0 || K < 0)
    return Status::error(std::string(op) + ": negative size (" + dims(M, N, K) +
                         ")");
  if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
    return Status::error(std::string(op) + ": " + dims(M, N, K) +
                         " exceed the GEMM's 32-bit dimensions");
  return Status::success();
}

/// One (batched) GEMM: C[b] = alpha op(A[b]) op(B[b]) + beta C[b]. K == 0
/// leaves beta * C: zeros (beta = 0), C itself (beta = 1), or a K = 1
/// product of zeros from scratch (any other beta; the engines take no
/// empty K).
Status product(const Launch &L, const char *op, bool transA, bool transB,
               int64_t M, int64_t N, int64_t K, int64_t batch, float alpha,
               DevPtr A, DevPtr B, float beta, DevPtr C, DType abType,
               DType cType) {
  if (Status s = checkDims(op, M, N, K); !s)
    return s;
  if (batch < 0)
    return Status::error(std::string(op) + ": negative batch " +
                         std::to_string(batch));
  if (M == 0 || N == 0 || batch == 0)
    return Status::success();
  if (!C || (K > 0 && (!A || !B)))
    return Status::error(std::string(op) + ": null operand (" + dims(M, N, K) +
                         ")");
  GemmShape shape;
  shape.transA = transA;
  shape.transB = transB;
  shape.m = M;
  shape.n = N;
  shape.k = K;
  shape.batch = batch;
  shape.strideA = M * K;
  shape.strideB = K * N;
  shape.strideC = M * N;
  GemmOperands ops;
  ops.a = reinterpret_cast<const void *>(A);
  ops.b = reinterpret_cast<const void *>(B);
  ops.c = reinterpret_cast<void *>(C);
  ops.aType = ops.bType = elemType(abType);
  ops.cType = elemType(cType);
  ops.alpha = alpha;
  ops.beta = beta;
  if (K == 0) {
    if (beta == 0.0f)
      return L.zero(C, batch * M * N * dtypeBytes(cType));
    if (beta == 1.0f)
      return Status::success();
    // C = 0 * 0 + beta * C through the engine: exact, as the CPU's scaling.
    const int64_t bytes = (M + N) * dtypeBytes(abType);
    Expected<DevPtr> zeros = L.scratch(bytes);
    if (!zeros)
      return Status::error(std::string(op) + ": " + zeros.message());
    if (Status s = L.zero(*zeros, bytes); !s)
      return s;
    shape.k = 1;
    shape.transA = shape.transB = false;
    shape.strideA = shape.strideB = 0;
    ops.a = reinterpret_cast<const void *>(*zeros);
    ops.b = reinterpret_cast<const void *>(*zeros + M * dtypeBytes(abType));
  }
  if (Status s = L.gemmOp(shape, ops); !s)
    return Status::error(std::string(op) + " (" + dims(M, N, K) +
                         "): " + s.message());
  return Status::success();
}

} // namespace

Status gemm(const Launch &L, bool transA, bool transB, int64_t M, int64_t N,
            int64_t K, float alpha, DevPtr A, DevPtr B, float beta, DevPtr C,
            DType abType, DType cType) {
  return product(L, "gemm", transA, transB, M, N, K, 1, alpha, A, B, beta, C,
                 abType, cType);
}

Status matmul(const Launch &L, DevPtr x, DevPtr w, DevPtr bias, DevPtr y,
              int64_t rows, int64_t K, int64_t N, DType dtype) {
  if (!bias)
    return product(L, "matmul", false, false, rows, N, K, 1, 1.0f, x, w, 0.0f,
                   y, dtype, dtype);
  if (Status s = checkDims("matmul", rows, N, K); !s)
    return s;
  // y = bias rows, then y += x @ w: cpu::matmul's order, one rounding.
  if (Status s = broadcastRows(L, bias, y, rows, N, dtype); !s)
    return Status::error("matmul: bias: " + s.message());
  return product(L, "matmul", false, false, rows, N, K, 1, 1.0f, x, w, 1.0f, y,
                 dtype, dtype);
}

Status batchedMatmul(const Launch &L, DevPtr x, DevPtr w, DevPtr y,
                     int64_t batch, int64_t M, int64_t K, int64_t N,
                     DType dtype) {
  return product(L, "batchedMatmul", false, false, M, N, K, batch, 1.0f, x, w,
                 0.0f, y, dtype, dtype);
}

Status matmulGradInput(const Launch &L, DevPtr dy, DevPtr w, DevPtr dx,
                       int64_t rows, int64_t K, int64_t N, DType dtype) {
  // dx[rows, K] = dy[rows, N] @ w[K, N]^T
  return product(L, "matmulGradInput", false, true, rows, K, N, 1, 1.0f, dy, w,
                 0.0f, dx, dtype, dtype);
}

Status matmulGradWeight(const Launch &L, DevPtr x, DevPtr dy, DevPtr dw,
                        int64_t rows, int64_t K, int64_t N, DType dtype,
                        DType dwType) {
  // dw[K, N] = x[rows, K]^T @ dy[rows, N]
  return product(L, "matmulGradWeight", true, false, K, N, rows, 1, 1.0f, x, dy,
                 0.0f, dw, dtype, dwType);
}

Status matmulGradWeightAcc(const Launch &L, DevPtr x, DevPtr dy, DevPtr dw,
                           int64_t rows, int64_t K, int64_t N, DType dtype,
                           DType dwType) {
  // dw[K, N] += x[rows, K]^T @ dy[rows, N]
  return product(L, "matmulGradWeightAcc", true, false, K, N, rows, 1, 1.0f, x,
                 dy, 1.0f, dw, dtype, dwType);
}

} // namespace mtc::cuda::ops
