//===- sgemm.cu - Tiled single-precision GEMM (CUDA C) --------------------===//
//
// Part of mtc. A demonstration kernel of the CUDA emulator
// (docs/cuda-emulator.md), compiled by NVRTC and run on the CPU by
// test/cuda-emu/KernelsTest.cpp.
//
// C[M, N] = alpha * A[M, K] @ B[K, N] + beta * C, row-major f32 (C is not
// read when beta == 0). A block of 256 threads computes a 64 x 64 tile of C,
// each thread a 4 x 4 micro-tile, walking K in steps of 16 through shared
// memory tiles of A and B. Ragged edges: tile elements outside A or B are
// zeros, results outside C are not stored. Launch: grid
// (ceil(N / 64), ceil(M / 64)), block 256.
//
// The tile loads show the MTC_CUDA_PORTABLE convention: on the GPU they are
// cp.async copies (global -> shared without registers, zero-filled when out
// of range: src-size 0); the portable path -- which the emulator runs, and
// which NVRTC also compiles with -DMTC_CUDA_PORTABLE -- loads through
// registers. Both fill the same tiles.
//
//===----------------------------------------------------------------------===//

namespace {

constexpr int kBM = 64, kBN = 64, kBK = 16; // block tile
constexpr int kTM = 4, kTN = 4;             // thread micro-tile
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);

/// dst = inRange ? *src : 0 (src must be a valid address either way).
__device__ __forceinline__ void copyOrZero(float *dst, const float *src,
                                           bool inRange) {
#ifndef MTC_CUDA_PORTABLE
  const unsigned shared = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared),
               "l"(src), "r"(inRange ? 4 : 0));
#else
  *dst = inRange ? *src : 0.0f;
#endif
}

/// Waits for this thread's copyOrZero calls (a __syncthreads must follow
/// before other threads read the tiles).
__device__ __forceinline__ void waitCopies() {
#ifndef MTC_CUDA_PORTABLE
  asm volatile("cp.async.wait_all;\n" ::);
#endif
}

} // namespace

extern "C" __global__ void __launch_bounds__(kThreads)
    sgemm_f32(int M, int N, int K, float alpha, const float *__restrict__ A,
              const float *__restrict__ B, float beta, float *__restrict__ C) {
  __shared__ float As[kBK][kBM]; // As[k][m] = A[m0 + m, k0 + k]
  __shared__ float Bs[kBK][kBN]; // Bs[k][n] = B[k0 + k, n0 + n]
  const int tid = threadIdx.x;
  const int tx = tid % (kBN / kTN), ty = tid / (kBN / kTN);
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;

  float acc[kTM][kTN];
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j)
      acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += kBK) {
    for (int e = tid; e < kBM * kBK; e += kThreads) {
      const int m = e / kBK, k = e % kBK;
      const bool in = m0 + m < M && k0 + k < K;
      copyOrZero(&As[k][m],
                 in ? A + static_cast<size_t>(m0 + m) * K + k0 + k : A, in);
    }
    for (int e = tid; e < kBK * kBN; e += kThreads) {
      const int k = e / kBN, n = e % kBN;
      const bool in = k0 + k < K && n0 + n < N;
      copyOrZero(&Bs[k][n],
                 in ? B + static_cast<size_t>(k0 + k) * N + n0 + n : B, in);
    }
    waitCopies();
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
      float a[kTM], b[kTN];
#pragma unroll
      for (int i = 0; i < kTM; ++i)
        a[i] = As[k][ty * kTM + i];
#pragma unroll
      for (int j = 0; j < kTN; ++j)
        b[j] = Bs[k][tx * kTN + j];
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j)
          acc[i][j] += a[i] * b[j];
    }
    __syncthreads(); // the tiles are overwritten next
  }

#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int m = m0 + ty * kTM + i;
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int n = n0 + tx * kTN + j;
      if (m < M && n < N) {
        float *c = C + static_cast<size_t>(m) * N + n;
        *c = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * *c;
      }
    }
  }
}
