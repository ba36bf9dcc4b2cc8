//===- Movement.cpp - Transpose, slice, concat, pad on the GPU ------------===//
//
// Part of mtc. The host side of movement.cu; the kernels' banner has the
// launch rules this file follows.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/ops/Movement.h"

#include <algorithm>
#include <string>

namespace mtc::cuda::ops {

namespace {

constexpr unsigned kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

/// The grid of a grid-stride launch over \p total output elements.
Dim3 gridFor(int64_t total) {
  int64_t blocks = (total + kThreads - 1) / kThreads;
  return {static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, kMaxBlocks))};
}

std::string entry(const char *name, DType t) {
  return std::string(name) + "_" + dtypeSuffix(t);
}

std::string sizes3(int64_t outer, int64_t n, int64_t inner) {
  return "[" + std::to_string(outer) + ", " + std::to_string(n) + ", " +
         std::to_string(inner) + "]";
}

std::string list(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// An error unless [start, end) is a range of the middle axis of
/// [outer, n, inner] (every size non-negative).
Status checkRange(const char *op, int64_t outer, int64_t n, int64_t inner,
                  int64_t start, int64_t end) {
  if (outer < 0 || n < 0 || inner < 0)
    return Status::error(std::string(op) + ": negative size in " +
                         sizes3(outer, n, inner));
  if (start < 0 || start > end || end > n)
    return Status::error(std::string(op) + ": range [" + std::to_string(start) +
                         ", " + std::to_string(end) +
                         ") is not within the middle axis of " +
                         sizes3(outer, n, inner));
  return Status::success();
}

/// One concat_* launch over at most kMaxConcatParts parts of non-zero size.
Status concatGroup(const Launch &L, const std::vector<DevPtr> &parts,
                   const std::vector<int64_t> &sizes, DevPtr y, int64_t outer,
                   int64_t inner, DType dtype) {
  mtc_cuda::ConcatParts p{};
  p.count = static_cast<int>(parts.size());
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    p.part[i] = reinterpret_cast<const void *>(parts[i]);
    p.size[i] = sizes[i];
    total += sizes[i];
  }
  long long o = outer, in = inner;
  return L.kernel("movement.cu", entry("concat", dtype),
                  gridFor(outer * total * inner), {kThreads}, 0,
                  {&y, &p, &o, &in});
}

} // namespace

Expected<mtc_cuda::TransposeShape>
transposeShape(const std::vector<int64_t> &shape,
               const std::vector<int64_t> &perm, const char *what) {
  const size_t rank = shape.size();
  std::vector<bool> seen(rank, false);
  bool valid = perm.size() == rank;
  for (size_t i = 0; valid && i < rank; ++i) {
    valid = perm[i] >= 0 && perm[i] < int64_t(rank) && !seen[perm[i]];
    if (valid)
      seen[perm[i]] = true;
  }
  if (!valid)
    return Status::error(std::string(what) + ": perm " + list(perm) +
                         " is not a permutation of the dims of shape " +
                         list(shape));
  for (int64_t d : shape)
    if (d < 0)
      return Status::error(std::string(what) + ": negative dim in shape " +
                           list(shape));
  // Dims of size 1 move nothing: drop them, renumbering the others.
  std::vector<int64_t> newIndex(rank, -1), kept;
  for (size_t d = 0; d < rank; ++d)
    if (shape[d] != 1) {
      newIndex[d] = int64_t(kept.size());
      kept.push_back(shape[d]);
    }
  std::vector<int64_t> order; // y's dims as indices into kept
  for (int64_t d : perm)
    if (newIndex[d] >= 0)
      order.push_back(newIndex[d]);
  // Runs of y dims that are consecutive x dims become one dim.
  std::vector<int64_t> runOf(kept.size(), -1); // x dim -> its run
  std::vector<int64_t> runFirst;               // run -> its first x dim
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0 && order[i] == order[i - 1] + 1) {
      runOf[order[i]] = runOf[order[i - 1]];
      continue;
    }
    runOf[order[i]] = int64_t(runFirst.size());
    runFirst.push_back(order[i]);
  }
  // The merged x dims in x order, each the product of its run.
  std::vector<int64_t> xRuns; // x order -> run
  for (size_t d = 0; d < kept.size(); ++d)
    if (d == 0 || runOf[d] != runOf[d - 1])
      xRuns.push_back(runOf[d]);
  if (xRuns.size() > size_t(mtc_cuda::kMaxDims))
    return Status::error(std::string(what) + ": shape " + list(shape) +
                         " perm " + list(perm) + " leaves " +
                         std::to_string(xRuns.size()) +
                         " dims after merging; the kernel takes at most " +
                         std::to_string(mtc_cuda::kMaxDims));
  mtc_cuda::TransposeShape s{};
  if (xRuns.empty()) { // every dim of size 1: a copy of one element
    s.rank = 1;
    s.shape[0] = 1;
    s.perm[0] = 0;
    return s;
  }
  s.rank = static_cast<int>(xRuns.size());
  std::vector<int64_t> runPos(runFirst.size());
  for (size_t i = 0; i < xRuns.size(); ++i) {
    runPos[xRuns[i]] = int64_t(i);
    s.shape[i] = 1;
  }
  for (size_t d = 0; d < kept.size(); ++d)
    s.shape[runPos[runOf[d]]] *= kept[d];
  for (size_t r = 0; r < runFirst.size(); ++r)
    s.perm[r] = static_cast<int>(runPos[r]);
  return s;
}

