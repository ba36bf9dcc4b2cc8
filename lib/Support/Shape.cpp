//===- Shape.cpp - Shapes with symbolic dimensions ------------------------===//
//
// Part of mtc. The shape rules shared by Sema and the mt dialect's verifiers.
// Every rule is pure: it reads shapes and writes either the result shape or a
// user-facing message (lowercase, no trailing period, both shapes shown).
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Shape.h"

#include <algorithm>
#include <cmath>
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

bool broadcast(const Shape &a, const Shape &b, Shape &out, std::string &err) {
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
    else {
      err = "cannot broadcast " + formatShape(a) + " and " + formatShape(b);
      return false;
    }
    result[rank - 1 - i] = r;
  }
  out = std::move(result);
  return true;
}

bool matmul(const Shape &a, const Shape &b, const Shape *bias, Shape &out,
            std::string &err) {
  if (a.empty() || b.size() < 2) {
    err = "matmul needs [.., K] @ [K, N], got " + formatShape(a) + " @ " +
          formatShape(b);
    return false;
  }
  if (a.back() != b[b.size() - 2]) {
    err = "matmul inner dimensions differ: " + formatShape(a) + " @ " +
          formatShape(b);
    return false;
  }
  Shape result;
  if (b.size() == 2) {
    result = dropBack(a, 1);
  } else {
    // Batched: [.., M, K] @ [.., K, N] with identical leading dimensions.
    if (a.size() != b.size() ||
        !std::equal(a.begin(), a.end() - 2, b.begin())) {
      err = "batched matmul needs equal leading dimensions: " + formatShape(a) +
            " @ " + formatShape(b);
      return false;
    }
    result = dropBack(a, 1);
  }
  result.push_back(b.back());
  if (bias && (bias->size() != 1 || (*bias)[0] != b.back())) {
    err = "matmul bias must be " + formatShape({b.back()}) + ", got " +
          formatShape(*bias);
    return false;
  }
  out = std::move(result);
  return true;
}

bool axis(int64_t axis, size_t rank, size_t &out, std::string &err) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    err = "axis " + std::to_string(axis) + " is out of range for rank " +
          std::to_string(rank);
    return false;
  }
  out = static_cast<size_t>(axis < 0 ? axis + r : axis);
  return true;
}

bool reduce(const Shape &x, int64_t ax, bool keepdim, Shape &out,
            std::string &err) {
  size_t a;
  if (!axis(ax, x.size(), a, err)) {
    err += " of " + formatShape(x);
    return false;
  }
  Shape result = x;
  if (keepdim)
    result[a] = 1;
  else
    result.erase(result.begin() + static_cast<std::ptrdiff_t>(a));
  out = std::move(result);
  return true;
}

bool embedding(const Shape &ids, const Shape &table, Shape &out,
               std::string &err) {
  if (table.size() != 2) {
    err = "embedding table must be [V, D], got " + formatShape(table);
    return false;
  }
  Shape result = ids;
  result.push_back(table[1]);
  out = std::move(result);
  return true;
}

bool reshape(const Shape &x, const Shape &target, std::string &err) {
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
  if (!count(x, nx, sx) || !count(target, nt, st)) {
    err = "cannot reshape " + formatShape(x) + " to " + formatShape(target) +
          ": element count overflows";
    return false;
  }
  if (sx != st) {
    err = "cannot reshape " + formatShape(x) + " to " + formatShape(target) +
          ": symbolic dimensions differ";
    return false;
  }
  if (nx != nt) {
    err = "cannot reshape " + formatShape(x) + " to " + formatShape(target) +
          ": element counts differ (" + std::to_string(nx) + " vs " +
          std::to_string(nt) + ")";
    return false;
  }
  return true;
}

bool transpose(const Shape &x, const std::vector<int64_t> &perm, Shape &out,
               std::string &err) {
  std::vector<bool> seen(x.size(), false);
  bool ok = perm.size() == x.size();
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= static_cast<int64_t>(x.size()) || seen[p])
      ok = false;
    else
      seen[p] = true;
  }
  if (!ok) {
    err = "transpose permutation " + formatList(perm) +
          " is not a permutation of the axes of " + formatShape(x);
    return false;
  }
  Shape result(x.size());
  for (size_t i = 0; i < perm.size(); ++i)
    result[i] = x[perm[i]];
  out = std::move(result);
  return true;
}

