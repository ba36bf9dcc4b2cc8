//===- Reduce.cpp - Launchers of the reduction and softmax kernels --------===//
//
// Part of mtc.
//
// Geometry (reduce.cu's banner): inner == 1 launches the row form, one
// block per row (grid outer), 64 threads for rows below 128 elements, 128
// below 1024, 256 from there; any other inner the strided form, one thread
// per (outer, inner) column in blocks of 128. The kernels index in int:
// outer, n and inner must each stay below 2^31.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ops/Reduce.h"

#include <climits>
#include <string>

namespace mtc::cuda::ops {
namespace {

constexpr unsigned kStridedBlock = 128;

unsigned rowBlock(int64_t n) { return n >= 1024 ? 256 : n >= 128 ? 128 : 64; }

/// Checks [outer, n, inner] against the kernels' int indices.
Status checkAxis(const char *what, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t v : {outer, n, inner})
    if (v < 0 || v > INT_MAX)
      return Status::error(std::string(what) + ": [" + std::to_string(outer) +
                           ", " + std::to_string(n) + ", " +
                           std::to_string(inner) +
                           "] is outside the kernels' range (each dimension "
                           "in [0, 2^31))");
  if (inner != 1 &&
      (outer * inner + kStridedBlock - 1) / kStridedBlock > INT_MAX)
    return Status::error(std::string(what) + ": " +
                         std::to_string(outer * inner) +
                         " columns exceed the strided kernel's grid");
  return Status::success();
}

/// The kernel's name, its geometry and the shape arguments (outer, n and,
/// for the strided form, inner) of an op over [outer, n, inner].
struct AxisLaunch {
  std::string entry;
  Dim3 grid, block;
  int outer, n, inner;
};

AxisLaunch axisLaunch(const char *base, DType type, int64_t outer, int64_t n,
                      int64_t inner) {
  AxisLaunch a;
  a.outer = static_cast<int>(outer);
  a.n = static_cast<int>(n);
  a.inner = static_cast<int>(inner);
  if (inner == 1) {
    a.entry = std::string(base) + dtypeSuffix(type);
    a.grid.x = static_cast<unsigned>(outer);
    a.block.x = rowBlock(n);
  } else {
    a.entry = std::string(base) + "strided_" + dtypeSuffix(type);
    a.grid.x = static_cast<unsigned>((outer * inner + kStridedBlock - 1) /
                                     kStridedBlock);
    a.block.x = kStridedBlock;
  }
  return a;
}

/// Queues \p a with the pointer arguments \p ptrs, then the shape
/// arguments, then \p extra (the reduce op) when non-null.
Status launchAxis(const Launch &L, AxisLaunch &a, std::vector<void *> args,
                  int *extra) {
  args.push_back(&a.outer);
  args.push_back(&a.n);
  if (a.inner != 1)
    args.push_back(&a.inner);
  if (extra)
    args.push_back(extra);
  return L.kernel("reduce.cu", a.entry, a.grid, a.block, 0, std::move(args));
}

} // namespace

Status reduce(const Launch &L, cpu::Reduce r, DevPtr x, DevPtr y, int64_t outer,
              int64_t n, int64_t inner, DType type) {
  if (Status s = checkAxis("reduce", outer, n, inner); !s)
    return s;
  if (outer == 0 || inner == 0)
    return Status::success();
  AxisLaunch a = axisLaunch("mtc_reduce_", type, outer, n, inner);
  int op = static_cast<int>(r);
  return launchAxis(L, a, {&x, &y}, &op).withPrefix("reduce");
}

Status reduceGrad(const Launch &L, cpu::Reduce r, DevPtr x, DevPtr dy,
                  DevPtr dx, int64_t outer, int64_t n, int64_t inner,
                  DType type) {
  if (Status s = checkAxis("reduceGrad", outer, n, inner); !s)
    return s;
  if (outer == 0 || n == 0 || inner == 0)
    return Status::success();
  AxisLaunch a = axisLaunch("mtc_reduce_grad_", type, outer, n, inner);
  int op = static_cast<int>(r);
  return launchAxis(L, a, {&x, &dy, &dx}, &op).withPrefix("reduceGrad");
}

Status softmax(const Launch &L, DevPtr x, DevPtr y, int64_t outer, int64_t n,
               int64_t inner, DType type) {
  if (Status s = checkAxis("softmax", outer, n, inner); !s)
    return s;
  if (outer == 0 || n == 0 || inner == 0)
    return Status::success();
  AxisLaunch a = axisLaunch("mtc_softmax_", type, outer, n, inner);
  return launchAxis(L, a, {&x, &y}, nullptr).withPrefix("softmax");
}

Status softmaxGrad(const Launch &L, DevPtr y, DevPtr dy, DevPtr dx,
                   int64_t outer, int64_t n, int64_t inner, DType type) {
  if (Status s = checkAxis("softmaxGrad", outer, n, inner); !s)
    return s;
  if (outer == 0 || n == 0 || inner == 0)
    return Status::success();
  AxisLaunch a = axisLaunch("mtc_softmax_grad_", type, outer, n, inner);
  return launchAxis(L, a, {&y, &dy, &dx}, nullptr).withPrefix("softmaxGrad");
}

Status sumPartials(const Launch &L, DevPtr partial, DevPtr out, int64_t chunks,
                   int64_t n, bool accumulate) {
  if (chunks < 1 || chunks > INT_MAX || n < 0)
    return Status::error("sumPartials: " + std::to_string(chunks) +
                         " chunks of " + std::to_string(n) +
                         " (chunks must be in [1, 2^31), n >= 0)");
  if (n == 0)
    return Status::success();
  constexpr unsigned kBlock = 256;
  int c = static_cast<int>(chunks), acc = accumulate ? 1 : 0;
  long long count = n;
  return L
      .kernel("reduce.cu", "mtc_sum_partials_f32",
              {static_cast<unsigned>((n + kBlock - 1) / kBlock)}, {kBlock}, 0,
              {&partial, &out, &c, &count, &acc})
      .withPrefix("sumPartials");
}

} // namespace mtc::cuda::ops
