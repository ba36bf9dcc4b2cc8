//===- AdamWKernel.h - The elementwise AdamW update kernels -----*- C++ -*-===//
//
// Part of mtc. The AdamW update of one contiguous range of fp32 master
// weights and moments, with fp32 or bf16 gradients, built for several x86-64
// instruction-set levels and dispatched on the running CPU (the widest one it
// supports). AdamW (Optimizer.h) splits tensors into chunks and calls these.
//
// Every level computes exactly the same IEEE operations in the same order
// (multiplies, adds, a correctly rounded sqrt and divide; no fused
// multiply-add), so results are bit-identical whatever the level, the vector
// width or the CPU. The bf16 variant widens each gradient exactly (bf16 is
// the top half of an fp32) and is bit-identical to the fp32 kernel run on the
// widened gradients.
//
// Memory traffic per parameter: p, m, v read and written, the gradient read:
// 28 bytes with fp32 gradients, 26 with bf16 ones.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_TRAIN_ADAMWKERNEL_H
#define MTC_RUNTIME_TRAIN_ADAMWKERNEL_H

#include <cstddef>
#include <cstdint>

namespace mtc::train {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weightDecay = 0.1f;
};

/// The instruction-set levels the kernels are built for. Baseline is the
/// target's default ISA (SSE2 on x86-64); Avx2 and Avx512 exist on x86-64
/// only.
enum class SimdLevel { Baseline, Avx2, Avx512 };

/// "baseline", "avx2", "avx512".
const char *simdLevelName(SimdLevel level);

/// Whether this build has a kernel for \p level and the running CPU can
/// execute it.
bool simdLevelSupported(SimdLevel level);

/// The level adamwKernel and adamwKernelBf16 use: the widest supported one.
SimdLevel adamwSimdLevel();

/// The AdamW update of one contiguous range at the dispatched level (callers
/// normally use AdamW::step). \p step is 1-based; \p gradScale multiplies
/// the gradients (the clipping scale, 1 for none).
void adamwKernel(float *p, float *m, float *v, const float *g, size_t n,
                 const AdamWConfig &cfg, int64_t step, float lr,
                 float gradScale, bool decay);

/// The same with bf16 gradients (raw bf16 bits: the upper 16 bits of an
/// fp32).
void adamwKernelBf16(float *p, float *m, float *v, const uint16_t *g, size_t n,
                     const AdamWConfig &cfg, int64_t step, float lr,
                     float gradScale, bool decay);

/// adamwKernel at a given \p level (tests and benchmarks); the level must
/// be supported (simdLevelSupported), else the call aborts.
void adamwKernelAt(SimdLevel level, float *p, float *m, float *v,
                   const float *g, size_t n, const AdamWConfig &cfg,
                   int64_t step, float lr, float gradScale, bool decay);

/// adamwKernelBf16 at a given \p level (tests and benchmarks).
void adamwKernelBf16At(SimdLevel level, float *p, float *m, float *v,
                       const uint16_t *g, size_t n, const AdamWConfig &cfg,
                       int64_t step, float lr, float gradScale, bool decay);

} // namespace mtc::train

#endif // MTC_RUNTIME_TRAIN_ADAMWKERNEL_H
