//===- Bf16.cpp - bf16 storage for the fp32 CPU kernels --------*- C++ -*-===//
//
// Part of mtc. The bulk conversions of Bf16.h: plain loops the compiler
// vectorises, split over the kernels' threads for large tensors (chunk
// boundaries do not change any result: every element converts on its own).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Bf16.h"
#include "runtime/cpu/Kernels.h"

namespace mtc::cpu {

namespace {

/// Below this many elements a conversion runs on the calling thread.
constexpr int64_t kParallelElements = int64_t(1) << 16;

template <typename F> void forChunks(int64_t n, F &&body) {
  if (n < kParallelElements || threads() <= 1) {
    body(0, n);
    return;
  }
  parallelFor(n, body);
}

} // namespace

void widenBF16(const uint16_t *src, float *dst, int64_t n) {
  forChunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      dst[i] = fromBF16(src[i]);
  });
}

void narrowToBF16(const float *src, uint16_t *dst, int64_t n) {
  forChunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      dst[i] = toBF16(src[i]);
  });
}

void roundThroughBF16(const float *src, float *dst, int64_t n) {
  forChunks(n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      dst[i] = fromBF16(toBF16(src[i]));
  });
}

} // namespace mtc::cpu
