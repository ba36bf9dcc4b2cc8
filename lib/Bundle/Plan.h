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
#include <functional>
#include <string>
#include <vector>

namespace mtc::bundle {

/// Under the fp32 precision every tensor is held in 4-byte elements (f32,
/// i32; bf16 parameters are held as f32).
constexpr int64_t kElementBytes = 4;

/// The precision of a step plan's device tensors (docs/streaming.md, "Byte
/// rule"). F32: every float tensor on the device is f32. BF16: parameter
/// values and activations are bf16 on the device; parameter gradients,
/// log-sum-exps, scalars (the loss) and integer tensors stay 4 bytes. The
/// host keeps the fp32 master weights, gradients and optimizer state in
/// both.
enum class Precision { F32, BF16 };

/// "fp32" or "bf16" (the `--precision` spelling, the bundle's "precision").
inline const char *precisionName(Precision p) {
  return p == Precision::BF16 ? "bf16" : "fp32";
}

/// Parses "fp32" or "bf16"; false for anything else.
inline bool parsePrecision(const std::string &text, Precision &out) {
  if (text == "fp32")
    out = Precision::F32;
  else if (text == "bf16")
    out = Precision::BF16;
  else
    return false;
  return true;
}

/// What a step plan's layer instances keep for their backward (the plan's
/// "recompute", docs/streaming.md): Full keeps each instance's input and
/// recomputes its forward; None keeps every result of the forward;
/// Selective keeps the results of matmul, attention and moe.
enum class Recompute { Full, None, Selective };

/// The plan's spelling of \p r: "full", "none" or "selective".
inline const char *recomputeName(Recompute r) {
  return r == Recompute::None        ? "none"
         : r == Recompute::Selective ? "selective"
                                     : "full";
}

/// Parses the plan's spelling of a Recompute; false for anything else.
inline bool parseRecompute(const std::string &text, Recompute &out) {
  for (Recompute r : {Recompute::Full, Recompute::None, Recompute::Selective})
    if (text == recomputeName(r)) {
      out = r;
      return true;
    }
  return false;
}

/// Where a step plan keeps its layer checkpoints (the plan's
/// "checkpoints"): "device" or "host".
enum class CheckpointSpace { Device, Host };

/// Parses "device" or "host"; false for anything else.
inline bool parseCheckpointSpace(const std::string &text,
                                 CheckpointSpace &out) {
  if (text == "device")
    out = CheckpointSpace::Device;
  else if (text == "host")
    out = CheckpointSpace::Host;
  else
    return false;
  return true;
}

/// Bytes of one element stored as \p t.
constexpr int64_t elementBytes(DType t) { return t == DType::BF16 ? 2 : 4; }

/// How parameter values are stored on the device under \p p.
constexpr DType deviceParamDType(Precision p) {
  return p == Precision::BF16 ? DType::BF16 : DType::F32;
}

/// How a function argument of logical type \p logical and rank \p rank is
/// stored on the device under \p p: integers as i32, scalars as f32, other
/// floats in the precision's activation type.
constexpr DType argumentStorage(DType logical, size_t rank, Precision p) {
  if (logical == DType::I32)
    return DType::I32;
  if (p == Precision::F32 || rank == 0)
    return DType::F32;
  return DType::BF16;
}

/// Whether result \p result of op \p op is a parameter gradient: it is kept
/// in f32 under every precision (docs/streaming.md, "Byte rule").
bool isParamGradientResult(const std::string &op, size_t result);

/// How result \p result (logical type \p logical, rank \p rank) of op \p
/// op is stored on the device under \p p, given how its operands are:
/// \p floatOperands is the number of its non-integer operands and \p
/// allF32 whether all of them are stored as f32. The rule: integers i32;
/// under fp32 every float f32; under bf16 f32 for scalars (the loss), for
/// parameter gradients (isParamGradientResult) and for results of ops
/// whose float operands are all f32 (sums and transposes of gradients),
/// bf16 for everything else (activations, parameter views).
inline DType resultStorage(const std::string &op, size_t result, DType logical,
                           size_t rank, int floatOperands, bool allF32,
                           Precision p) {
  if (logical == DType::I32)
    return DType::I32;
  if (p == Precision::F32 || rank == 0 || isParamGradientResult(op, result) ||
      (floatOperands > 0 && allF32))
    return DType::F32;
  return DType::BF16;
}
/// Host bytes of training state per parameter under every precision: the
/// fp32 master value, its gradient, AdamW's m and v.
constexpr int64_t kStateBytesPerParam = 16;
/// The same with the immediate optimizer placement (docs/training.md,
/// "Optimizer placement"): value, m and v; the gradients pass through the
/// plan's `grads.host` ring instead of a model-sized buffer.
constexpr int64_t kImmediateStateBytesPerParam = 12;
/// The same with bf16 gradients in host memory (`--grad-dtype bf16`,
/// docs/training.md, "Gradient dtype"): the fp32 value, m and v, and the
/// deferred optimizer's gradient rounded to bf16 on its way from the device.
constexpr int64_t kBf16GradStateBytesPerParam = 14;

/// How the deferred optimizer's model-sized gradient buffer is kept in host
/// memory (`--grad-dtype`): F32, or BF16 (rounded to nearest even from the
/// fp32 sums the device accumulates).
enum class GradDType { F32, BF16 };

/// "fp32" or "bf16" (the `--grad-dtype` spelling).
inline const char *gradDTypeName(GradDType g) {
  return g == GradDType::BF16 ? "bf16" : "fp32";
}

/// Parses "fp32" or "bf16"; false for anything else.
inline bool parseGradDType(const std::string &text, GradDType &out) {
  if (text == "fp32")
    out = GradDType::F32;
  else if (text == "bf16")
    out = GradDType::BF16;
  else
    return false;
  return true;
}

/// Host bytes of training state per parameter: 12 with the immediate
/// placement (no gradient buffer, whatever \p grads), else 16 with fp32
/// gradients and 14 with bf16 ones.
constexpr int64_t stateBytesPerParam(bool immediateOptimizer, GradDType grads) {
  return immediateOptimizer         ? kImmediateStateBytesPerParam
         : grads == GradDType::BF16 ? kBf16GradStateBytesPerParam
                                    : kStateBytesPerParam;
}

/// Slots of the `grads.host` ring: the d2h copy of one layer instance's
/// gradients fills one while AdamW reads the other.
constexpr int64_t kGradRingSlots = 2;

/// Tensor allocations are rounded up to this many bytes.
constexpr int64_t kTensorAlign = 64;
/// Buffers start at multiples of this many bytes of the device arena.
constexpr int64_t kOffsetAlign = 256;

/// Sizes (bytes, element counts, FLOPs) that the planner and the simulator
/// derive from user input (--batch, --seq, --micro-batches, a model's
/// dimensions) are products that can exceed 64 bits. The rules of this file
/// saturate instead of wrapping: a result past kSizeCap is kSizeCap, never a
/// negative or small number, and stays kSizeCap through addSize and mulSize.
/// A plan whose sizes pass kMaxPlanBytes is refused (compiler/Analysis,
/// docs/streaming.md, "Limits"); a saturated size always does.
constexpr int64_t kSizeCap = int64_t(1) << 62;
/// The largest buffer, device peak, host total or training state a step plan
/// may have: 2^56 bytes (64 PiB), far beyond any machine, and small enough
/// that a few of them add up without overflow.
constexpr int64_t kMaxPlanBytes = int64_t(1) << 56;

/// The layer instances a step plan may have (its weight slots, its
/// segments and its mixed plans are chosen per instance): 2^16, far beyond
/// any model's depth.
constexpr int64_t kMaxLayerInstances = int64_t(1) << 16;

/// \p a + \p b (both in [0, kSizeCap]), at most kSizeCap.
constexpr int64_t addSize(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) || r > kSizeCap ? kSizeCap : r;
}

