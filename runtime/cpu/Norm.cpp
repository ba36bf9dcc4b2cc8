//===- Norm.cpp - Reductions, softmax, rmsnorm, layernorm -----------------===//
//
// Part of mtc.
//
// Layout: ops over one axis see x as [outer, n, inner]. With inner == 1 each
// row is contiguous and is processed with 8 independent lanes (so the compiler
// can vectorise without reassociating); otherwise a task owns one outer index
// and a block of up to 256 inner columns and walks n with unit-stride inner
// loops.
//
// Numerics
// - Row sums (reduce over a contiguous row, softmax normaliser, norm
//   statistics) use 16 float lanes per block of 256 elements and add the
//   blocks in double (detail::sumRow & co., FastMath.h); strided sums
//   (inner > 1) and parameter gradients accumulate in double directly.
// - softmax subtracts the row max before exp (detail::fexp, ~2 ulp); a row of
// all -inf gives NaN, as
//   the mathematical softmax does (0 / 0).
// - rms/layer norm statistics use two passes in double (mean, then centred
//   variance) - no E[x^2] - E[x]^2 cancellation.
// - Parameter gradients (dw, db) are reduced over rows in a fixed number of
//   row chunks that depends only on `rows` (not on threads()), each chunk
//   summed in double, chunks combined in order: bit-identical results for any
//   thread count.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/FastMath.h"
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace mtc::cpu {
namespace {

constexpr int64_t kCols = 256;
constexpr int64_t kWork = 1 << 14; // elements per parallel task, about

/// Runs f(o, c0, w) for every (outer index, column block) pair; a task
/// covers about kWork elements.
template <typename F>
void forColumnBlocks(int64_t outer, int64_t n, int64_t inner, F &&f) {
  int64_t colBlocks = (inner + kCols - 1) / kCols;
  int64_t tasks = outer * colBlocks;
  int64_t per = std::max<int64_t>(1, n * std::min(inner, kCols));
  int64_t grain = std::max<int64_t>(1, kWork / per);
  int64_t groups = (tasks + grain - 1) / grain;
  parallelFor(groups, [&](int64_t g0, int64_t g1) {
    for (int64_t t = g0 * grain; t < std::min(tasks, g1 * grain); ++t) {
      int64_t o = t / colBlocks, c0 = (t % colBlocks) * kCols;
      f(o, c0, std::min(kCols, inner - c0));
    }
  });
}

/// Runs f(row) for rows in [0, rows), rows of D elements, grouped.
template <typename F> void forRows(int64_t rows, int64_t D, F &&f) {
  int64_t grain = std::max<int64_t>(1, kWork / std::max<int64_t>(D, 1));
  int64_t groups = (rows + grain - 1) / grain;
  parallelFor(groups, [&](int64_t g0, int64_t g1) {
    for (int64_t r = g0 * grain; r < std::min(rows, g1 * grain); ++r)
      f(r);
  });
}

using detail::dotRow;
using detail::maxRow;
using detail::sumRow;

MTC_CLONES void softmaxRow(const float *p, float *q, int64_t n) {
  float m = maxRow(p, n);
  float inv = static_cast<float>(1.0 / detail::expSumRow(p, n, m, q));
  for (int64_t k = 0; k < n; ++k)
    q[k] *= inv;
}

/// Fixed row chunking for parameter-gradient partials (independent of the
/// thread count).
inline int64_t paramChunks(int64_t rows) {
  return std::max<int64_t>(1, std::min<int64_t>(rows, 64));
}

/// Sums per-chunk double partials [chunks, D] in chunk order into acc[D].
void addPartials(const std::vector<double> &part, int64_t chunks, int64_t D,
                 float *acc) {
  parallelFor(D, [&](int64_t d0, int64_t d1) {
    for (int64_t d = d0; d < d1; ++d) {
      double s = 0.0;
      for (int64_t c = 0; c < chunks; ++c)
        s += part[c * D + d];
      acc[d] = static_cast<float>(acc[d] + s);
    }
  });
}

} // namespace

void reduce(Reduce r, const float *x, float *y, int64_t outer, int64_t n,
            int64_t inner) {
  if (inner == 1) {
    forRows(outer, n, [&](int64_t o) {
      const float *p = x + o * n;
      if (r == Reduce::Max)
        y[o] = maxRow(p, n);
      else {
        double s = sumRow(p, n);
        y[o] = static_cast<float>(r == Reduce::Mean ? s / double(n) : s);
      }
    });
    return;
  }
  forColumnBlocks(outer, n, inner, [&](int64_t o, int64_t c0, int64_t w) {
    const float *base = x + o * n * inner + c0;
    float *out = y + o * inner + c0;
    if (r == Reduce::Max) {
      float m[kCols];
      for (int64_t j = 0; j < w; ++j)
        m[j] = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < n; ++k) {
        const float *p = base + k * inner;
        for (int64_t j = 0; j < w; ++j)
          m[j] = p[j] > m[j] ? p[j] : m[j];
      }
      std::memcpy(out, m, sizeof(float) * w);
      return;
    }
    double s[kCols];
    for (int64_t j = 0; j < w; ++j)
      s[j] = 0.0;
    for (int64_t k = 0; k < n; ++k) {
      const float *p = base + k * inner;
      for (int64_t j = 0; j < w; ++j)
        s[j] += p[j];
    }
    double scale = r == Reduce::Mean ? 1.0 / double(n) : 1.0;
    for (int64_t j = 0; j < w; ++j)
      out[j] = static_cast<float>(s[j] * scale);
  });
}

