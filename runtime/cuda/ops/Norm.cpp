//===- Norm.cpp - Launchers of the RMSNorm / LayerNorm kernels ------------===//
//
// Part of mtc.
//
// Geometry (norm.cu's banner): the row kernels (forward, and the backward's
// dx) run one block per row, 64 threads for rows below 128 elements, 128
// below 1024, 256 from there. The parameter gradients run in two more
// launches: per-chunk column partials (grid (ceil(D / 128), chunks), 128
// threads; chunks = min(rows, 64), runtime/cpu's paramChunks) into scratch,
// then mtc_sum_partials_f32 accumulating them in chunk order into dw / db.
// The order of every sum depends on (rows, D) alone: the gradients are
// bit-identical from run to run.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/ops/Norm.h"

#include "runtime/cuda/ops/Reduce.h"

#include <algorithm>
#include <climits>
#include <string>

namespace mtc::cuda::ops {
namespace {

constexpr unsigned kColumnBlock = 128;

unsigned rowBlock(int64_t D) { return D >= 1024 ? 256 : D >= 128 ? 128 : 64; }

/// Chunks of rows for the parameter-gradient partials, as runtime/cpu's.
int paramChunks(int64_t rows) {
  return static_cast<int>(std::clamp<int64_t>(rows, 1, 64));
}

Status checkRows(const char *what, int64_t rows, int64_t D) {
  if (rows < 0 || D < 0 || rows > INT_MAX || D > INT_MAX)
    return Status::error(std::string(what) + ": " + std::to_string(rows) +
                         " rows of " + std::to_string(D) +
                         " are outside the kernels' range (each in [0, 2^31))");
  return Status::success();
}

Dim3 rowGrid(int64_t rows) { return {static_cast<unsigned>(rows)}; }

Dim3 columnGrid(int64_t D, int chunks) {
  return {static_cast<unsigned>((D + kColumnBlock - 1) / kColumnBlock),
          static_cast<unsigned>(chunks)};
}

/// Device scratch of \p n floats, or an error naming \p what.
Expected<DevPtr> floats(const Launch &L, const char *what, int64_t n) {
  Expected<DevPtr> p = L.scratch(n * 4);
  if (!p)
    return Status::error(std::string(what) + ": " + p.message());
  return p;
}

} // namespace

Status rmsnorm(const Launch &L, DevPtr x, DevPtr w, DevPtr y, int64_t rows,
               int64_t D, float eps, float offset, DType type) {
  if (Status s = checkRows("rmsnorm", rows, D); !s)
    return s;
  if (rows == 0 || D == 0)
    return Status::success();
  int r = static_cast<int>(rows), d = static_cast<int>(D);
  return L
      .kernel("norm.cu", std::string("mtc_rmsnorm_") + dtypeSuffix(type),
              rowGrid(rows), {rowBlock(D)}, 0,
              {&x, &w, &y, &r, &d, &eps, &offset})
      .withPrefix("rmsnorm");
}

Status rmsnormGrad(const Launch &L, DevPtr x, DevPtr w, DevPtr dy, DevPtr dx,
                   DevPtr dwAcc, int64_t rows, int64_t D, float eps,
                   float offset, DType type) {
  const char *what = "rmsnormGrad";
  if (Status s = checkRows(what, rows, D); !s)
    return s;
  if (rows == 0 || D == 0) // dx empty, dw += 0
    return Status::success();
  int r = static_cast<int>(rows), d = static_cast<int>(D);
  const std::string sfx = dtypeSuffix(type);
  DevPtr rstd = 0;
  if (dwAcc) {
    Expected<DevPtr> p = floats(L, what, rows);
    if (!p)
      return p.status();
    rstd = *p;
  }
  if (Status s = L.kernel("norm.cu", "mtc_rmsnorm_grad_" + sfx, rowGrid(rows),
                          {rowBlock(D)}, 0,
                          {&x, &w, &dy, &dx, &rstd, &r, &d, &eps, &offset});
      !s || !dwAcc)
    return s.withPrefix(what);
  int chunks = paramChunks(rows);
  Expected<DevPtr> partial = floats(L, what, int64_t(chunks) * D);
  if (!partial)
    return partial.status();
  if (Status s = L.kernel("norm.cu", "mtc_rmsnorm_grad_w_" + sfx,
                          columnGrid(D, chunks), {kColumnBlock}, 0,
                          {&x, &dy, &rstd, &*partial, &r, &d, &chunks});
      !s)
    return s.withPrefix(what);
  return sumPartials(L, *partial, dwAcc, chunks, D, /*accumulate=*/true)
      .withPrefix(what);
}

Status layernorm(const Launch &L, DevPtr x, DevPtr w, DevPtr b, DevPtr y,
                 int64_t rows, int64_t D, float eps, DType type) {
  if (Status s = checkRows("layernorm", rows, D); !s)
    return s;
  if (rows == 0 || D == 0)
    return Status::success();
  int r = static_cast<int>(rows), d = static_cast<int>(D);
  return L
      .kernel("norm.cu", std::string("mtc_layernorm_") + dtypeSuffix(type),
              rowGrid(rows), {rowBlock(D)}, 0, {&x, &w, &b, &y, &r, &d, &eps})
      .withPrefix("layernorm");
}

Status layernormGrad(const Launch &L, DevPtr x, DevPtr w, DevPtr dy, DevPtr dx,
                     DevPtr dwAcc, DevPtr dbAcc, int64_t rows, int64_t D,
                     float eps, DType type) {
  const char *what = "layernormGrad";
  if (Status s = checkRows(what, rows, D); !s)
    return s;
  if (rows == 0 || D == 0) // dx empty, dw and db += 0
    return Status::success();
  int r = static_cast<int>(rows), d = static_cast<int>(D);
  const std::string sfx = dtypeSuffix(type);
  const bool params = dwAcc || dbAcc;
  DevPtr stats = 0;
  if (params) {
    Expected<DevPtr> p = floats(L, what, 2 * rows);
    if (!p)
      return p.status();
    stats = *p;
  }
  if (Status s =
          L.kernel("norm.cu", "mtc_layernorm_grad_" + sfx, rowGrid(rows),
                   {rowBlock(D)}, 0, {&x, &w, &dy, &dx, &stats, &r, &d, &eps});
      !s || !params)
    return s.withPrefix(what);
  // The partial kernel always writes partialW: it gets scratch even when
  // only db is wanted.
  int chunks = paramChunks(rows);
  Expected<DevPtr> pw = floats(L, what, int64_t(chunks) * D);
  if (!pw)
    return pw.status();
  DevPtr pb = 0;
  if (dbAcc) {
    Expected<DevPtr> p = floats(L, what, int64_t(chunks) * D);
    if (!p)
      return p.status();
    pb = *p;
  }
  if (Status s = L.kernel("norm.cu", "mtc_layernorm_grad_wb_" + sfx,
                          columnGrid(D, chunks), {kColumnBlock}, 0,
                          {&x, &dy, &stats, &*pw, &pb, &r, &d, &chunks});
      !s)
    return s.withPrefix(what);
  if (dwAcc)
    if (Status s = sumPartials(L, *pw, dwAcc, chunks, D, /*accumulate=*/true);
        !s)
      return s.withPrefix(what);
  if (dbAcc)
    return sumPartials(L, pb, dbAcc, chunks, D, /*accumulate=*/true)
        .withPrefix(what);
  return Status::success();
}

} // namespace mtc::cuda::ops
