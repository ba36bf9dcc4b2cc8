//===- Elementwise.cpp - Unary, broadcasting binary, reduceTo -------------===//
//
// Part of mtc.
//
// - unary / unaryGrad: one pass, parallel over fixed chunks of the elements;
//   the switch on the function sits outside the loop so each loop is a plain
//   map (compiled per ISA with target_clones). exp, sigmoid and silu use
//   detail::fexp (FastMath.h, ~2 ulp, vectorised; sigmoid = 1 / (1 + exp(-x))
//   has exact limits at both ends); tanh (also in GeluTanh, Softcap) is
//   detail::ftanh (~2 ulp); erf, log, sqrt come from libm.
// - binary: the output shape and both operand shapes are right-aligned, then
//   adjacent dimensions whose broadcast pattern (a broadcast?, b broadcast?)
//   is the same are merged. The innermost merged dimension becomes a
//   contiguous loop with operand strides 0 or 1; the outer ones are walked
//   with an odometer. Parallel over the outer "rows".
// - reduceTo: same collapsing, on (kept, reduced) dimensions. Sums are
//   accumulated in double in a fixed order (reduced indices in row-major
//   order), parallel over output elements only, so the result is independent
//   of the thread count.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/FastMath.h"
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

namespace mtc::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14; // elements per parallel task, at least

/// Splits n elements into tasks of about kGrain and runs body on each range.
template <typename F> void forChunks(int64_t n, int64_t grain, F &&f) {
  int64_t tasks = (n + grain - 1) / grain;
  if (tasks <= 1) {
    f(int64_t(0), n);
    return;
  }
  parallelFor(tasks, [&](int64_t t0, int64_t t1) {
    f(t0 * grain, std::min(n, t1 * grain));
  });
}

MTC_INLINE float sigmoidf(float x) { return 1.0f / (1.0f + detail::fexp(-x)); }

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

MTC_CLONES void unaryRange(Unary f, const float *x, float *y, int64_t b,
                           int64_t e, float param) {
  switch (f) {
  case Unary::Neg:
    for (int64_t i = b; i < e; ++i)
      y[i] = -x[i];
    break;
  case Unary::Exp:
    for (int64_t i = b; i < e; ++i)
      y[i] = detail::fexp(x[i]);
    break;
  case Unary::Log:
    for (int64_t i = b; i < e; ++i)
      y[i] = std::log(x[i]);
    break;
  case Unary::Silu:
    for (int64_t i = b; i < e; ++i)
      y[i] = x[i] * sigmoidf(x[i]);
    break;
  case Unary::Relu:
    for (int64_t i = b; i < e; ++i)
      y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    break;
  case Unary::Sigmoid:
    for (int64_t i = b; i < e; ++i)
      y[i] = sigmoidf(x[i]);
    break;
  case Unary::Tanh:
    for (int64_t i = b; i < e; ++i)
      y[i] = detail::ftanh(x[i]);
    break;
  case Unary::Rsqrt:
    for (int64_t i = b; i < e; ++i)
      y[i] = 1.0f / std::sqrt(x[i]);
    break;
  case Unary::Sqrt:
    for (int64_t i = b; i < e; ++i)
      y[i] = std::sqrt(x[i]);
    break;
  case Unary::Square:
    for (int64_t i = b; i < e; ++i)
      y[i] = x[i] * x[i];
    break;
  case Unary::GeluErf:
    for (int64_t i = b; i < e; ++i)
      y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
    break;
  case Unary::GeluTanh:
    for (int64_t i = b; i < e; ++i) {
      float v = x[i];
      float u = kSqrt2OverPi * (v + 0.044715f * v * v * v);
      y[i] = 0.5f * v * (1.0f + detail::ftanh(u));
    }
    break;
  case Unary::Softcap:
    for (int64_t i = b; i < e; ++i)
      y[i] = param * detail::ftanh(x[i] / param);
    break;
  case Unary::Relu2:
    for (int64_t i = b; i < e; ++i) {
      float r = x[i] > 0.0f ? x[i] : 0.0f;
      y[i] = r * r;
    }
    break;
  }
}

