//===- Shape.cpp - Shapes with symbolic dimensions ------------------------===//
//
// Part of mtc. The shape rules shared by Sema and the mt dialect's verifiers.
// Every rule is pure: it reads shapes and returns either the result shape or
// an error Status whose message is for a user (lowercase, no trailing period,
// both shapes shown).
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Shape.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace mtc {

std::string formatDim(Dim d) {
  switch (d) {
  case kDimB:
    return "B";
  case kDimS:
    return "S";
  case kDimT:
    return "T";
  default:
    break;
  }
  if (d < 0)
    return "?";
  return std::to_string(d);
}

std::string formatShape(const Shape &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i)
      out += ", ";
    out += formatDim(s[i]);
  }
  out += "]";
  return out;
}

Dim symbolicDimByName(const std::string &name) {
  if (name == "B")
    return kDimB;
  if (name == "S")
    return kDimS;
  if (name == "T")
    return kDimT;
  return 0;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  }
  return "?";
}

namespace rules {

namespace {

std::string formatList(const std::vector<int64_t> &v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i)
      out += ", ";
    out += std::to_string(v[i]);
  }
  out += "]";
  return out;
}

/// Shape \p s without its last \p n dimensions.
Shape dropBack(const Shape &s, size_t n) {
  return Shape(s.begin(), s.end() - std::min(n, s.size()));
}

} // namespace

Expected<Shape> broadcast(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Right-aligned: i counts from the last dimension.
    bool hasA = i < a.size(), hasB = i < b.size();
    Dim da = hasA ? a[a.size() - 1 - i] : 1;
    Dim db = hasB ? b[b.size() - 1 - i] : 1;
    Dim r;
    if (da == db)
      r = da;
    else if (da == 1)
      r = db;
    else if (db == 1)
      r = da;
    else
      return Status::error("cannot broadcast " + formatShape(a) + " and " +
                           formatShape(b));
    result[rank - 1 - i] = r;
  }
  return result;
}

Expected<Shape> matmul(const Shape &a, const Shape &b, const Shape *bias) {
  if (a.empty() || b.size() < 2)
    return Status::error("matmul needs [.., K] @ [K, N], got " +
                         formatShape(a) + " @ " + formatShape(b));
  if (a.back() != b[b.size() - 2])
    return Status::error("matmul inner dimensions differ: " + formatShape(a) +
                         " @ " + formatShape(b));
  Shape result;
  if (b.size() == 2) {
    result = dropBack(a, 1);
  } else {
    // Batched: [.., M, K] @ [.., K, N] with identical leading dimensions.
    if (a.size() != b.size() || !std::equal(a.begin(), a.end() - 2, b.begin()))
      return Status::error("batched matmul needs equal leading dimensions: " +
                           formatShape(a) + " @ " + formatShape(b));
    result = dropBack(a, 1);
  }
  result.push_back(b.back());
  if (bias && (bias->size() != 1 || (*bias)[0] != b.back()))
    return Status::error("matmul bias must be " + formatShape({b.back()}) +
                         ", got " + formatShape(*bias));
  return result;
}

Expected<size_t> axis(int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    return Status::error("axis " + std::to_string(axis) +
                         " is out of range for rank " + std::to_string(rank));
  return static_cast<size_t>(axis < 0 ? axis + r : axis);
}

Expected<Shape> reduce(const Shape &x, int64_t ax, bool keepdim) {
  Expected<size_t> normalised = axis(ax, x.size());
  if (!normalised.ok())
    return Status::error(normalised.message() + " of " + formatShape(x));
  size_t a = *normalised;
  Shape result = x;
  if (keepdim)
    result[a] = 1;
  else
    result.erase(result.begin() + static_cast<std::ptrdiff_t>(a));
  return result;
}

Expected<Shape> embedding(const Shape &ids, const Shape &table) {
  if (table.size() != 2)
    return Status::error("embedding table must be [V, D], got " +
                         formatShape(table));
  Shape result = ids;
  result.push_back(table[1]);
  return result;
}

