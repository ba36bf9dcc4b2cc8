//===- Movement.cpp - Transpose, slice, concat, pad -----------------------===//
//
// Part of mtc.
//
// transpose: size-1 dims are dropped and runs of y dims that stay adjacent
// and in order in x are merged. If the innermost y dim is also innermost in
// x, the copy is a set of contiguous row copies. Otherwise the y dim that is
// contiguous in x (p) and the innermost y dim form a 2D transpose, done in
// 32 x 32 tiles staged through an L1 buffer (reads contiguous along p, writes
// contiguous along the last dim), for every index of the remaining dims. Pure
// copies: exact. slice / concat / pad: memcpy of contiguous [n, inner] segments
// per outer index, parallel over outer.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace mtc::cpu {

void transpose(const float *x, const std::vector<int64_t> &shape,
               const std::vector<int64_t> &perm, float *y) {
  size_t r = shape.size();
  assert(perm.size() == r);
  int64_t total = 1;
  for (int64_t d : shape)
    total *= d;
  if (total == 0)
    return;
  std::vector<int64_t> xs(r);
  {
    int64_t s = 1;
    for (size_t i = r; i-- > 0;) {
      xs[i] = s;
      s *= shape[i];
    }
  }
  // y dims (outermost first): size and x stride; drop 1s, merge runs.
  std::vector<int64_t> sz, st;
  std::vector<int64_t> xdim;
  for (size_t i = 0; i < r; ++i) {
    int64_t d = perm[i];
    if (shape[d] == 1)
      continue;
    if (!xdim.empty() && st.back() == xs[d] * shape[d]) {
      // y dim i follows the previous one in x as well: merge.
      sz.back() *= shape[d];
      st.back() = xs[d];
    } else {
      sz.push_back(shape[d]);
      st.push_back(xs[d]);
    }
    xdim.push_back(d);
  }
  size_t m = sz.size();
  if (m == 0 || (st[m - 1] == 1 && m == 1)) {
    std::memcpy(y, x, sizeof(float) * total);
    return;
  }
  std::vector<int64_t> ys(m);
  {
    int64_t s = 1;
    for (size_t i = m; i-- > 0;) {
      ys[i] = s;
      s *= sz[i];
    }
  }
  if (st[m - 1] == 1) {
    // Contiguous rows of sz[m-1] elements.
    int64_t inner = sz[m - 1], rows = total / inner;
    parallelFor(rows, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        int64_t off = 0, rem = row;
        for (size_t d = m - 1; d-- > 0;) {
          off += (rem % sz[d]) * st[d];
          rem /= sz[d];
        }
        std::memcpy(y + row * inner, x + off, sizeof(float) * inner);
      }
    });
    return;
  }
  // The y dim p with x stride 1 (exists: x's innermost non-1 dim).
  size_t p = 0;
  for (size_t i = 0; i < m; ++i)
    if (st[i] == 1)
      p = i;
  assert(st[p] == 1 && p != m - 1);
  const size_t L = m - 1;
  constexpr int64_t T = 32;
  int64_t nP = sz[p], nL = sz[L];
  int64_t tilesP = (nP + T - 1) / T, tilesL = (nL + T - 1) / T;
  int64_t outer = total / (nP * nL);
  int64_t tasks = outer * tilesP * tilesL;
  // Other dims (not p, not L), outermost first.
  std::vector<size_t> others;
  for (size_t i = 0; i < L; ++i)
    if (i != p)
      others.push_back(i);
  parallelFor(tasks, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t tl = t % tilesL, tp = (t / tilesL) % tilesP;
      int64_t o = t / (tilesL * tilesP);
      int64_t xo = 0, yo = 0;
      for (size_t k = others.size(); k-- > 0;) {
        size_t d = others[k];
        int64_t idx = o % sz[d];
        o /= sz[d];
        xo += idx * st[d];
        yo += idx * ys[d];
      }
      int64_t p0 = tp * T, p1 = std::min(nP, p0 + T);
      int64_t l0 = tl * T, l1 = std::min(nL, l0 + T);
      const int64_t xsL = st[L], ysP = ys[p];
      // Contiguous reads into an L1 tile, then contiguous writes from it.
      float buf[T][T];
      for (int64_t c = l0; c < l1; ++c) {
        const float *src = x + xo + c * xsL;
        for (int64_t a = p0; a < p1; ++a)
          buf[c - l0][a - p0] = src[a];
      }
      for (int64_t a = p0; a < p1; ++a) {
        float *dst = y + yo + a * ysP;
        for (int64_t c = l0; c < l1; ++c)
          dst[c] = buf[c - l0][a - p0];
      }
    }
  });
}

void slice(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
           int64_t start, int64_t end) {
  int64_t len = (end - start) * inner;
  if (len <= 0)
    return;
  parallelFor(outer, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      std::memcpy(y + o * len, x + (o * n + start) * inner,
                  sizeof(float) * len);
  });
}

void concat(const std::vector<const float *> &parts,
            const std::vector<int64_t> &sizes, float *y, int64_t outer,
            int64_t inner) {
  assert(parts.size() == sizes.size());
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  parallelFor(outer, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      int64_t at = 0;
      for (size_t i = 0; i < parts.size(); ++i) {
        if (sizes[i] > 0) // empty parts may be null
          std::memcpy(y + (o * total + at) * inner,
                      parts[i] + o * sizes[i] * inner,
                      sizeof(float) * sizes[i] * inner);
        at += sizes[i];
      }
    }
  });
}

void pad(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
         int64_t start, int64_t end) {
  int64_t len = (end - start) * inner;
  parallelFor(outer, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      float *row = y + o * n * inner;
      std::memset(row, 0, sizeof(float) * start * inner);
      if (len > 0)
        std::memcpy(row + start * inner, x + o * len, sizeof(float) * len);
      std::memset(row + end * inner, 0, sizeof(float) * (n - end) * inner);
    }
  });
}

} // namespace mtc::cpu