MTC_CLONES void unaryGradRange(Unary f, const float *x, const float *dy,
                               float *dx, int64_t b, int64_t e, float param) {
  switch (f) {
  case Unary::Neg:
    for (int64_t i = b; i < e; ++i)
      dx[i] = -dy[i];
    break;
  case Unary::Exp:
    for (int64_t i = b; i < e; ++i)
      dx[i] = dy[i] * detail::fexp(x[i]);
    break;
  case Unary::Log:
    for (int64_t i = b; i < e; ++i)
      dx[i] = dy[i] / x[i];
    break;
  case Unary::Silu:
    for (int64_t i = b; i < e; ++i) {
      float s = sigmoidf(x[i]);
      dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
    }
    break;
  case Unary::Relu:
    for (int64_t i = b; i < e; ++i)
      dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
    break;
  case Unary::Sigmoid:
    for (int64_t i = b; i < e; ++i) {
      float s = sigmoidf(x[i]);
      dx[i] = dy[i] * s * (1.0f - s);
    }
    break;
  case Unary::Tanh:
    for (int64_t i = b; i < e; ++i) {
      float t = detail::ftanh(x[i]);
      dx[i] = dy[i] * (1.0f - t * t);
    }
    break;
  case Unary::Rsqrt:
    for (int64_t i = b; i < e; ++i) {
      float r = 1.0f / std::sqrt(x[i]);
      dx[i] = dy[i] * (-0.5f * r * r * r);
    }
    break;
  case Unary::Sqrt:
    for (int64_t i = b; i < e; ++i)
      dx[i] = dy[i] * (0.5f / std::sqrt(x[i]));
    break;
  case Unary::Square:
    for (int64_t i = b; i < e; ++i)
      dx[i] = dy[i] * (2.0f * x[i]);
    break;
  case Unary::GeluErf:
    for (int64_t i = b; i < e; ++i) {
      float v = x[i];
      float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
      float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
      dx[i] = dy[i] * (cdf + v * pdf);
    }
    break;
  case Unary::GeluTanh:
    for (int64_t i = b; i < e; ++i) {
      float v = x[i];
      float u = kSqrt2OverPi * (v + 0.044715f * v * v * v);
      float t = detail::ftanh(u);
      float du = kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * v * v);
      dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
    }
    break;
  case Unary::Softcap:
    for (int64_t i = b; i < e; ++i) {
      float t = detail::ftanh(x[i] / param);
      dx[i] = dy[i] * (1.0f - t * t);
    }
    break;
  case Unary::Relu2:
    for (int64_t i = b; i < e; ++i) {
      float r = x[i] > 0.0f ? x[i] : 0.0f;
      dx[i] = dy[i] * (2.0f * r);
    }
    break;
  }
}

} // namespace

void unary(Unary f, const float *x, float *y, int64_t n, float param) {
  forChunks(n, kGrain,
            [&](int64_t b, int64_t e) { unaryRange(f, x, y, b, e, param); });
}

void unaryGrad(Unary f, const float *x, const float *dy, float *dx, int64_t n,
               float param) {
  forChunks(n, kGrain, [&](int64_t b, int64_t e) {
    unaryGradRange(f, x, dy, dx, b, e, param);
  });
}