Status reshape(const Shape &x, const Shape &target) {
  // Static element counts (with overflow detection) and symbolic multisets.
  auto count = [](const Shape &s, int64_t &n, std::map<Dim, int> &syms) {
    n = 1;
    for (Dim d : s) {
      if (isSymbolic(d)) {
        ++syms[d];
        continue;
      }
      if (__builtin_mul_overflow(n, d, &n))
        return false;
    }
    return true;
  };
  int64_t nx, nt;
  std::map<Dim, int> sx, st;
  if (!count(x, nx, sx) || !count(target, nt, st))
    return Status::error("cannot reshape " + formatShape(x) + " to " +
                         formatShape(target) + ": element count overflows");
  if (sx != st)
    return Status::error("cannot reshape " + formatShape(x) + " to " +
                         formatShape(target) + ": symbolic dimensions differ");
  if (nx != nt)
    return Status::error("cannot reshape " + formatShape(x) + " to " +
                         formatShape(target) + ": element counts differ (" +
                         std::to_string(nx) + " vs " + std::to_string(nt) +
                         ")");
  return Status::success();
}

Expected<Shape> transpose(const Shape &x, const std::vector<int64_t> &perm) {
  std::vector<bool> seen(x.size(), false);
  bool ok = perm.size() == x.size();
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= static_cast<int64_t>(x.size()) || seen[p])
      ok = false;
    else
      seen[p] = true;
  }
  if (!ok)
    return Status::error("transpose permutation " + formatList(perm) +
                         " is not a permutation of the axes of " +
                         formatShape(x));
  Shape result(x.size());
  for (size_t i = 0; i < perm.size(); ++i)
    result[i] = x[perm[i]];
  return result;
}

Expected<std::vector<Shape>>
split(const Shape &x, const std::vector<int64_t> &sizes, int64_t ax) {
  Expected<size_t> normalised = axis(ax, x.size());
  if (!normalised.ok())
    return Status::error(normalised.message() + " of " + formatShape(x));
  size_t a = *normalised;
  if (isSymbolic(x[a]))
    return Status::error("cannot split the symbolic dimension " +
                         formatDim(x[a]) + " of " + formatShape(x));
  if (sizes.empty())
    return Status::error("split needs at least one size");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s <= 0)
      return Status::error("split sizes " + formatList(sizes) +
                           " must be positive");
    if (__builtin_add_overflow(total, s, &total))
      total = -1;
  }
  if (total != x[a])
    return Status::error("split sizes " + formatList(sizes) + " add up to " +
                         (total < 0 ? std::string("more than the dimension")
                                    : std::to_string(total)) +
                         ", but axis " + std::to_string(a) + " of " +
                         formatShape(x) + " is " + formatDim(x[a]));
  std::vector<Shape> results;
  for (int64_t s : sizes) {
    Shape r = x;
    r[a] = s;
    results.push_back(std::move(r));
  }
  return results;
}

Expected<Shape> concat(const std::vector<Shape> &xs, int64_t ax) {
  if (xs.empty())
    return Status::error("concat needs at least one input");
  const Shape &first = xs.front();
  Expected<size_t> normalised = axis(ax, first.size());
  if (!normalised.ok())
    return Status::error(normalised.message() + " of " + formatShape(first));
  size_t a = *normalised;
  Shape result = first;
  int64_t total = 0;
  for (const Shape &s : xs) {
    bool compatible = s.size() == first.size();
    for (size_t i = 0; compatible && i < s.size(); ++i)
      if (i != a && s[i] != first[i])
        compatible = false;
    if (!compatible)
      return Status::error("cannot concatenate " + formatShape(first) +
                           " and " + formatShape(s) + " along axis " +
                           std::to_string(a));
    if (isSymbolic(s[a]))
      return Status::error("cannot concatenate along the symbolic dimension " +
                           formatDim(s[a]) + " of " + formatShape(s));
    if (__builtin_add_overflow(total, s[a], &total))
      return Status::error("concatenated dimension overflows");
  }
  result[a] = total;
  return result;
}

