//===- Rope.cpp - Launcher of the rotary embedding kernel -----------------===//
//
// Part of mtc.
//
// rope_f32 / rope_bf16 read the frequency table from device memory. The
// host computes it with cpu::ropeInvFreq, so both backends rotate by the
// same doubles, and hands it over in rope_freqs_f64 launches that carry
// kRopeFreqChunk entries by value: an asynchronous host-to-device copy
// would need a host buffer that outlives it (and from pageable memory may
// wait for the stream), a launch's parameters are copied when it is queued.
// Then one block of 128 threads per (b, s) row, rot floats of dynamic
// shared memory for the row's cos and sin.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ops/Rope.h"

#include "runtime/cuda/kernels/shapes.cuh"

#include <algorithm>
#include <climits>
#include <string>

namespace mtc::cuda::ops {

Status rope(const Launch &L, DevPtr x, DevPtr y, int64_t B, int64_t S,
            int64_t H, int64_t D, const cpu::RopeParams &p, bool inverse,
            int64_t posOffset, DType type) {
  if (B < 0 || S < 0 || H < 0 || D < 0 || B * S > INT_MAX || S > INT_MAX ||
      H > INT_MAX || D > INT_MAX || H * D > INT_MAX)
    return Status::error("rope: [" + std::to_string(B) + ", " +
                         std::to_string(S) + ", " + std::to_string(H) + ", " +
                         std::to_string(D) +
                         "] is outside the kernel's range (B*S, S, H*D below "
                         "2^31)");
  const int64_t rows = B * S;
  if (rows == 0 || H == 0 || D == 0)
    return Status::success();
  const int64_t rot = cpu::ropeRotaryDims(p, D);
  // The kernel keeps a row's cos and sin in shared memory.
  if (rot * 4 > 48 * 1024)
    return Status::error("rope: " + std::to_string(rot) +
                         " rotary dims exceed the kernel's shared memory "
                         "(at most 12288)");
  DevPtr table = 0;
  if (rot > 0) {
    const std::vector<double> freq = cpu::ropeInvFreq(p, D);
    Expected<DevPtr> t = L.scratch(static_cast<int64_t>(freq.size()) * 8);
    if (!t)
      return Status::error("rope: " + t.message());
    table = *t;
    for (size_t first = 0; first < freq.size();
         first += mtc_cuda::kRopeFreqChunk) {
      mtc_cuda::RopeFreqChunk chunk{};
      chunk.first = static_cast<int>(first);
      chunk.count = static_cast<int>(std::min<size_t>(
          freq.size() - first, size_t(mtc_cuda::kRopeFreqChunk)));
      std::copy_n(freq.begin() + first, chunk.count, chunk.value);
      if (Status s = L.kernel("rope.cu", "rope_freqs_f64", {1},
                              {unsigned(mtc_cuda::kRopeFreqChunk)}, 0,
                              {&table, &chunk});
          !s)
        return s.withPrefix("rope");
    }
  }
  int r = static_cast<int>(rows), s = static_cast<int>(S),
      h = static_cast<int>(H), d = static_cast<int>(D),
      ro = static_cast<int>(rot), inv = inverse ? 1 : 0;
  long long offset = posOffset;
  return L
      .kernel("rope.cu", std::string("rope_") + dtypeSuffix(type),
              {static_cast<unsigned>(rows)}, {128},
              static_cast<unsigned>(rot * 4),
              {&x, &y, &table, &r, &s, &h, &d, &ro, &offset, &inv})
      .withPrefix("rope");
}

} // namespace mtc::cuda::ops
