//===- Plan.h - The byte rules of the streaming memory plan -----*- C++ -*-===//
//
// Part of mtc. Shared by the compiler (compiler/Analysis, mtc-plan-memory),
// which sizes every device buffer, and the runtime, which allocates inside
// those buffers and checks them: both must count bytes the same way
// (docs/streaming.md, "Byte rule").
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_BUNDLE_PLAN_H
#define MTC_LIB_BUNDLE_PLAN_H

#include <cstdint>

namespace mtc::bundle {

/// Every allocation inside a device buffer is rounded up to 64 bytes.
constexpr int64_t align64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

/// Bytes a tensor of \p numel f32 or i32 elements takes in device memory.
constexpr int64_t tensorBytes(int64_t numel) { return align64(4 * numel); }

/// Buffers start at offsets that are multiples of 256 bytes.
constexpr int64_t kBufferAlignment = 256;
constexpr int64_t alignOffset(int64_t offset) {
  return (offset + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

} // namespace mtc::bundle

#endif // MTC_LIB_BUNDLE_PLAN_H
