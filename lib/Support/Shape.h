//===- Shape.h - Shapes with symbolic dimensions ----------------*- C++ -*-===//
//
// Part of mtc. The shape vocabulary shared by the frontend (Sema) and the mt
// dialect's verifiers. Pure C++: no LLVM or MLIR, so the frontend, the fuzzer
// and the runtime can all use it.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_SHAPE_H
#define MTC_LIB_SUPPORT_SHAPE_H

#include "lib/Support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mtc {

/// One dimension: a value >= 0 is static; the negative constants below are the
/// symbolic dimensions of the language.
using Dim = int64_t;
constexpr Dim kDimB = -1; ///< batch (sequences per micro-batch)
constexpr Dim kDimS = -2; ///< sequence length
constexpr Dim kDimT = -3; ///< tokens routed to one expert

using Shape = std::vector<Dim>;

/// True for B, S and T.
inline bool isSymbolic(Dim d) { return d < 0; }
/// "B", "S", "T" or the decimal value.
std::string formatDim(Dim d);
/// "[B, S, 256]"; "[]" for scalars.
std::string formatShape(const Shape &s);
/// The symbolic dimension named \p name ("B", "S", "T"), or 0 if it is none.
Dim symbolicDimByName(const std::string &name);

/// Element types of the language.
enum class DType { F32, BF16, I32 };
const char *dtypeName(DType t);

/// Shape rules for the operations of the language. Each returns the result
/// shape (Expected) or, for pure checks, a Status; an error carries a message
/// suitable for a user ("shape mismatch ...": no location, no trailing
/// period), which callers prefix with the place it concerns.
namespace rules {
Expected<Shape> broadcast(const Shape &a, const Shape &b);
/// [.., K] x [K, N] -> [.., N], or batched [.., M, K] x [.., K, N] with equal
/// leading dims. \p bias, when non-null, must be [N].
Expected<Shape> matmul(const Shape &a, const Shape &b, const Shape *bias);
/// Normalises a possibly negative axis against \p rank.
Expected<size_t> axis(int64_t axis, size_t rank);
Expected<Shape> reduce(const Shape &x, int64_t axis, bool keepdim);
Expected<Shape> embedding(const Shape &ids, const Shape &table);
/// The static element counts must agree and the symbolic dims must be the
/// same multiset.
Status reshape(const Shape &x, const Shape &target);
Expected<Shape> transpose(const Shape &x, const std::vector<int64_t> &perm);
Expected<std::vector<Shape>>
split(const Shape &x, const std::vector<int64_t> &sizes, int64_t axis);
Expected<Shape> concat(const std::vector<Shape> &xs, int64_t axis);
/// [start, end) along \p axis; \p end may be kDimS (with \p start 0) for the
/// first S entries of a static axis, the result's axis then being S.
Expected<Shape> slice(const Shape &x, int64_t axis, int64_t start, int64_t end);
/// x [.., D] normalised with weight (and bias) [D].
Status norm(const Shape &x, const Shape &w, const Shape *b);
/// The rotary embedding of a head of \p d dims with \p fraction (mt.rope's
/// `fraction`, HuggingFace's `partial_rotary_factor`), as transformers
/// computes it: `freq` = int(d * fraction) dims set the frequencies
/// theta^(-2i / freq), i < ceil(freq / 2), which rotate the first `rotary`
/// = freq rounded up to even dims (pairs (i, i + rotary / 2)).
struct RopeDims {
  int64_t freq = 0, rotary = 0;
};
RopeDims ropeDims(double fraction, int64_t d);

/// x [B, S, H, D] with a static D; fraction in (0, 1], giving at least one
/// frequency dim and at most D rotated dims (ropeDims).
Status rope(const Shape &x, double fraction);
/// q [B, S, Hq, D], k and v [B, S, Hkv, D], Hkv divides Hq.
Expected<Shape> attention(const Shape &q, const Shape &k, const Shape &v);
/// logits [B, S, V], targets [B, S] -> [].
Status crossEntropy(const Shape &logits, const Shape &targets);
/// h [B, S, D], router [D, E] where E is the number of experts.
Status moe(const Shape &h, const Shape &router, int64_t numExperts);
/// x [B, S, D] times the LM head w [D, V] ([V, D] with \p transposeWeight,
/// a tied embedding table; static), targets [B, S].
Status linearCrossEntropy(const Shape &x, const Shape &w, bool transposeWeight,
                          const Shape &targets);
/// The gradient of the weight of x [.., K] @ w [K, N] from dy [.., N] (the
/// leading dims of x): [K, N].
Expected<Shape> weightGrad(const Shape &x, const Shape &dy);
/// Summing \p from down to \p to, a shape that broadcasts to \p from.
Status reduceTo(const Shape &from, const Shape &to);
/// x placed at [start, end) along \p axis (>= 0) of a zero tensor \p out;
/// the other dims agree and out's padded dim is static. \p end is kDimS
/// (with \p start 0) when x's axis is S: the VJP of a slice ending at S.
Status pad(const Shape &x, const Shape &out, int64_t axis, int64_t start,
           int64_t end);
/// A value of a fused region whose iteration shape is \p iteration (see
/// mt.fused): the iteration shape, a row of it ([R...] or [R..., 1]), a
/// static suffix of it, or a static scalar. This bounds what a compiled
/// region reads and writes by the iteration shape.
Status fusedValue(const Shape &v, const Shape &iteration);
} // namespace rules

} // namespace mtc

#endif // MTC_LIB_SUPPORT_SHAPE_H
