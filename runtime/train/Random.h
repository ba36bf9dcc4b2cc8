//===- Random.h - Counter-based random numbers ------------------*- C++ -*-===//
//
// Part of mtc. Philox4x32-10 (Salmon et al., SC'11): a block of four 32-bit
// outputs is a pure function of (key = seed, counter). Parameter
// initialisation draws element i from counter (i / 4, streamId), so the
// values are identical whatever the thread count or chunking.
//
//   initNormal:  Box-Muller on pairs of 32-bit uniforms, computed in double
//   initUniform: 24-bit uniforms in [0, 1), scaled to [lo, hi)
//
// Rng is the sequential generator (sampling, data order): its whole state is
// (seed, stream, position), so it can be saved and restored exactly.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_TRAIN_RANDOM_H
#define MTC_RUNTIME_TRAIN_RANDOM_H

#include "lib/Support/ThreadPool.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace mtc::train {

/// The host-side training code runs on the one worker pool.
using mtc::ThreadPool;

/// Philox4x32-10 of counter (c0..c3) under key (k0, k1).
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, uint32_t k0,
                                   uint32_t k1);

/// The block of 4 outputs for (seed, stream, index): counter = (index lo,
/// index hi, stream lo, stream hi), key = seed.
std::array<uint32_t, 4> philoxBlock(uint64_t seed, uint64_t stream,
                                    uint64_t index);

/// dst[i] ~ N(mean, std^2), element i a function of (seed, streamId, i) only.
void initNormal(float *dst, size_t n, float mean, float std, uint64_t seed,
                uint64_t streamId, ThreadPool *pool = nullptr);
/// dst[i] ~ U[lo, hi), element i a function of (seed, streamId, i) only.
void initUniform(float *dst, size_t n, float lo, float hi, uint64_t seed,
                 uint64_t streamId, ThreadPool *pool = nullptr);

/// 32-bit output -> [0, 1) with 24 bits (exactly representable as float).
inline float uniformFromBits(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

/// Sequential generator over Philox blocks.
class Rng {
public:
  explicit Rng(uint64_t seed = 0, uint64_t stream = 0)
      : seed_(seed), stream_(stream) {}

  /// The next 32 random bits.
  uint32_t next32();
  uint64_t next64() {
    uint64_t hi = next32();
    return (hi << 32) | next32();
  }
  /// Uniform in [0, 1) with 53 bits.
  double uniform() { return static_cast<double>(next64() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n) without bias (n > 0).
  uint64_t below(uint64_t n);
  /// Standard normal (Box-Muller; uses two uniforms per call).
  double normal();

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }
  /// Number of 32-bit outputs drawn so far; with seed and stream, the whole
  /// state.
  uint64_t position() const { return pos_; }
  void setPosition(uint64_t pos) {
    pos_ = pos;
    cachedBlock_ = ~uint64_t(0);
  }

private:
  uint64_t seed_, stream_;
  uint64_t pos_ = 0;
  uint64_t cachedBlock_ = ~uint64_t(0);
  std::array<uint32_t, 4> block_{};
};

} // namespace mtc::train

#endif // MTC_RUNTIME_TRAIN_RANDOM_H