void reduceGrad(Reduce r, const float *x, const float *dy, float *dx,
                int64_t outer, int64_t n, int64_t inner) {
  forColumnBlocks(outer, n, inner, [&](int64_t o, int64_t c0, int64_t w) {
    const float *g = dy + o * inner + c0;
    float *base = dx + o * n * inner + c0;
    if (r != Reduce::Max) {
      float scale =
          r == Reduce::Mean ? static_cast<float>(1.0 / double(n)) : 1.0f;
      for (int64_t k = 0; k < n; ++k)
        for (int64_t j = 0; j < w; ++j)
          base[k * inner + j] = g[j] * scale;
      return;
    }
    // First maximal element gets the gradient.
    const float *xb = x + o * n * inner + c0;
    float m[kCols];
    int64_t arg[kCols];
    for (int64_t j = 0; j < w; ++j) {
      m[j] = -std::numeric_limits<float>::infinity();
      arg[j] = 0;
    }
    for (int64_t k = 0; k < n; ++k) {
      const float *p = xb + k * inner;
      for (int64_t j = 0; j < w; ++j)
        if (p[j] > m[j]) {
          m[j] = p[j];
          arg[j] = k;
        }
    }
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < w; ++j)
        base[k * inner + j] = arg[j] == k ? g[j] : 0.0f;
  });
}

void softmax(const float *x, float *y, int64_t outer, int64_t n,
             int64_t inner) {
  if (inner == 1) {
    forRows(outer, n, [&](int64_t o) { softmaxRow(x + o * n, y + o * n, n); });
    return;
  }
  forColumnBlocks(outer, n, inner, [&](int64_t o, int64_t c0, int64_t w) {
    const float *xb = x + o * n * inner + c0;
    float *yb = y + o * n * inner + c0;
    float m[kCols];
    double s[kCols];
    for (int64_t j = 0; j < w; ++j) {
      m[j] = -std::numeric_limits<float>::infinity();
      s[j] = 0.0;
    }
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < w; ++j)
        m[j] = xb[k * inner + j] > m[j] ? xb[k * inner + j] : m[j];
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < w; ++j) {
        float e = detail::fexp(xb[k * inner + j] - m[j]);
        yb[k * inner + j] = e;
        s[j] += e;
      }
    float inv[kCols];
    for (int64_t j = 0; j < w; ++j)
      inv[j] = static_cast<float>(1.0 / s[j]);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < w; ++j)
        yb[k * inner + j] *= inv[j];
  });
}