namespace {

/// Right-aligns `s` against rank r (leading 1s).
std::vector<int64_t> align(const std::vector<int64_t> &s, size_t r) {
  assert(s.size() <= r && "operand rank exceeds output rank");
  std::vector<int64_t> out(r, 1);
  std::copy(s.begin(), s.end(), out.begin() + (r - s.size()));
  return out;
}

int64_t product(const std::vector<int64_t> &s) {
  int64_t p = 1;
  for (int64_t d : s)
    p *= d;
  return p;
}

/// A collapsed iteration space: dims (outermost first) with, for each of up to
/// two operands, the element stride (0 where broadcast).
struct Collapsed {
  std::vector<int64_t> size;
  std::vector<int64_t> strideA, strideB;
};

/// Collapses outShape with operands aligned to it. An operand dim is
/// "broadcast" iff its size is 1 while the output's is not.
Collapsed collapse(const std::vector<int64_t> &out,
                   const std::vector<int64_t> &a,
                   const std::vector<int64_t> &b) {
  size_t r = out.size();
  Collapsed c;
  // Pattern per dim, skipping size-1 output dims.
  std::vector<int64_t> sz;
  std::vector<int> pa, pb;
  for (size_t i = 0; i < r; ++i) {
    if (out[i] == 1)
      continue;
    assert((a[i] == out[i] || a[i] == 1) && (b[i] == out[i] || b[i] == 1));
    sz.push_back(out[i]);
    pa.push_back(a[i] == 1 ? 0 : 1);
    pb.push_back(b[i] == 1 ? 0 : 1);
  }
  // Merge runs with the same pattern.
  std::vector<int64_t> msz;
  std::vector<int> mpa, mpb;
  for (size_t i = 0; i < sz.size(); ++i) {
    if (!msz.empty() && mpa.back() == pa[i] && mpb.back() == pb[i]) {
      msz.back() *= sz[i];
    } else {
      msz.push_back(sz[i]);
      mpa.push_back(pa[i]);
      mpb.push_back(pb[i]);
    }
  }
  if (msz.empty()) {
    msz.push_back(1);
    mpa.push_back(1);
    mpb.push_back(1);
  }
  size_t m = msz.size();
  c.size = msz;
  c.strideA.assign(m, 0);
  c.strideB.assign(m, 0);
  int64_t sa = 1, sb = 1;
  for (size_t i = m; i-- > 0;) {
    if (mpa[i]) {
      c.strideA[i] = sa;
      sa *= msz[i];
    }
    if (mpb[i]) {
      c.strideB[i] = sb;
      sb *= msz[i];
    }
  }
  return c;
}

template <typename Op>
void binaryLoop(const float *a, int64_t sa, const float *b, int64_t sb,
                float *o, int64_t n, Op op) {
  if (sa == 1 && sb == 1)
    for (int64_t i = 0; i < n; ++i)
      o[i] = op(a[i], b[i]);
  else if (sa == 1)
    for (int64_t i = 0; i < n; ++i)
      o[i] = op(a[i], b[0]);
  else if (sb == 1)
    for (int64_t i = 0; i < n; ++i)
      o[i] = op(a[0], b[i]);
  else
    for (int64_t i = 0; i < n; ++i)
      o[i] = op(a[0], b[0]);
}

template <typename Op>
void binaryImpl(const float *a, const std::vector<int64_t> &aShape,
                const float *b, const std::vector<int64_t> &bShape, float *out,
                const std::vector<int64_t> &outShape, Op op) {
  size_t r = outShape.size();
  std::vector<int64_t> as = align(aShape, r), bs = align(bShape, r);
  Collapsed c = collapse(outShape, as, bs);
  size_t m = c.size.size();
  int64_t inner = c.size[m - 1];
  int64_t isa = c.strideA[m - 1], isb = c.strideB[m - 1];
  int64_t rows = product(outShape) / std::max<int64_t>(inner, 1);
  if (product(outShape) == 0)
    return;
  int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(inner, 1));
  forChunks(rows, grain, [&](int64_t r0, int64_t r1) {
    // Decompose r0 into the outer odometer.
    std::vector<int64_t> idx(m, 0);
    int64_t offA = 0, offB = 0;
    int64_t rem = r0;
    for (size_t d = m - 1; d-- > 0;) {
      idx[d] = rem % c.size[d];
      rem /= c.size[d];
      offA += idx[d] * c.strideA[d];
      offB += idx[d] * c.strideB[d];
    }
    for (int64_t row = r0; row < r1; ++row) {
      binaryLoop(a + offA, isa, b + offB, isb, out + row * inner, inner, op);
      for (size_t d = m - 1; d-- > 0;) {
        ++idx[d];
        offA += c.strideA[d];
        offB += c.strideB[d];
        if (idx[d] < c.size[d])
          break;
        offA -= idx[d] * c.strideA[d];
        offB -= idx[d] * c.strideB[d];
        idx[d] = 0;
      }
    }
  });
}

} // namespace

void binary(Binary op, const float *a, const std::vector<int64_t> &aShape,
            const float *b, const std::vector<int64_t> &bShape, float *out,
            const std::vector<int64_t> &outShape) {
  switch (op) {
  case Binary::Add:
    binaryImpl(a, aShape, b, bShape, out, outShape,
               [](float u, float v) { return u + v; });
    break;
  case Binary::Sub:
    binaryImpl(a, aShape, b, bShape, out, outShape,
               [](float u, float v) { return u - v; });
    break;
  case Binary::Mul:
    binaryImpl(a, aShape, b, bShape, out, outShape,
               [](float u, float v) { return u * v; });
    break;
  case Binary::Div:
    binaryImpl(a, aShape, b, bShape, out, outShape,
               [](float u, float v) { return u / v; });
    break;
  }
}