bool split(const Shape &x, const std::vector<int64_t> &sizes, int64_t ax,
           std::vector<Shape> &out, std::string &err) {
  size_t a;
  if (!axis(ax, x.size(), a, err)) {
    err += " of " + formatShape(x);
    return false;
  }
  if (isSymbolic(x[a])) {
    err = "cannot split the symbolic dimension " + formatDim(x[a]) + " of " +
          formatShape(x);
    return false;
  }
  if (sizes.empty()) {
    err = "split needs at least one size";
    return false;
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s <= 0) {
      err = "split sizes " + formatList(sizes) + " must be positive";
      return false;
    }
    if (__builtin_add_overflow(total, s, &total))
      total = -1;
  }
  if (total != x[a]) {
    err = "split sizes " + formatList(sizes) + " add up to " +
          (total < 0 ? std::string("more than the dimension")
                     : std::to_string(total)) +
          ", but axis " + std::to_string(a) + " of " + formatShape(x) + " is " +
          formatDim(x[a]);
    return false;
  }
  std::vector<Shape> results;
  for (int64_t s : sizes) {
    Shape r = x;
    r[a] = s;
    results.push_back(std::move(r));
  }
  out = std::move(results);
  return true;
}

bool concat(const std::vector<Shape> &xs, int64_t ax, Shape &out,
            std::string &err) {
  if (xs.empty()) {
    err = "concat needs at least one input";
    return false;
  }
  const Shape &first = xs.front();
  size_t a;
  if (!axis(ax, first.size(), a, err)) {
    err += " of " + formatShape(first);
    return false;
  }
  Shape result = first;
  int64_t total = 0;
  for (const Shape &s : xs) {
    bool compatible = s.size() == first.size();
    for (size_t i = 0; compatible && i < s.size(); ++i)
      if (i != a && s[i] != first[i])
        compatible = false;
    if (!compatible) {
      err = "cannot concatenate " + formatShape(first) + " and " +
            formatShape(s) + " along axis " + std::to_string(a);
      return false;
    }
    if (isSymbolic(s[a])) {
      err = "cannot concatenate along the symbolic dimension " +
            formatDim(s[a]) + " of " + formatShape(s);
      return false;
    }
    if (__builtin_add_overflow(total, s[a], &total)) {
      err = "concatenated dimension overflows";
      return false;
    }
  }
  result[a] = total;
  out = std::move(result);
  return true;
}

bool slice(const Shape &x, int64_t ax, int64_t start, int64_t end, Shape &out,
           std::string &err) {
  size_t a;
  if (!axis(ax, x.size(), a, err)) {
    err += " of " + formatShape(x);
    return false;
  }
  if (isSymbolic(x[a])) {
    err = "cannot slice the symbolic dimension " + formatDim(x[a]) + " of " +
          formatShape(x);
    return false;
  }
  if (end == kDimS) {
    // The first S rows of a static axis (a learned position table). Whether
    // S fits is known only when S is bound: checkSequenceFits.
    if (start != 0) {
      err = "a slice that ends at S must start at 0, got start " +
            std::to_string(start);
      return false;
    }
    Shape result = x;
    result[a] = kDimS;
    out = std::move(result);
    return true;
  }
  if (start < 0 || start >= end || end > x[a]) {
    err = "slice [" + std::to_string(start) + ", " + std::to_string(end) +
          ") is out of range for axis " + std::to_string(a) + " of " +
          formatShape(x);
    return false;
  }
  Shape result = x;
  result[a] = end - start;
  out = std::move(result);
  return true;
}

bool norm(const Shape &x, const Shape &w, const Shape *b, std::string &err) {
  if (x.empty()) {
    err = "cannot normalise the scalar " + formatShape(x);
    return false;
  }
  Shape expected = {x.back()};
  if (w != expected) {
    err = "weight " + formatShape(w) +
          " does not match the last dimension of " + formatShape(x);
    return false;
  }
  if (b && *b != expected) {
    err = "bias " + formatShape(*b) + " does not match the last dimension of " +
          formatShape(x);
    return false;
  }
  return true;
}

bool rope(const Shape &x, double fraction, std::string &err) {
  if (x.size() != 4) {
    err = "rope expects [B, S, H, D], got " + formatShape(x);
    return false;
  }
  Dim d = x[3];
  if (isSymbolic(d)) {
    err = "rope needs a static head dimension, got " + formatShape(x);
    return false;
  }
  if (!std::isfinite(fraction) || fraction <= 0 || fraction > 1) {
    err = "rope fraction must be in (0, 1]";
    return false;
  }
  double rotary = std::round(fraction * static_cast<double>(d));
  if (rotary <= 0 || rotary > static_cast<double>(d) ||
      static_cast<int64_t>(rotary) % 2 != 0) {
    err = "rope rotates " + std::to_string(static_cast<int64_t>(rotary)) +
          " of the " + std::to_string(d) + " dimensions of " + formatShape(x) +
          ", which must be even and positive";
    return false;
  }
  return true;
}

