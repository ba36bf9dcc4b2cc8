//===- Plan.h - Byte rules of the streaming step plan -----------*- C++ -*-===//
//
// Part of mtc. The sizes the compiler's memory plan (compiler/Analysis) and
// the streaming runtime (runtime/stream) must agree on byte for byte
// (docs/streaming.md, "Byte rule"). Header-only, no MLIR: both sides include
// this file.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_BUNDLE_PLAN_H
#define MTC_LIB_BUNDLE_PLAN_H

#include "lib/Support/Shape.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mtc::bundle {

/// Every tensor is held in 4-byte elements (f32, i32; bf16 parameters are
/// held as f32).
constexpr int64_t kElementBytes = 4;
/// Tensor allocations are rounded up to this many bytes.
constexpr int64_t kTensorAlign = 64;
/// Buffers start at multiples of this many bytes of the device arena.
constexpr int64_t kOffsetAlign = 256;

/// \p v rounded up to a multiple of \p a (a > 0, v >= 0).
constexpr int64_t alignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/// \p bytes rounded up to a multiple of 64.
constexpr int64_t align64(int64_t bytes) {
  return alignUp(bytes, kTensorAlign);
}

/// The offset of the next buffer after \p end bytes of the arena.
constexpr int64_t alignOffset(int64_t end) {
  return alignUp(end, kOffsetAlign);
}

/// The bytes a tensor of \p numel elements takes: align64(4 * numel).
constexpr int64_t tensorBytes(int64_t numel) {
  return align64(kElementBytes * numel);
}

/// The element count of \p shape with B = \p batch, S = \p seq and T = \p
/// tokens (the tokens routed to one expert).
inline int64_t concreteNumel(const Shape &shape, int64_t batch, int64_t seq,
                             int64_t tokens = 0) {
  int64_t n = 1;
  for (Dim d : shape)
    n *= d == kDimB ? batch : d == kDimS ? seq : d == kDimT ? tokens : d;
  return n;
}

/// tensorBytes of \p shape at concrete dims.
inline int64_t tensorBytes(const Shape &shape, int64_t batch, int64_t seq,
                           int64_t tokens = 0) {
  return tensorBytes(concreteNumel(shape, batch, seq, tokens));
}

/// The log-sum-exp an `attention` op keeps beside its result: one float per
/// (batch, query head, position); \p resultShape is [B, S, Hq, D].
inline int64_t attentionLseBytes(const Shape &resultShape, int64_t batch,
                                 int64_t seq) {
  if (resultShape.size() != 4)
    return 0;
  return tensorBytes(concreteNumel(
      {resultShape[0], resultShape[1], resultShape[2]}, batch, seq));
}

/// A value of a function for the workspace packing: its bytes and the op
/// indices [begin, end] during which it must stay intact.
struct LiveValue {
  int64_t bytes = 0;
  int64_t begin = 0, end = 0;
};

/// Offsets for \p values such that two values whose live ranges overlap never
/// share a byte; deterministic (largest first, then earliest, then index;
/// each at the lowest 64-byte-aligned offset that fits). \p offsets gets one
/// offset per value; returns the bytes the packing spans.
int64_t packLiveValues(const std::vector<LiveValue> &values,
                       std::vector<int64_t> &offsets);

struct Function;
struct Bundle;

/// The workspace plan of one layer function at concrete dims (docs/
/// streaming.md, "Workspace"): every value an op produces (except views:
/// param_ref, reshape) has a fixed offset in the packed region, reused once
/// the value is dead (its last use, through reshape aliases; function
/// results live to the end); after it, a scratch area for what one op
/// allocates while it runs (its results before they are copied into place,
/// an attention's log-sum-exp, a moe op's expert calls), reset after every
/// op.
struct FunctionPlan {
  std::vector<int64_t> offset; ///< per value id; -1: not in the workspace
  int64_t packedBytes = 0;     ///< the packed region [0, packedBytes)
  int64_t scratchBytes = 0;    ///< the largest single op's scratch
  int64_t bytes() const { return packedBytes + scratchBytes; }
};

/// Plans \p fn, a function of layer \p layer of \p b (its experts serve the
/// moe ops), for micro-batches of [batch, seq].
FunctionPlan planLayerFunction(const Bundle &b, const std::string &layer,
                               const Function &fn, int64_t batch, int64_t seq);

} // namespace mtc::bundle

#endif // MTC_LIB_BUNDLE_PLAN_H
