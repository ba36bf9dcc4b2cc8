//===- Optimizer.h - Host AdamW and exact global-norm clipping --*- C++ -*-===//
//
// Part of mtc. The optimizer runs on CPU threads over fp32 master weights and
// moments in host RAM. One AdamW pass reads p, m, v, g and writes p, m, v
// (28 bytes per parameter with fp32 gradients, 26 with bf16 ones); the
// clipping scale is applied inside that pass. The vectorised kernels, one per
// instruction-set level, are in AdamWKernel.h.
//
// Update (PyTorch AdamW semantics, t = 1-based step):
//   g  = grad * gradScale
//   m  = b1 m + (1 - b1) g
//   v  = b2 v + (1 - b2) g^2
//   p  = p * (1 - lr wd)                          (only for tensors with decay)
//   p  = p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
// Determinism: the update is elementwise, so results do not depend on the
// thread count at all. sumOfSquares uses fixed chunks and a fixed reduction
// order, so it is bit-identical for any thread count too.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_TRAIN_OPTIMIZER_H
#define MTC_RUNTIME_TRAIN_OPTIMIZER_H

#include "runtime/train/AdamWKernel.h"

#include "lib/Support/ThreadPool.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mtc::train {

/// The host-side training code runs on the one worker pool.
using mtc::ThreadPool;

/// One parameter tensor and its state; all arrays hold n elements. The
/// gradient is fp32 (\c grad) or bf16 (\c gradBf16, raw bits): exactly one of
/// the two is set.
struct AdamWTensor {
  float *param = nullptr;
  float *m = nullptr;
  float *v = nullptr;
  const float *grad = nullptr;
  size_t n = 0;
  bool decay = true; ///< apply weight decay (false for norms, biases, ...)
  const uint16_t *gradBf16 = nullptr; ///< bf16 gradients instead of \c grad
};

class AdamW {
public:
  /// \p pool may be null (single-threaded). It is not owned.
  AdamW(AdamWConfig cfg, ThreadPool *pool);

  const AdamWConfig &config() const { return cfg; }

  /// Updates every tensor for optimizer step \p step (1-based: the first call
  /// is step 1) with learning rate \p lr, multiplying gradients by
  /// \p gradScale (the clipping scale; 1 for none).
  void step(const std::vector<AdamWTensor> &tensors, int64_t step, float lr,
            float gradScale = 1.0f) const;
  /// One tensor (for per-layer updates overlapped with device work).
  void step(const AdamWTensor &tensor, int64_t step, float lr,
            float gradScale = 1.0f) const;

  /// Elements per task.
  static constexpr size_t kChunk = 1u << 16;

private:
  AdamWConfig cfg;
  ThreadPool *pool;
};

/// Sum of squares in double precision, deterministic whatever \p pool's size:
/// fixed chunks of kSumChunk elements, each summed with 8 interleaved double
/// accumulators, chunk sums added in index order.
double sumOfSquares(const float *x, size_t n, ThreadPool *pool = nullptr);
constexpr size_t kSumChunk = 1u << 16;

/// The same over bf16 values (raw bits, each widened exactly to fp32): equal
/// bit for bit to sumOfSquares over the widened values, so the global norm of
/// bf16 gradients is the norm of exactly what AdamW reads.
double sumOfSquaresBf16(const uint16_t *x, size_t n,
                        ThreadPool *pool = nullptr);

/// Rounds \p n fp32 values in place to the nearest bf16 (ties to even; the
/// conversion of device::convertF32ToBF16), each kept as the fp32 that the
/// bf16 widens to: bf16 gradients where the fp32 sums live on the host (the
/// plain executor). Deterministic, elementwise.
void roundToBf16(float *x, size_t n, ThreadPool *pool = nullptr);

/// What the gradients are scaled by so that their global norm is at most
/// \p maxNorm: maxNorm / (norm + 1e-6) when norm > maxNorm, else 1; also 1
/// when maxNorm <= 0 (clipping off) or the norm is not finite (the step then
/// shows the non-finite values instead of hiding them). The trainer's rule
/// (TrainRun::update).
double clipScale(double norm, double maxNorm);

} // namespace mtc::train

#endif // MTC_RUNTIME_TRAIN_OPTIMIZER_H