bool attention(const Shape &q, const Shape &k, const Shape &v, Shape &out,
               std::string &err) {
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) {
    err = "attention expects q, k and v as [B, S, H, D], got " +
          formatShape(q) + ", " + formatShape(k) + " and " + formatShape(v);
    return false;
  }
  if (q[0] != k[0] || q[1] != k[1] || q[3] != k[3]) {
    err = "attention q " + formatShape(q) + " and k " + formatShape(k) +
          " differ in batch, sequence or head size";
    return false;
  }
  if (v != k) {
    err = "attention v " + formatShape(v) + " must have the shape of k " +
          formatShape(k);
    return false;
  }
  Dim hq = q[2], hkv = k[2];
  if (isSymbolic(hq) || isSymbolic(hkv) || hkv <= 0 || hq % hkv != 0) {
    err = "attention key/value heads " + formatDim(hkv) +
          " do not divide query heads " + formatDim(hq) + ": q " +
          formatShape(q) + ", k " + formatShape(k);
    return false;
  }
  out = q;
  return true;
}

bool crossEntropy(const Shape &logits, const Shape &targets, std::string &err) {
  if (logits.size() != 3) {
    err = "cross_entropy logits must be [B, S, V], got " + formatShape(logits);
    return false;
  }
  if (targets != dropBack(logits, 1)) {
    err = "cross_entropy targets " + formatShape(targets) +
          " do not match logits " + formatShape(logits);
    return false;
  }
  return true;
}

bool moe(const Shape &h, const Shape &router, int64_t numExperts,
         std::string &err) {
  if (h.size() != 3) {
    err = "moe input must be [B, S, D], got " + formatShape(h);
    return false;
  }
  Shape expected = {h[2], numExperts};
  if (router != expected) {
    err = "moe router must be " + formatShape(expected) + " for input " +
          formatShape(h) + " and " + std::to_string(numExperts) +
          " experts, got " + formatShape(router);
    return false;
  }
  return true;
}

bool linearCrossEntropy(const Shape &x, const Shape &w, bool transposeWeight,
                        const Shape &targets, std::string &err) {
  if (w.size() != 2 || std::any_of(w.begin(), w.end(), isSymbolic)) {
    err = "weight must be a static matrix, got " + formatShape(w);
    return false;
  }
  Dim d = transposeWeight ? w[1] : w[0];
  if (x.empty() || x.back() != d) {
    err = "input " + formatShape(x) + " does not match weight " +
          formatShape(w) + (transposeWeight ? " (transposed)" : "");
    return false;
  }
  Shape logits = x;
  logits.back() = transposeWeight ? w[0] : w[1];
  return crossEntropy(logits, targets, err);
}

bool weightGrad(const Shape &x, const Shape &dy, Shape &out, std::string &err) {
  if (x.empty() || dy.empty() || x.size() != dy.size() ||
      !std::equal(x.begin(), x.end() - 1, dy.begin())) {
    err = "input " + formatShape(x) + " and gradient " + formatShape(dy) +
          " must share their leading dims";
    return false;
  }
  out = {x.back(), dy.back()};
  return true;
}

bool reduceTo(const Shape &from, const Shape &to, std::string &err) {
  Shape out;
  if (!broadcast(from, to, out, err) || out != from) {
    err = "cannot reduce " + formatShape(from) + " to " + formatShape(to) +
          ": the result must broadcast to the input";
    return false;
  }
  return true;
}

bool pad(const Shape &x, const Shape &out, int64_t axis, int64_t start,
         int64_t end, std::string &err) {
  if (x.size() != out.size() || axis < 0 ||
      axis >= static_cast<int64_t>(x.size())) {
    err = "pad axis " + std::to_string(axis) + " is out of range for " +
          formatShape(x) + " -> " + formatShape(out);
    return false;
  }
  bool symbolicEnd = end == kDimS && start == 0 && x[axis] == kDimS;
  if (isSymbolic(out[axis]) || start < 0 ||
      (!symbolicEnd && (end > out[axis] || end - start != x[axis]))) {
    err = "[" + std::to_string(start) + ", " +
          (end == kDimS ? formatDim(end) : std::to_string(end)) +
          ") does not place " + formatShape(x) + " inside " + formatShape(out);
    return false;
  }
  for (size_t i = 0; i < x.size(); ++i)
    if (static_cast<int64_t>(i) != axis && x[i] != out[i]) {
      err = "only the padded axis may differ: " + formatShape(x) + " -> " +
            formatShape(out);
      return false;
    }
  return true;
}

bool fusedValue(const Shape &v, const Shape &iteration, std::string &err) {
  bool isStatic = std::none_of(v.begin(), v.end(), isSymbolic);
  int64_t numel = 1;
  for (Dim d : v)
    numel *= isSymbolic(d) ? 2 : d;
  if ((isStatic && numel == 1) || v == iteration)
    return true;
  if (!iteration.empty()) {
    Shape rowKeep = iteration, rowDrop = dropBack(iteration, 1);
    rowKeep.back() = 1;
    if (v == rowKeep || v == rowDrop)
      return true;
  }
  if (isStatic && v.size() <= iteration.size() &&
      std::equal(v.begin(), v.end(), iteration.end() - v.size()))
    return true;
  err = "shape " + formatShape(v) + " is neither the iteration shape " +
        formatShape(iteration) +
        ", a row of it, a static suffix of it nor a scalar";
  return false;
}

} // namespace rules

} // namespace mtc