/// \p a x \p b (both in [0, kSizeCap]), at most kSizeCap.
constexpr int64_t mulSize(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) || r > kSizeCap ? kSizeCap : r;
}

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

/// The bytes a tensor of \p numel elements takes: align64(4 * numel)
/// (saturating: kSizeCap).
constexpr int64_t tensorBytes(int64_t numel) {
  return align64(mulSize(kElementBytes, numel));
}

/// The bytes a tensor of \p numel elements stored as \p t takes
/// (saturating: kSizeCap).
constexpr int64_t tensorBytes(int64_t numel, DType t) {
  return align64(mulSize(elementBytes(t), numel));
}

/// The element count of \p shape with B = \p batch, S = \p seq and T = \p
/// tokens (the tokens routed to one expert); kSizeCap when it is larger.
inline int64_t concreteNumel(const Shape &shape, int64_t batch, int64_t seq,
                             int64_t tokens = 0) {
  int64_t n = 1;
  for (Dim d : shape)
    n = mulSize(n, d == kDimB   ? batch
                   : d == kDimS ? seq
                   : d == kDimT ? tokens
                                : d);
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
struct Op;
struct Bundle;

/// The device storage type of every value of \p fn under \p p
/// (resultStorage, op by op; arguments by argumentStorage). A `fused` op's
/// body is not visited: its results follow the rule like any op's.
std::vector<DType> valueStorage(const Function &fn, Precision p);

/// The precision of \p b's step plan (fp32 without one).
Precision planPrecision(const Bundle &b);

/// The storage signature of \p op (a `fused` op of a function whose values
/// are stored as \p storage, valueStorage): one letter per operand, '_', one
/// per result; f for f32, b for bf16 ("fb_f"). The CUDA entry of a fused
/// kernel for that storage is `<kernel>_<signature>` (docs/bundle.md).
std::string fusedSignature(const Op &op, const std::vector<DType> &storage);

/// Calls \p f with every `fused` op of \p b that names a kernel (model,
/// layer and expert functions) and its storage signature under the plan's
/// precision.
void forEachFusedKernelOp(
    const Bundle &b,
    const std::function<void(const Op &op, const std::string &signature)> &f);

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
  int64_t bytes() const { return addSize(packedBytes, scratchBytes); }
};

