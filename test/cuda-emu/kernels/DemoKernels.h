//===- DemoKernels.h - Host declarations of the demo kernels ----*- C++ -*-===//
//
// Part of mtc. The extern "C" kernels of add_rmsnorm.cu, softmax.cu and
// sgemm.cu as the emulator build defines them (see each file for the launch
// shape), for the tests and benchmarks that launch them with emu::launch.
// Include after cuda_emu.h (for __nv_bfloat16).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TEST_CUDA_EMU_KERNELS_DEMOKERNELS_H
#define MTC_TEST_CUDA_EMU_KERNELS_DEMOKERNELS_H

extern "C" {
/// One block per row; dynamic shared memory D * sizeof(float).
void add_rmsnorm_f32(const float *x, float *residual, const float *w, float *y,
                     int rows, int D, int ld, float eps);
void add_rmsnorm_bf16(const __nv_bfloat16 *x, __nv_bfloat16 *residual,
                      const __nv_bfloat16 *w, __nv_bfloat16 *y, int rows, int D,
                      int ld, float eps);
/// One block per row.
void softmax_f32(const float *x, float *y, int rows, int n);
/// Grid (ceil(N / 64), ceil(M / 64)), block 256.
void sgemm_f32(int M, int N, int K, float alpha, const float *A, const float *B,
               float beta, float *C);
}

#endif // MTC_TEST_CUDA_EMU_KERNELS_DEMOKERNELS_H