Expected<Shape> slice(const Shape &x, int64_t ax, int64_t start, int64_t end) {
  Expected<size_t> normalised = axis(ax, x.size());
  if (!normalised.ok())
    return Status::error(normalised.message() + " of " + formatShape(x));
  size_t a = *normalised;
  if (isSymbolic(x[a]))
    return Status::error("cannot slice the symbolic dimension " +
                         formatDim(x[a]) + " of " + formatShape(x));
  if (end == kDimS) {
    // The first S rows of a static axis (a learned position table). Whether
    // S fits is known only when S is bound: checkSequenceFits.
    if (start != 0)
      return Status::error(
          "a slice that ends at S must start at 0, got start " +
          std::to_string(start));
    Shape result = x;
    result[a] = kDimS;
    return result;
  }
  if (start < 0 || start >= end || end > x[a])
    return Status::error("slice [" + std::to_string(start) + ", " +
                         std::to_string(end) + ") is out of range for axis " +
                         std::to_string(a) + " of " + formatShape(x));
  Shape result = x;
  result[a] = end - start;
  return result;
}

Status norm(const Shape &x, const Shape &w, const Shape *b) {
  if (x.empty())
    return Status::error("cannot normalise the scalar " + formatShape(x));
  Shape expected = {x.back()};
  if (w != expected)
    return Status::error("weight " + formatShape(w) +
                         " does not match the last dimension of " +
                         formatShape(x));
  if (b && *b != expected)
    return Status::error("bias " + formatShape(*b) +
                         " does not match the last dimension of " +
                         formatShape(x));
  return Status::success();
}

namespace {
/// \p v as %g writes it ("0.05").
std::string shortNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
} // namespace

RopeDims ropeDims(double fraction, int64_t d) {
  RopeDims r;
  const double product = static_cast<double>(d) * fraction;
  if (!(product >= 1) || !(product <= static_cast<double>(d)))
    return r; // no frequency (or a fraction outside (0, 1])
  r.freq = static_cast<int64_t>(std::floor(product)); // Python's int()
  r.rotary = (r.freq + 1) / 2 * 2;
  return r;
}

Status rope(const Shape &x, double fraction) {
  if (x.size() != 4)
    return Status::error("rope expects [B, S, H, D], got " + formatShape(x));
  Dim d = x[3];
  if (isSymbolic(d))
    return Status::error("rope needs a static head dimension, got " +
                         formatShape(x));
  if (!std::isfinite(fraction) || fraction <= 0 || fraction > 1)
    return Status::error("rope fraction must be in (0, 1]");
  RopeDims r = ropeDims(fraction, d);
  if (r.freq < 1)
    return Status::error("rope fraction " + shortNumber(fraction) + " of the " +
                         std::to_string(d) + " dimensions of " +
                         formatShape(x) +
                         " gives no rotary frequency (int(D * fraction) "
                         "must be at least 1)");
  if (r.rotary > d)
    return Status::error("rope rotates " + std::to_string(r.rotary) +
                         " dimensions (int(D * fraction) rounded up to even) "
                         "of the " +
                         std::to_string(d) + " of " + formatShape(x));
  return Status::success();
}

Expected<Shape> attention(const Shape &q, const Shape &k, const Shape &v) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    return Status::error("attention expects q, k and v as [B, S, H, D], got " +
                         formatShape(q) + ", " + formatShape(k) + " and " +
                         formatShape(v));
  if (q[0] != k[0] || q[1] != k[1] || q[3] != k[3])
    return Status::error("attention q " + formatShape(q) + " and k " +
                         formatShape(k) +
                         " differ in batch, sequence or head size");
  if (v != k)
    return Status::error("attention v " + formatShape(v) +
                         " must have the shape of k " + formatShape(k));
  Dim hq = q[2], hkv = k[2];
  if (isSymbolic(hq) || isSymbolic(hkv) || hkv <= 0 || hq % hkv != 0)
    return Status::error("attention key/value heads " + formatDim(hkv) +
                         " do not divide query heads " + formatDim(hq) +
                         ": q " + formatShape(q) + ", k " + formatShape(k));
  return q;
}

