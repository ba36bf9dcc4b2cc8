//===- Gemm.cpp - Dense algebra on OpenBLAS sgemm -------------------------===//
//
// Part of mtc.
//
// Every kernel here is one (or, for batchedMatmul, `batch`) row-major
// cblas_sgemm call; OpenBLAS does its own threading, with its thread count set
// by setThreads (Parallel.cpp). These kernels must be called from the top
// level, not from inside a parallelFor body.
//
// Numerics: fp32 accumulation as OpenBLAS does it (K is not split across
// threads by OpenBLAS's sgemm drivers, so results are reproducible for a given
// thread count). K == 0 is handled here (C = beta * C) rather than relying on
// the BLAS for that corner.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <cblas.h>
#include <cstring>

namespace mtc::cpu {

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, const float *B, float beta, float *C) {
  if (M <= 0 || N <= 0)
    return;
  (void)threads(); // makes sure OpenBLAS's thread count was set
  if (K <= 0 || alpha == 0.0f) {
    if (beta == 0.0f)
      std::memset(C, 0, sizeof(float) * M * N);
    else if (beta != 1.0f)
      for (int64_t i = 0; i < M * N; ++i)
        C[i] *= beta;
    return;
  }
  const int64_t lda = transA ? M : K;
  const int64_t ldb = transB ? K : N;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, A,
              static_cast<int>(lda), B, static_cast<int>(ldb), beta, C,
              static_cast<int>(N));
}

void matmul(const float *x, const float *w, const float *bias, float *y,
            int64_t rows, int64_t K, int64_t N) {
  if (bias) {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(y + r * N, bias, sizeof(float) * N);
    gemm(false, false, rows, N, K, 1.0f, x, w, 1.0f, y);
  } else {
    gemm(false, false, rows, N, K, 1.0f, x, w, 0.0f, y);
  }
}

void batchedMatmul(const float *x, const float *w, float *y, int64_t batch,
                   int64_t M, int64_t K, int64_t N) {
  for (int64_t b = 0; b < batch; ++b)
    gemm(false, false, M, N, K, 1.0f, x + b * M * K, w + b * K * N, 0.0f,
         y + b * M * N);
}

void matmulGradInput(const float *dy, const float *w, float *dx, int64_t rows,
                     int64_t K, int64_t N) {
  // dx[rows, K] = dy[rows, N] @ w[K, N]^T
  gemm(false, true, rows, K, N, 1.0f, dy, w, 0.0f, dx);
}

void matmulGradWeightAcc(const float *x, const float *dy, float *dw,
                         int64_t rows, int64_t K, int64_t N) {
  // dw[K, N] += x[rows, K]^T @ dy[rows, N]
  gemm(true, false, K, N, rows, 1.0f, x, dy, 1.0f, dw);
}

} // namespace mtc::cpu