void softmaxGrad(const float *y, const float *dy, float *dx, int64_t outer,
                 int64_t n, int64_t inner) {
  if (inner == 1) {
    forRows(outer, n, [&](int64_t o) {
      const float *p = y + o * n, *g = dy + o * n;
      float *d = dx + o * n;
      float dot = static_cast<float>(dotRow(p, g, n));
      for (int64_t k = 0; k < n; ++k)
        d[k] = p[k] * (g[k] - dot);
    });
    return;
  }
  forColumnBlocks(outer, n, inner, [&](int64_t o, int64_t c0, int64_t w) {
    int64_t off = o * n * inner + c0;
    const float *p = y + off, *g = dy + off;
    float *d = dx + off;
    double s[kCols];
    for (int64_t j = 0; j < w; ++j)
      s[j] = 0.0;
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < w; ++j)
        s[j] += double(p[k * inner + j]) * double(g[k * inner + j]);
    float dot[kCols];
    for (int64_t j = 0; j < w; ++j)
      dot[j] = static_cast<float>(s[j]);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < w; ++j)
        d[k * inner + j] = p[k * inner + j] * (g[k * inner + j] - dot[j]);
  });
}

//===----------------------------------------------------------------------===//
// RMSNorm / LayerNorm
//===----------------------------------------------------------------------===//

namespace {
MTC_INLINE float rmsInv(const float *x, int64_t D, float eps) {
  double ms = dotRow(x, x, D) / double(D);
  return static_cast<float>(1.0 / std::sqrt(ms + double(eps)));
}

struct MeanRstd {
  float mean, rstd;
};
MTC_INLINE MeanRstd meanRstd(const float *x, int64_t D, float eps) {
  double mean = sumRow(x, D) / double(D);
  double var = detail::sqDevRow(x, static_cast<float>(mean), D) / double(D);
  return {static_cast<float>(mean),
          static_cast<float>(1.0 / std::sqrt(var + double(eps)))};
}
MTC_CLONES void rmsnormRow(const float *p, const float *w, float *q, int64_t D,
                           float eps, float offset) {
  float inv = rmsInv(p, D, eps);
  for (int64_t i = 0; i < D; ++i)
    q[i] = p[i] * inv * (offset + w[i]);
}

/// One row of rmsnormGrad; adds dw's contribution into pw (double) if set.
MTC_CLONES void rmsnormGradRow(const float *p, const float *g, const float *gy,
                               float *d, double *pw, int64_t D, float eps) {
  float inv = rmsInv(p, D, eps);
  // sum_j dy_j g_j x_j: dy*g into d (overwritten just below) then a dot.
  for (int64_t j = 0; j < D; ++j)
    d[j] = gy[j] * g[j];
  double dot = dotRow(d, p, D);
  float k = static_cast<float>(double(inv) * inv * inv * dot / double(D));
  for (int64_t j = 0; j < D; ++j)
    d[j] = inv * g[j] * gy[j] - p[j] * k;
  if (pw)
    for (int64_t j = 0; j < D; ++j)
      pw[j] += double(gy[j] * p[j] * inv);
}

MTC_CLONES void layernormRow(const float *p, const float *w, const float *b,
                             float *q, int64_t D, float eps) {
  MeanRstd s = meanRstd(p, D, eps);
  if (b)
    for (int64_t i = 0; i < D; ++i)
      q[i] = (p[i] - s.mean) * s.rstd * w[i] + b[i];
  else
    for (int64_t i = 0; i < D; ++i)
      q[i] = (p[i] - s.mean) * s.rstd * w[i];
}

/// One row of layernormGrad (xhat, g: scratch of D floats).
MTC_CLONES void layernormGradRow(const float *p, const float *w,
                                 const float *gy, float *d, double *pw,
                                 double *pb, float *xhat, float *g, int64_t D,
                                 float eps) {
  MeanRstd s = meanRstd(p, D, eps);
  for (int64_t i = 0; i < D; ++i) {
    xhat[i] = (p[i] - s.mean) * s.rstd;
    g[i] = gy[i] * w[i];
  }
  float mg = static_cast<float>(sumRow(g, D) / double(D));
  float mgx = static_cast<float>(dotRow(g, xhat, D) / double(D));
  for (int64_t i = 0; i < D; ++i)
    d[i] = s.rstd * (g[i] - mg - xhat[i] * mgx);
  if (pw)
    for (int64_t i = 0; i < D; ++i)
      pw[i] += double(gy[i] * xhat[i]);
  if (pb)
    for (int64_t i = 0; i < D; ++i)
      pb[i] += double(gy[i]);
}
} // namespace

void rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t D,
             float eps, float offset) {
  forRows(rows, D, [&](int64_t r) {
    rmsnormRow(x + r * D, w, y + r * D, D, eps, offset);
  });
}

void rmsnormGrad(const float *x, const float *w, const float *dy, float *dx,
                 float *dwAcc, int64_t rows, int64_t D, float eps,
                 float offset) {
  // y_i = x_i r g_i, r = (mean(x^2) + eps)^-1/2, g = offset + w:
  // dx_i = r g_i dy_i - x_i r^3 / D * sum_j dy_j g_j x_j;  dw_i = dy_i x_i r.
  int64_t chunks = paramChunks(rows);
  std::vector<double> part(dwAcc ? chunks * D : 0, 0.0);
  parallelFor(chunks, [&](int64_t c0, int64_t c1) {
    std::vector<float> g(D);
    for (int64_t i = 0; i < D; ++i)
      g[i] = offset + w[i];
    for (int64_t c = c0; c < c1; ++c) {
      double *pw = dwAcc ? part.data() + c * D : nullptr;
      for (int64_t r = rows * c / chunks; r < rows * (c + 1) / chunks; ++r)
        rmsnormGradRow(x + r * D, g.data(), dy + r * D, dx + r * D, pw, D, eps);
    }
  });
  if (dwAcc)
    addPartials(part, chunks, D, dwAcc);
}

void layernorm(const float *x, const float *w, const float *b, float *y,
               int64_t rows, int64_t D, float eps) {
  forRows(rows, D,
          [&](int64_t r) { layernormRow(x + r * D, w, b, y + r * D, D, eps); });
}

void layernormGrad(const float *x, const float *w, const float *dy, float *dx,
                   float *dwAcc, float *dbAcc, int64_t rows, int64_t D,
                   float eps) {
  // xhat = (x - mean) rstd, g = dy w:
  // dx = rstd (g - mean(g) - xhat mean(g xhat)); dw += dy xhat; db += dy.
  int64_t chunks = paramChunks(rows);
  std::vector<double> pw(dwAcc ? chunks * D : 0, 0.0);
  std::vector<double> pb(dbAcc ? chunks * D : 0, 0.0);
  parallelFor(chunks, [&](int64_t c0, int64_t c1) {
    std::vector<float> xhat(D), g(D);
    for (int64_t c = c0; c < c1; ++c) {
      double *qw = dwAcc ? pw.data() + c * D : nullptr;
      double *qb = dbAcc ? pb.data() + c * D : nullptr;
      for (int64_t r = rows * c / chunks; r < rows * (c + 1) / chunks; ++r)
        layernormGradRow(x + r * D, w, dy + r * D, dx + r * D, qw, qb,
                         xhat.data(), g.data(), D, eps);
    }
  });
  if (dwAcc)
    addPartials(pw, chunks, D, dwAcc);
  if (dbAcc)
    addPartials(pb, chunks, D, dbAcc);
}

} // namespace mtc::cpu