void reduceTo(const float *x, const std::vector<int64_t> &from, float *y,
              const std::vector<int64_t> &to) {
  size_t r = from.size();
  std::vector<int64_t> ts = align(to, r);
  int64_t outN = product(ts);
  if (outN == 0)
    return;
  if (product(from) == 0) {
    std::memset(y, 0, sizeof(float) * outN);
    return;
  }
  // Collapse with operand A = x (never broadcast: pattern all 1) and operand
  // B = y (0 on reduced dims). strideB gives y strides; x strides below.
  Collapsed c = collapse(from, from, ts);
  size_t m = c.size.size();
  std::vector<int64_t> xs(m);
  {
    int64_t s = 1;
    for (size_t i = m; i-- > 0;) {
      xs[i] = s;
      s *= c.size[i];
    }
  }
  // Kept and reduced dims (outermost first).
  std::vector<size_t> kept, red;
  for (size_t i = 0; i < m; ++i)
    (c.strideB[i] != 0 || (c.size[i] == 1) ? kept : red).push_back(i);
  if (red.empty()) {
    std::memcpy(y, x, sizeof(float) * outN);
    return;
  }
  int64_t redN = 1;
  for (size_t d : red)
    redN *= c.size[d];

  // Offset in x of the first element for output index o (kept dims only).
  auto keptOffset = [&](int64_t o) {
    int64_t off = 0;
    for (size_t k = kept.size(); k-- > 0;) {
      size_t d = kept[k];
      off += (o % c.size[d]) * xs[d];
      o /= c.size[d];
    }
    return off;
  };
  // Walks reduced indices in row-major order, calling f(xOffset).
  auto forReduced = [&](auto &&f) {
    std::vector<int64_t> idx(red.size(), 0);
    int64_t off = 0;
    for (int64_t t = 0; t < redN; ++t) {
      f(off);
      for (size_t k = red.size(); k-- > 0;) {
        size_t d = red[k];
        ++idx[k];
        off += xs[d];
        if (idx[k] < c.size[d])
          break;
        off -= idx[k] * xs[d];
        idx[k] = 0;
      }
    }
  };

  if (kept.empty() || outN == 1) {
    // Full reduction of contiguous x: fixed blocks, partials summed in order.
    int64_t n = redN * outN;
    constexpr int64_t kBlock = 1 << 15;
    int64_t blocks = (n + kBlock - 1) / kBlock;
    std::vector<double> part(blocks, 0.0);
    parallelFor(blocks, [&](int64_t b0, int64_t b1) {
      for (int64_t bi = b0; bi < b1; ++bi) {
        int64_t e = std::min(n, (bi + 1) * kBlock);
        double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t i = bi * kBlock;
        for (; i + 8 <= e; i += 8)
          for (int l = 0; l < 8; ++l)
            acc[l] += x[i + l];
        for (; i < e; ++i)
          acc[0] += x[i];
        part[bi] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                   ((acc[4] + acc[5]) + (acc[6] + acc[7]));
      }
    });
    double total = 0.0;
    for (double v : part)
      total += v;
    y[0] = static_cast<float>(total);
    return;
  }
  bool lastKept = kept.back() == m - 1;
  if (lastKept) {
    // y rows of `inner` contiguous outputs; each task sums column blocks.
    int64_t inner = c.size[m - 1];
    int64_t outRows = outN / inner;
    constexpr int64_t kCols = 256;
    int64_t colBlocks = (inner + kCols - 1) / kCols;
    int64_t tasks = outRows * colBlocks;
    int64_t grain =
        std::max<int64_t>(1, kGrain / std::max<int64_t>(redN * kCols, 1));
    forChunks(tasks, grain, [&](int64_t t0, int64_t t1) {
      double acc[kCols];
      for (int64_t t = t0; t < t1; ++t) {
        int64_t orow = t / colBlocks, cb = t % colBlocks;
        int64_t c0 = cb * kCols, c1 = std::min(inner, c0 + kCols);
        int64_t w = c1 - c0;
        int64_t base = keptOffset(orow * inner) + c0;
        for (int64_t j = 0; j < w; ++j)
          acc[j] = 0.0;
        forReduced([&](int64_t off) {
          const float *p = x + base + off;
          for (int64_t j = 0; j < w; ++j)
            acc[j] += p[j];
        });
        for (int64_t j = 0; j < w; ++j)
          y[orow * inner + c0 + j] = static_cast<float>(acc[j]);
      }
    });
  } else {
    int64_t grain = std::max<int64_t>(1, kGrain / redN);
    forChunks(outN, grain, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        int64_t base = keptOffset(o);
        double acc = 0.0;
        forReduced([&](int64_t off) { acc += x[base + off]; });
        y[o] = static_cast<float>(acc);
      }
    });
  }
}

} // namespace mtc::cpu
