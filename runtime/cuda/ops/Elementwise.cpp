//===- Elementwise.cpp - Launchers of the elementwise kernels -------------===//
//
// Part of mtc.
//
// Geometry (Geometry.h): unary, unaryGrad and binary are grid-stride loops
// (elementwise.cu), so the grid only sets the parallelism: 256 threads a
// block, one thread per 16-byte pack of outputs, at most 2048 blocks (a few
// waves on any current GPU; each thread then loops). reduceTo splits
// each output's reduced indices into `chunks` ranges (reduce.cu's
// mtc_reduce_to_f32) so that a bias gradient (few outputs, many rows) still
// fills the GPU; the partials are summed in chunk order by
// mtc_sum_partials_f32. A reduction of whole contiguous rows goes to the
// row form of mtc_reduce_f32 instead.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ops/Elementwise.h"

#include "runtime/cuda/ops/Geometry.h"
#include "runtime/cuda/ops/Reduce.h"

#include <algorithm>
#include <climits>
#include <string>

namespace mtc::cuda::ops {
namespace {

using geometry::kStrideBlock;
using geometry::strideBlocks;

std::string shapeString(const std::vector<int64_t> &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t product(const std::vector<int64_t> &s) {
  int64_t p = 1;
  for (int64_t d : s)
    p *= d;
  return p;
}

/// Merged dims with, per operand, whether it is broadcast there (stride 0).
struct Merged {
  std::vector<int64_t> size;
  std::vector<bool> aLive, bLive;
};

/// runtime/cpu's collapse (Elementwise.cpp): operands right-aligned against
/// \p out; size-1 output dims dropped; adjacent dims with the same pattern
/// (a broadcast?, b broadcast?) merged. No dims left (a single element):
/// one dim of 1, both live.
Expected<Merged> merge(const std::vector<int64_t> &out,
                       const std::vector<int64_t> &a,
                       const std::vector<int64_t> &b, const char *what,
                       const char *aName, const char *bName) {
  for (int64_t d : out)
    if (d < 0)
      return Status::error(std::string(what) + ": negative dimension in " +
                           shapeString(out));
  auto check = [&](const std::vector<int64_t> &s, const char *name) {
    bool ok = s.size() <= out.size();
    for (size_t i = 0; ok && i < s.size(); ++i) {
      int64_t o = out[out.size() - s.size() + i];
      ok = s[i] == o || s[i] == 1;
    }
    return ok ? Status::success()
              : Status::error(std::string(what) + ": " + name + "'s shape " +
                              shapeString(s) + " does not broadcast to " +
                              shapeString(out));
  };
  if (Status s = check(a, aName); !s)
    return s;
  if (Status s = check(b, bName); !s)
    return s;
  auto dim = [&](const std::vector<int64_t> &s, size_t i) -> int64_t {
    size_t lead = out.size() - s.size();
    return i < lead ? 1 : s[i - lead];
  };
  Merged m;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1)
      continue;
    bool pa = dim(a, i) != 1, pb = dim(b, i) != 1;
    if (!m.size.empty() && m.aLive.back() == pa && m.bLive.back() == pb) {
      m.size.back() *= out[i];
      continue;
    }
    m.size.push_back(out[i]);
    m.aLive.push_back(pa);
    m.bLive.push_back(pb);
  }
  if (m.size.empty()) {
    m.size.push_back(1);
    m.aLive.push_back(true);
    m.bLive.push_back(true);
  }
  if (m.size.size() > static_cast<size_t>(mtc_cuda::kMaxDims))
    return Status::error(
        std::string(what) + ": " + shapeString(out) + " leaves " +
        std::to_string(m.size.size()) +
        " dimensions after merging; the kernels take at most " +
        std::to_string(mtc_cuda::kMaxDims));
  return m;
}

} // namespace

Expected<mtc_cuda::BroadcastShape>
broadcastShape(const std::vector<int64_t> &outShape,
               const std::vector<int64_t> &aShape,
               const std::vector<int64_t> &bShape, const char *what) {
  Expected<Merged> m = merge(outShape, aShape, bShape, what, "a", "b");
  if (!m)
    return m.status();
  mtc_cuda::BroadcastShape s{};
  s.rank = static_cast<int>(m->size.size());
  int64_t sa = 1, sb = 1;
  for (int i = s.rank; i-- > 0;) {
    s.size[i] = m->size[i];
    s.strideA[i] = m->aLive[i] ? sa : 0;
    s.strideB[i] = m->bLive[i] ? sb : 0;
    if (m->aLive[i])
      sa *= m->size[i];
    if (m->bLive[i])
      sb *= m->size[i];
  }
  return s;
}

Expected<mtc_cuda::ReduceToShape>
reduceToShape(const std::vector<int64_t> &from,
              const std::vector<int64_t> &to) {
  // Operand a = x (never broadcast), b = y (broadcast on reduced dims).
  Expected<Merged> m = merge(from, from, to, "reduceTo", "x", "the result");
  if (!m)
    return m.status();
  mtc_cuda::ReduceToShape s{};
  s.outN = s.redN = 1;
  std::vector<int64_t> stride(m->size.size());
  int64_t st = 1;
  for (size_t i = m->size.size(); i-- > 0;) {
    stride[i] = st;
    st *= m->size[i];
  }
  for (size_t i = 0; i < m->size.size(); ++i) {
    if (m->size[i] == 1) // the single-element case: nothing to iterate
      continue;
    if (m->bLive[i]) {
      s.keptSize[s.keptRank] = m->size[i];
      s.keptStride[s.keptRank++] = stride[i];
      s.outN *= m->size[i];
    } else {
      s.redSize[s.redRank] = m->size[i];
      s.redStride[s.redRank++] = stride[i];
      s.redN *= m->size[i];
    }
  }
  return s;
}

