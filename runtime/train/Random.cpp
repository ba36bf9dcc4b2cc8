//===- Random.cpp - Counter-based random numbers --------------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Random.h"

#include <algorithm>
#include <cmath>

namespace mtc::train {

static inline void mulhilo(uint32_t a, uint32_t b, uint32_t &hi, uint32_t &lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, uint32_t k0,
                                   uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(M0, c[0], hi0, lo0);
    mulhilo(M1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += W0;
    k1 += W1;
  }
  return c;
}

std::array<uint32_t, 4> philoxBlock(uint64_t seed, uint64_t stream,
                                    uint64_t index) {
  return philox4x32(
      {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
       static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

namespace {
constexpr size_t kInitChunk = 1u << 16; // multiple of 4

template <typename Fn>
void forChunks(size_t n, ThreadPool *pool, const Fn &fn) {
  size_t chunks = numChunks(n, kInitChunk);
  auto task = [&](size_t c) {
    size_t b = c * kInitChunk;
    fn(b, std::min(n, b + kInitChunk));
  };
  if (pool)
    pool->parallelFor(chunks, task);
  else
    for (size_t c = 0; c < chunks; ++c)
      task(c);
}

// (0, 1] from 32 bits, for the logarithm of Box-Muller.
inline double openUniform(uint32_t x) {
  return (static_cast<double>(x) + 1.0) * (1.0 / 4294967296.0);
}
} // namespace

void initNormal(float *dst, size_t n, float mean, float std, uint64_t seed,
                uint64_t streamId, ThreadPool *pool) {
  forChunks(n, pool, [&](size_t b, size_t e) {
    // Chunks start at multiples of 4: one Philox block serves 4 elements.
    for (size_t i = b; i < e; i += 4) {
      std::array<uint32_t, 4> r = philoxBlock(seed, streamId, i / 4);
      double z[4];
      for (int k = 0; k < 4; k += 2) {
        double radius = std::sqrt(-2.0 * std::log(openUniform(r[k])));
        double theta =
            2.0 * M_PI * (static_cast<double>(r[k + 1]) * (1.0 / 4294967296.0));
        z[k] = radius * std::cos(theta);
        z[k + 1] = radius * std::sin(theta);
      }
      for (size_t k = 0; k < 4 && i + k < e; ++k)
        dst[i + k] = static_cast<float>(mean + std * z[k]);
    }
  });
}

void initUniform(float *dst, size_t n, float lo, float hi, uint64_t seed,
                 uint64_t streamId, ThreadPool *pool) {
  forChunks(n, pool, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; i += 4) {
      std::array<uint32_t, 4> r = philoxBlock(seed, streamId, i / 4);
      for (size_t k = 0; k < 4 && i + k < e; ++k) {
        float u = uniformFromBits(r[k]);
        float v = lo + (hi - lo) * u;
        dst[i + k] = v < hi ? v : lo; // rounding could reach hi
      }
    }
  });
}

uint32_t Rng::next32() {
  uint64_t blk = pos_ / 4;
  if (blk != cachedBlock_) {
    block_ = philoxBlock(seed_, stream_, blk);
    cachedBlock_ = blk;
  }
  return block_[pos_++ % 4];
}

uint64_t Rng::below(uint64_t n) {
  // Rejection on the top of the range: unbiased.
  uint64_t limit = UINT64_MAX - (UINT64_MAX % n + 1) % n;
  for (;;) {
    uint64_t x = next64();
    if (x <= limit)
      return x % n;
  }
}

double Rng::normal() {
  double u1 = 1.0 - uniform(); // (0, 1]
  double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

} // namespace mtc::train
