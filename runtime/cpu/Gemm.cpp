//===- Gemm.cpp - Dense algebra on OpenBLAS sgemm -------------------------===//
//
// Part of mtc.
//
// Every kernel here is row-major cblas_sgemm underneath. OpenBLAS itself runs
// single-threaded: gemm splits a large product into threads() blocks of rows
// (or columns) of C and runs them on parallelFor's pool (Parallel.cpp), so
// that GEMMs and the other kernels share one set of threads. (OpenBLAS's own
// pthread pool spins in sched_yield between calls and fought our pool for the
// cores: ~20 % of the samples at 2 threads, docs/benchmarks.md.) Called from
// inside a parallelFor body, the blocks run inline.
//
// Numerics: fp32 accumulation as OpenBLAS does it. K is never split, and the
// blocks depend only on the shape and the thread count, so results are
// reproducible for a given thread count. K == 0 is handled here (C = beta * C)
// rather than relying on the BLAS for that corner.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cblas.h>
#include <cstring>

namespace mtc::cpu {

namespace {

/// One single-threaded sgemm on a block: C[M, N] (leading dimension ldc).
void sgemmBlock(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                float alpha, const float *A, int64_t lda, const float *B,
                int64_t ldb, float beta, float *C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, A,
              static_cast<int>(lda), B, static_cast<int>(ldb), beta, C,
              static_cast<int>(ldc));
}

/// Products smaller than this many multiply-adds run on the calling thread.
constexpr int64_t kSplitMinFlops = 1 << 20;
/// Block boundaries are multiples of this (OpenBLAS's sgemm micro-kernels
/// are 16 rows / columns wide on AVX-512, so only the last block has edges).
constexpr int64_t kSplitAlign = 16;

} // namespace

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, const float *B, float beta, float *C) {
  if (M <= 0 || N <= 0)
    return;
  int t = threads(); // also makes sure OpenBLAS's thread count was set
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
  // OpenBLAS runs single-threaded (Parallel.cpp); large products are split
  // into `t` blocks of C rows (or columns, when C is wide) over our own pool,
  // so that one set of threads serves GEMMs and the other kernels. Every
  // element of C is computed by one sgemm call over the full K, and the
  // blocks depend only on the shape and t: reproducible for a thread count.
  bool splitRows = M >= N;
  int64_t extent = splitRows ? M : N;
  int64_t blocks = std::min<int64_t>(t, extent / kSplitAlign);
  if (blocks <= 1 || M * N * K < kSplitMinFlops) {
    sgemmBlock(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
    return;
  }
  int64_t units = (extent + kSplitAlign - 1) / kSplitAlign;
  parallelFor(blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      int64_t lo = std::min(extent, units * b / blocks * kSplitAlign);
      int64_t hi = std::min(extent, units * (b + 1) / blocks * kSplitAlign);
      if (lo >= hi)
        continue;
      if (splitRows) {
        // Rows [lo, hi) of op(A) and of C.
        const float *a = transA ? A + lo : A + lo * lda;
        sgemmBlock(transA, transB, hi - lo, N, K, alpha, a, lda, B, ldb, beta,
                   C + lo * N, N);
      } else {
        // Columns [lo, hi) of op(B) and of C.
        const float *b = transB ? B + lo * ldb : B + lo;
        sgemmBlock(transA, transB, M, hi - lo, K, alpha, A, lda, b, ldb, beta,
                   C + lo, N);
      }
    }
  });
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

void matmulGradWeight(const float *x, const float *dy, float *dw, int64_t rows,
                      int64_t K, int64_t N) {
  // dw[K, N] = x[rows, K]^T @ dy[rows, N]
  gemm(true, false, K, N, rows, 1.0f, x, dy, 0.0f, dw);
}

void matmulGradWeightAcc(const float *x, const float *dy, float *dw,
                         int64_t rows, int64_t K, int64_t N) {
  // dw[K, N] += x[rows, K]^T @ dy[rows, N]
  gemm(true, false, K, N, rows, 1.0f, x, dy, 1.0f, dw);
}

} // namespace mtc::cpu