Status unary(const Launch &L, cpu::Unary f, DevPtr x, DevPtr y, int64_t n,
             float param, DType type) {
  if (n < 0)
    return Status::error("unary: negative element count " + std::to_string(n));
  if (n == 0)
    return Status::success();
  long long count = n;
  int op = static_cast<int>(f);
  return L
      .kernel("elementwise.cu", std::string("mtc_unary_") + dtypeSuffix(type),
              {strideBlocks(n, type)}, {kStrideBlock}, 0,
              {&x, &y, &count, &op, &param})
      .withPrefix("unary");
}

Status convert(const Launch &L, DevPtr x, DType from, DevPtr y, DType to,
               int64_t n) {
  if (n < 0)
    return Status::error("convert: negative element count " +
                         std::to_string(n));
  if (n == 0)
    return Status::success();
  if (from == to)
    return x == y ? Status::success() : L.copy(y, x, n * dtypeBytes(from));
  long long count = n;
  return L
      .kernel("elementwise.cu",
              std::string("mtc_convert_") + dtypeSuffix(from) + "_" +
                  dtypeSuffix(to),
              {strideBlocks(n, DType::BF16)}, {kStrideBlock}, 0,
              {&x, &y, &count})
      .withPrefix("convert");
}

Status unaryGrad(const Launch &L, cpu::Unary f, DevPtr x, DevPtr dy, DevPtr dx,
                 int64_t n, float param, DType type) {
  if (n < 0)
    return Status::error("unaryGrad: negative element count " +
                         std::to_string(n));
  if (n == 0)
    return Status::success();
  long long count = n;
  int op = static_cast<int>(f);
  return L
      .kernel("elementwise.cu",
              std::string("mtc_unary_grad_") + dtypeSuffix(type),
              {strideBlocks(n, type)}, {kStrideBlock}, 0,
              {&x, &dy, &dx, &count, &op, &param})
      .withPrefix("unaryGrad");
}

Status binary(const Launch &L, cpu::Binary op, DevPtr a,
              const std::vector<int64_t> &aShape, DevPtr b,
              const std::vector<int64_t> &bShape, DevPtr out,
              const std::vector<int64_t> &outShape, DType type) {
  Expected<mtc_cuda::BroadcastShape> shape =
      broadcastShape(outShape, aShape, bShape);
  if (!shape)
    return shape.status();
  const int64_t n = product(outShape);
  if (n == 0)
    return Status::success();
  long long count = n;
  int code = static_cast<int>(op);
  return L
      .kernel("elementwise.cu", std::string("mtc_binary_") + dtypeSuffix(type),
              {strideBlocks(n, type)}, {kStrideBlock}, 0,
              {&a, &b, &out, &*shape, &count, &code})
      .withPrefix("binary");
}

Status reduceTo(const Launch &L, DevPtr x, const std::vector<int64_t> &from,
                DevPtr y, const std::vector<int64_t> &to) {
  Expected<mtc_cuda::ReduceToShape> shape = reduceToShape(from, to);
  if (!shape)
    return shape.status();
  mtc_cuda::ReduceToShape &s = *shape;
  if (product(from) == 0) // empty sums: zeros, as runtime/cpu
    return L.zero(y, s.outN * 4).withPrefix("reduceTo");
  if (s.redRank == 0)
    return L.copy(y, x, s.outN * 4).withPrefix("reduceTo");
  // Whole contiguous rows (x [outN, redN] -> [outN]): a block per row. One
  // block would sum a full reduction alone, so that case stays chunked
  // unless it is small.
  const bool rows =
      s.redRank == 1 && s.redStride[0] == 1 &&
      (s.keptRank == 0 || s.keptStride[s.keptRank - 1] == s.redN) &&
      s.outN <= INT_MAX && s.redN <= INT_MAX &&
      (s.outN >= 64 || s.redN <= (1 << 16));
  if (rows)
    return reduce(L, cpu::Reduce::Sum, x, y, s.outN, s.redN, 1)
        .withPrefix("reduceTo");
  // About 64k threads, each summing at least 32 elements, at most 4096
  // chunks (the finishing sum walks them one by one).
  const int64_t chunks = std::clamp<int64_t>(
      std::min<int64_t>((65536 + s.outN - 1) / s.outN, (s.redN + 31) / 32), 1,
      4096);
  DevPtr out = y;
  if (chunks > 1) {
    Expected<DevPtr> partial = L.scratch(chunks * s.outN * 4);
    if (!partial)
      return Status::error("reduceTo: " + partial.message());
    out = *partial;
  }
  // A thread per (output, chunk); 256 a block, as the grid-stride loops.
  const int64_t blocks = (s.outN + kStrideBlock - 1) / kStrideBlock;
  if (blocks > INT_MAX)
    return Status::error("reduceTo: " + std::to_string(s.outN) +
                         " outputs exceed the kernel's grid");
  int c = static_cast<int>(chunks);
  if (Status st = L.kernel(
          "reduce.cu", "mtc_reduce_to_f32",
          {static_cast<unsigned>(blocks), static_cast<unsigned>(chunks)},
          {kStrideBlock}, 0, {&x, &out, &s, &c});
      !st)
    return st.withPrefix("reduceTo");
  return chunks > 1 ? sumPartials(L, out, y, chunks, s.outN, false)
                          .withPrefix("reduceTo")
                    : Status::success();
}

} // namespace mtc::cuda::ops