/// Plans \p fn, a function of layer \p layer of \p b (its experts serve the
/// moe ops), for micro-batches of [batch, seq], with values stored as
/// valueStorage under the plan's precision (planPrecision).
FunctionPlan planLayerFunction(const Bundle &b, const std::string &layer,
                               const Function &fn, int64_t batch, int64_t seq);

/// One op of a step's `forward_backward` as the stage plan sees it: the
/// value ids it reads and defines, and what it allocates when it runs in a
/// stage (the bump rule; 0 where only the layout matters).
struct StageOp {
  std::vector<int> operands, results;
  int64_t scratch = 0;
  /// An `apply_layers` / `apply_layers_grad` op: a layer loop, not a stage
  /// op.
  bool layers = false;
  /// Its results are views of memory that outlives the step's stages (a
  /// `param_ref`, or a `reshape` of such a view): never carried.
  bool persistent = false;
};

/// `forward_backward` for the stage plan: its arguments (tokens, targets),
/// its ops in order (`func.return` excluded), and the bytes of each value
/// as stored on the device (align64 of its elements).
struct StageProgram {
  std::vector<int> args;
  std::vector<StageOp> ops;
  std::vector<int64_t> valueBytes; ///< per value id
};

/// Where the model-level values of one micro-batch live when they wait in
/// host memory between layer loops (docs/streaming.md, "Host stage"). The
/// ops of `forward_backward` fall into segments, the runs of ops between
/// layer loops; a micro-batch's segment runs in one device slot laid out as
/// [values it reads from host memory | values it writes there | its ops'
/// bump allocations and the token ids it reads]. A value is carried when an
/// op outside the segment that defines it (a later segment or a layer loop)
/// reads it; each carried value has a fixed offset in the micro-batch's
/// host region. Arguments are read from the caller's token arrays; loop
/// results are written to host memory by the loop. Everything is ordered by
/// definition (arguments, then op results in program order), so that the
/// compiler and the runtime, which number values differently, agree.
struct StagePlan {
  struct Segment {
    int64_t begin = 0, end = 0;               ///< ops [begin, end)
    std::vector<int> in, out;                 ///< carried values read / written
    std::vector<int64_t> inOffset, outOffset; ///< in the slot
    std::vector<int> args;                    ///< arguments it reads
    int64_t inBytes = 0, outBytes = 0, scratch = 0;
    int64_t bytes() const {
      return addSize(addSize(inBytes, outBytes), scratch);
    }
  };
  std::vector<Segment> segments;   ///< non-empty runs of stage ops, in order
  std::vector<int64_t> hostOffset; ///< per value id; -1: not carried
  int64_t hostBytes = 0;           ///< one micro-batch's host region
  int64_t slotBytes = 0;           ///< max over segments of bytes()
  /// The segment whose ops start at \p begin, or null.
  const Segment *segment(int64_t begin) const {
    for (const Segment &s : segments)
      if (s.begin == begin)
        return &s;
    return nullptr;
  }
};

/// The host stage plan of \p prog (the rule above). A segment's scratch is
/// the sum of its ops' scratch plus align64 of each argument it reads.
StagePlan planStage(const StageProgram &prog);

/// The stage program of \p fn (a bundle's `forward_backward`) at concrete
/// dims under \p p, without scratch (the runtime needs only the layout).
StageProgram stageProgram(const Function &fn, Precision p, int64_t batch,
                          int64_t seq);

} // namespace mtc::bundle

#endif // MTC_LIB_BUNDLE_PLAN_H