Status transpose(const Launch &L, DevPtr x, const std::vector<int64_t> &shape,
                 const std::vector<int64_t> &perm, DevPtr y, DType dtype) {
  Expected<mtc_cuda::TransposeShape> s = transposeShape(shape, perm);
  if (!s)
    return s.status();
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  if (total == 0)
    return Status::success();
  mtc_cuda::TransposeShape arg = *s;
  return L.kernel("movement.cu", entry("transpose", dtype), gridFor(total),
                  {kThreads}, 0, {&x, &y, &arg});
}

Status slice(const Launch &L, DevPtr x, DevPtr y, int64_t outer, int64_t n,
             int64_t inner, int64_t start, int64_t end, DType dtype) {
  if (Status s = checkRange("slice", outer, n, inner, start, end); !s)
    return s;
  const int64_t total = outer * (end - start) * inner;
  if (total == 0)
    return Status::success();
  long long o = outer, nn = n, in = inner, b = start, e = end;
  return L.kernel("movement.cu", entry("slice", dtype), gridFor(total),
                  {kThreads}, 0, {&x, &y, &o, &nn, &in, &b, &e});
}

Status pad(const Launch &L, DevPtr x, DevPtr y, int64_t outer, int64_t n,
           int64_t inner, int64_t start, int64_t end, DType dtype) {
  if (Status s = checkRange("pad", outer, n, inner, start, end); !s)
    return s;
  const int64_t total = outer * n * inner;
  if (total == 0)
    return Status::success();
  long long o = outer, nn = n, in = inner, b = start, e = end;
  return L.kernel("movement.cu", entry("pad", dtype), gridFor(total),
                  {kThreads}, 0, {&x, &y, &o, &nn, &in, &b, &e});
}

Status concat(const Launch &L, const std::vector<DevPtr> &parts,
              const std::vector<int64_t> &sizes, DevPtr y, int64_t outer,
              int64_t inner, DType dtype) {
  if (parts.size() != sizes.size())
    return Status::error("concat: " + std::to_string(parts.size()) +
                         " parts but " + std::to_string(sizes.size()) +
                         " sizes");
  if (outer < 0 || inner < 0)
    return Status::error("concat: negative size (outer " +
                         std::to_string(outer) + ", inner " +
                         std::to_string(inner) + ")");
  // Parts of size 0 contribute nothing (and may be null).
  std::vector<DevPtr> live;
  std::vector<int64_t> liveSizes;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (sizes[i] < 0)
      return Status::error("concat: part " + std::to_string(i) +
                           " has negative size " + std::to_string(sizes[i]));
    if (sizes[i] == 0)
      continue;
    if (!parts[i])
      return Status::error("concat: part " + std::to_string(i) + " is null");
    live.push_back(parts[i]);
    liveSizes.push_back(sizes[i]);
  }
  if (live.empty() || outer == 0 || inner == 0)
    return Status::success();
  const size_t kGroup = mtc_cuda::kMaxConcatParts;
  if (live.size() <= kGroup)
    return concatGroup(L, live, liveSizes, y, outer, inner, dtype);
  // Too many parts for one launch: each group of kGroup into a scratch
  // tensor [outer, sum of its sizes, inner], then the groups (recursively).
  std::vector<DevPtr> groups;
  std::vector<int64_t> groupSizes;
  for (size_t first = 0; first < live.size(); first += kGroup) {
    size_t last = std::min(live.size(), first + kGroup);
    std::vector<DevPtr> gp(live.begin() + first, live.begin() + last);
    std::vector<int64_t> gs(liveSizes.begin() + first,
                            liveSizes.begin() + last);
    int64_t rows = 0;
    for (int64_t s : gs)
      rows += s;
    Expected<DevPtr> tmp = L.scratch(outer * rows * inner * dtypeBytes(dtype));
    if (!tmp)
      return Status::error("concat: " + tmp.message());
    if (Status s = concatGroup(L, gp, gs, *tmp, outer, inner, dtype); !s)
      return s;
    groups.push_back(*tmp);
    groupSizes.push_back(rows);
  }
  return concat(L, groups, groupSizes, y, outer, inner, dtype);
}

Status broadcastRows(const Launch &L, DevPtr x, DevPtr y, int64_t rows,
                     int64_t n, DType dtype) {
  if (rows < 0 || n < 0)
    return Status::error("broadcastRows: negative size (rows " +
                         std::to_string(rows) + ", n " + std::to_string(n) +
                         ")");
  if (rows == 0 || n == 0)
    return Status::success();
  long long r = rows, nn = n;
  return L.kernel("movement.cu", entry("broadcast_rows", dtype),
                  gridFor(rows * n), {kThreads}, 0, {&x, &y, &r, &nn});
}

} // namespace mtc::cuda::ops