Status crossEntropy(const Shape &logits, const Shape &targets) {
  if (logits.size() != 3)
    return Status::error("cross_entropy logits must be [B, S, V], got " +
                         formatShape(logits));
  if (targets != dropBack(logits, 1))
    return Status::error("cross_entropy targets " + formatShape(targets) +
                         " do not match logits " + formatShape(logits));
  return Status::success();
}

Status moe(const Shape &h, const Shape &router, int64_t numExperts) {
  if (h.size() != 3)
    return Status::error("moe input must be [B, S, D], got " + formatShape(h));
  Shape expected = {h[2], numExperts};
  if (router != expected)
    return Status::error("moe router must be " + formatShape(expected) +
                         " for input " + formatShape(h) + " and " +
                         std::to_string(numExperts) + " experts, got " +
                         formatShape(router));
  return Status::success();
}

Status linearCrossEntropy(const Shape &x, const Shape &w, bool transposeWeight,
                          const Shape &targets) {
  if (w.size() != 2 || std::any_of(w.begin(), w.end(), isSymbolic))
    return Status::error("weight must be a static matrix, got " +
                         formatShape(w));
  Dim d = transposeWeight ? w[1] : w[0];
  if (x.empty() || x.back() != d)
    return Status::error("input " + formatShape(x) + " does not match weight " +
                         formatShape(w) +
                         (transposeWeight ? " (transposed)" : ""));
  Shape logits = x;
  logits.back() = transposeWeight ? w[0] : w[1];
  return crossEntropy(logits, targets);
}

Expected<Shape> weightGrad(const Shape &x, const Shape &dy) {
  if (x.empty() || dy.empty() || x.size() != dy.size() ||
      !std::equal(x.begin(), x.end() - 1, dy.begin()))
    return Status::error("input " + formatShape(x) + " and gradient " +
                         formatShape(dy) + " must share their leading dims");
  return Shape{x.back(), dy.back()};
}

Status reduceTo(const Shape &from, const Shape &to) {
  Expected<Shape> out = broadcast(from, to);
  if (!out.ok() || *out != from)
    return Status::error("cannot reduce " + formatShape(from) + " to " +
                         formatShape(to) +
                         ": the result must broadcast to the input");
  return Status::success();
}

Status pad(const Shape &x, const Shape &out, int64_t axis, int64_t start,
           int64_t end) {
  if (x.size() != out.size() || axis < 0 ||
      axis >= static_cast<int64_t>(x.size()))
    return Status::error("pad axis " + std::to_string(axis) +
                         " is out of range for " + formatShape(x) + " -> " +
                         formatShape(out));
  bool symbolicEnd = end == kDimS && start == 0 && x[axis] == kDimS;
  if (isSymbolic(out[axis]) || start < 0 ||
      (!symbolicEnd && (end > out[axis] || end - start != x[axis])))
    return Status::error("[" + std::to_string(start) + ", " +
                         (end == kDimS ? formatDim(end) : std::to_string(end)) +
                         ") does not place " + formatShape(x) + " inside " +
                         formatShape(out));
  for (size_t i = 0; i < x.size(); ++i)
    if (static_cast<int64_t>(i) != axis && x[i] != out[i])
      return Status::error("only the padded axis may differ: " +
                           formatShape(x) + " -> " + formatShape(out));
  return Status::success();
}

Status fusedValue(const Shape &v, const Shape &iteration) {
  bool isStatic = std::none_of(v.begin(), v.end(), isSymbolic);
  int64_t numel = 1;
  for (Dim d : v)
    numel *= isSymbolic(d) ? 2 : d;
  if ((isStatic && numel == 1) || v == iteration)
    return Status::success();
  if (!iteration.empty()) {
    Shape rowKeep = iteration, rowDrop = dropBack(iteration, 1);
    rowKeep.back() = 1;
    if (v == rowKeep || v == rowDrop)
      return Status::success();
  }
  if (isStatic && v.size() <= iteration.size() &&
      std::equal(v.begin(), v.end(), iteration.end() - v.size()))
    return Status::success();
  return Status::error("shape " + formatShape(v) +
                       " is neither the iteration shape " +
                       formatShape(iteration) +
                       ", a row of it, a static suffix of it nor a scalar");
}

} // namespace rules

} // namespace mtc
