//===- Attention.cpp - Rotary embedding, flash attention fwd/bwd ----------===//
//
// Part of mtc.
//
// rope
//   freq = int(D * fraction), rot = freq rounded up to even, half = rot / 2
//   (transformers' partial rotary, lib/Support/Shape.h ropeDims); pair
//   (i, i + half) rotates by angle pos * invFreq[i], invFreq[i] =
//   theta^(-2i / freq), optionally rescaled by the llama3 rule (wavelengths
//   above originalMaxPosition / lowFreqFactor divided by `factor`, below
//   originalMaxPosition / highFreqFactor kept, smooth interpolation between).
//   Angles, cos and sin are computed in double into a [S, half] table (kept
//   in a small per-thread cache keyed by S, offset and parameters), then
//   applied in float. inverse rotates by -angle, which
//   is both the inverse and the VJP (rotation matrices are orthogonal).
//
// attention (forward)
//   FlashAttention-style: one task per (batch, query head, block of Bq = 64
//   queries); the task walks only the key blocks (Bk = 64) that intersect the
//   union of its rows' visible ranges. Query at position pos = qOffset + i
//   sees key j iff lo(pos) <= j < hi(pos) with lo = pos - window + 1 (window
//   > 0, else 0) and hi = pos + 1 (causal, else Sk): always a contiguous
//   range, so masking is a per-row interval test. Per tile: S = (scale q) K^T
//   (optionally softcap * tanh(S / softcap)), online softmax (running max m,
//   running sum l, O rescaled by exp(m_old - m_new)), O += P V. Finally O /= l
//   and lse = m + log l. A row that sees no key gets O = 0 and lse = -inf.
//   Memory per task: O(Bq * D + Bk * D); no S x S buffer exists.
//
// attentionGrad (backward, FlashAttention-2 recomputation, no atomics)
//   Delta_i = rowsum(dO_i * O_i) is computed first. Then two passes, each
//   recomputing P = exp(S - lse) tile by tile:
//   pass 1, one task per (batch, kv head, key block): loops over every query
//     head of the GQA group and every query block that sees the key block and
//     accumulates dV += P^T dO and dK += dS^T (scale q), dS = P (dP - Delta),
//     dP = dO V^T (times 1 - tanh^2 with softcap). A kv head's gradient is
//     owned by exactly one task, so GQA sums need no atomics and have a fixed
//     order.
//   pass 2, one task per (batch, query head, query block): dQ = scale dS K.
//   This costs one extra S and dP recomputation over a single-pass scheme but
//   keeps every output written by one task in a fixed order: deterministic
//   and independent of the thread count.
//
// Tiles: products of a row block with a [K][16V] panel run four rows at a
// time with the 4 x 16V accumulators in registers (16 zmm for a 64-key tile
// on AVX-512), so each panel row is loaded once per four query (or key) rows;
// every accumulator still adds its terms in order, one per k. P^T dO and
// dS^T Q read P and dS by column, so no transposed copies are made.
//
// Numerics: fp32 tiles; softcap's tanh is detail::ftanh; exp in the tiles is
// detail::fexp (FastMath.h: a
// vectorisable polynomial, ~2 ulp, exactly 0 for -inf so masked scores vanish);
// running sums in fp32 (l accumulates at most Sk / Bk tile sums, each a
// fixed-order sum of 64 terms). Hot tile loops are compiled for AVX-512 /
// AVX2+FMA / baseline with target_clones and picked at load time, so results
// are bit-identical on a given machine.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "lib/Support/Shape.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/cpu/FastMath.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace mtc::cpu {

//===----------------------------------------------------------------------===//
// RoPE
//===----------------------------------------------------------------------===//

int64_t ropeRotaryDims(const RopeParams &p, int64_t D) {
  int64_t rot = rules::ropeDims(p.fraction, D).rotary;
  return std::min<int64_t>(std::max<int64_t>(rot, 0), D) & ~int64_t(1);
}

std::vector<double> ropeInvFreq(const RopeParams &p, int64_t D) {
  const int64_t half = ropeRotaryDims(p, D) / 2;
  const double freq = static_cast<double>(rules::ropeDims(p.fraction, D).freq);
  std::vector<double> f(half);
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < half; ++i) {
    double inv = std::pow(p.theta, -2.0 * double(i) / freq);
    if (p.llama3) {
      double orig = double(p.originalMaxPosition);
      double lowWave = orig / p.lowFreqFactor;
      double highWave = orig / p.highFreqFactor;
      double wave = 2.0 * pi / inv;
      if (wave > lowWave) {
        inv = inv / p.factor;
      } else if (wave >= highWave) {
        double smooth = (orig / wave - p.lowFreqFactor) /
                        (p.highFreqFactor - p.lowFreqFactor);
        inv = (1.0 - smooth) * inv / p.factor + smooth * inv;
      }
    }
    f[i] = inv;
  }
  return f;
}

namespace {
/// cos and sin tables [S, half] of one rope configuration (heads of D).
struct RopeTables {
  int64_t S = -1, posOffset = 0, D = 0;
  RopeParams p;
  bool inverse = false;
  std::vector<float> cosT, sinT;

  bool matches(int64_t s, int64_t off, int64_t d, const RopeParams &q,
               bool inv) const {
    return S == s && posOffset == off && D == d && inverse == inv &&
           p.theta == q.theta && p.fraction == q.fraction &&
           p.llama3 == q.llama3 && p.factor == q.factor &&
           p.lowFreqFactor == q.lowFreqFactor &&
           p.highFreqFactor == q.highFreqFactor &&
           p.originalMaxPosition == q.originalMaxPosition;
  }
};

/// The tables for (S, posOffset, D, p, inverse): computed in double, kept
/// in a small per-thread cache (a training step applies the same few
/// configurations over and over).
const RopeTables &ropeTables(int64_t S, int64_t posOffset, int64_t D,
                             const RopeParams &p, bool inverse) {
  constexpr size_t kEntries = 4;
  thread_local RopeTables cache[kEntries];
  thread_local size_t nextSlot = 0;
  for (const RopeTables &t : cache)
    if (t.matches(S, posOffset, D, p, inverse))
      return t;
  RopeTables &t = cache[nextSlot];
  nextSlot = (nextSlot + 1) % kEntries;
  std::vector<double> invFreq = ropeInvFreq(p, D);
  int64_t half = static_cast<int64_t>(invFreq.size());
  t.S = -1; // invalid until filled
  t.cosT.assign(S * half, 0.0f);
  t.sinT.assign(S * half, 0.0f);
  parallelFor(S, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s)
      for (int64_t i = 0; i < half; ++i) {
        double a = double(s + posOffset) * invFreq[i];
        t.cosT[s * half + i] = static_cast<float>(std::cos(a));
        t.sinT[s * half + i] =
            static_cast<float>(inverse ? -std::sin(a) : std::sin(a));
      }
  });
  t.S = S;
  t.posOffset = posOffset;
  t.D = D;
  t.p = p;
  t.inverse = inverse;
  return t;
}
} // namespace

void rope(const float *x, float *y, int64_t B, int64_t S, int64_t H, int64_t D,
          const RopeParams &p, bool inverse, int64_t posOffset) {
  int64_t rot = ropeRotaryDims(p, D);
  int64_t half = rot / 2;
  const RopeTables &tables = ropeTables(S, posOffset, D, p, inverse);
  const std::vector<float> &cosT = tables.cosT, &sinT = tables.sinT;
  parallelFor(B * S, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t s = r % S;
      const float *c = cosT.data() + s * half, *sn = sinT.data() + s * half;
      for (int64_t h = 0; h < H; ++h) {
        const float *xi = x + (r * H + h) * D;
        float *yo = y + (r * H + h) * D;
        for (int64_t i = 0; i < half; ++i) {
          float a = xi[i], b = xi[i + half];
          yo[i] = a * c[i] - b * sn[i];
          yo[i + half] = b * c[i] + a * sn[i];
        }
        if (yo != xi)
          for (int64_t i = rot; i < D; ++i)
            yo[i] = xi[i];
      }
    }
  });
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

constexpr int64_t Bq = 64; // queries per tile
constexpr int64_t Bk = 64; // keys per tile
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

using detail::fexp;

/// 16 floats; unaligned loads and stores through memcpy. Each clone of the
/// tile loops maps it to one zmm, two ymm or four xmm registers.
typedef float vf16 __attribute__((vector_size(64)));
#if defined(__GNUC__) && !defined(__clang__)
// GCC notes that returning vf16 without AVX-512 passes it differently; the
// helpers are always inlined in this file, so no call crosses an ABI.
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

MTC_INLINE vf16 load16(const float *p) {
  vf16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
MTC_INLINE void store16(float *p, vf16 v) { std::memcpy(p, &v, sizeof v); }

/// c[r][0, 16V) (+)= sum_k a[r * ars + k * aks] * b[k * ldb + (0, 16V)] for
/// r < R: R rows times a panel, the R x 16V accumulators in registers and
/// each b row loaded once for all R rows. Every accumulator adds its terms in
/// k order, as rowPanel does (the same result as R rowPanel calls).
template <int R, int V>
MTC_INLINE void tile(const float *a, int64_t ars, int64_t aks, int64_t K,
                     const float *b, int64_t ldb, float *c, int64_t ldc,
                     bool accumulate) {
  vf16 t[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v)
      t[r][v] = accumulate ? load16(c + r * ldc + 16 * v) : vf16{};
  for (int64_t k = 0; k < K; ++k) {
    vf16 bv[V];
    for (int v = 0; v < V; ++v)
      bv[v] = load16(b + k * ldb + 16 * v);
    for (int r = 0; r < R; ++r) {
      float av = a[r * ars + k * aks];
      for (int v = 0; v < V; ++v)
        t[r][v] += av * bv[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v)
      store16(c + r * ldc + 16 * v, t[r][v]);
}

/// c[r][0, N) (+)= sum_k a[r * ars + k * aks] b[k * ldb + (0, N)] for r < R,
/// N a multiple of 16: panels of 64, 32 and 16 columns.
template <int R>
MTC_INLINE void rowsTimesMatrix(const float *a, int64_t ars, int64_t aks,
                                int64_t K, const float *b, int64_t ldb,
                                int64_t N, float *c, int64_t ldc,
                                bool accumulate) {
  int64_t n = 0;
  for (; n + 64 <= N; n += 64)
    tile<R, 4>(a, ars, aks, K, b + n, ldb, c + n, ldc, accumulate);
  for (; n + 32 <= N; n += 32)
    tile<R, 2>(a, ars, aks, K, b + n, ldb, c + n, ldc, accumulate);
  for (; n + 16 <= N; n += 16)
    tile<R, 1>(a, ars, aks, K, b + n, ldb, c + n, ldc, accumulate);
}

/// Rows of R = 4 at a time, then single rows: c[i] (+)= a[i] @ b for i < rows.
MTC_INLINE void blockTimesMatrix(const float *a, int64_t ars, int64_t aks,
                                 int64_t rows, int64_t K, const float *b,
                                 int64_t ldb, int64_t N, float *c, int64_t ldc,
                                 bool accumulate) {
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4)
    rowsTimesMatrix<4>(a + i * ars, ars, aks, K, b, ldb, N, c + i * ldc, ldc,
                       accumulate);
  for (; i < rows; ++i)
    rowsTimesMatrix<1>(a + i * ars, ars, aks, K, b, ldb, N, c + i * ldc, ldc,
                       accumulate);
}

struct Geometry {
  int64_t B, S, Sk, Hq, Hkv, D, Dp, G, qOffset, window;
  bool causal;
  float scale, cap;

  int64_t lo(int64_t pos) const {
    return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
  }
  int64_t hi(int64_t pos) const {
    return causal ? std::min<int64_t>(Sk, pos + 1) : Sk;
  }
  const float *qRow(const float *q, int64_t b, int64_t h, int64_t i) const {
    return q + ((b * S + i) * Hq + h) * D;
  }
  const float *kvRow(const float *k, int64_t b, int64_t hk, int64_t j) const {
    return k + ((b * Sk + j) * Hkv + hk) * D;
  }
};

Geometry makeGeometry(int64_t B, int64_t S, int64_t Sk, int64_t Hq, int64_t Hkv,
                      int64_t D, const AttentionParams &p, int64_t qOffset) {
  Geometry g;
  g.B = B;
  g.S = S;
  g.Sk = Sk;
  g.Hq = Hq;
  g.Hkv = Hkv;
  g.D = D;
  g.Dp = (D + 15) / 16 * 16;
  g.G = Hq / Hkv;
  g.qOffset = qOffset;
  g.window = p.window;
  g.causal = p.causal;
  g.scale =
      static_cast<float>(p.scale > 0 ? p.scale : 1.0 / std::sqrt(double(D)));
  g.cap = static_cast<float>(p.softcap);
  return g;
}

/// Gathers rows [j0, j0 + nk) of one kv head: transposed into t[Dp][Bk]
/// (zero padded) and, if rows != null, row-major into rows[Bk][Dp].
/// The transpose goes through 4 x 4 register blocks (a plain loop becomes
/// scatter stores, which are slow).
MTC_INLINE void gatherKeys(const Geometry &g, const float *src, int64_t b,
                           int64_t hk, int64_t j0, int64_t nk, float *t,
                           float *rows) {
  if (nk < Bk || g.D < g.Dp)
    std::memset(t, 0, sizeof(float) * g.Dp * Bk);
  if (rows && (nk < Bk || g.D < g.Dp))
    std::memset(rows, 0, sizeof(float) * Bk * g.Dp);
  int64_t jj = 0;
#if defined(__SSE__)
  const int64_t D4 = g.D / 4 * 4;
  for (; jj + 4 <= nk; jj += 4) {
    const float *r0 = g.kvRow(src, b, hk, j0 + jj);
    const float *r1 = g.kvRow(src, b, hk, j0 + jj + 1);
    const float *r2 = g.kvRow(src, b, hk, j0 + jj + 2);
    const float *r3 = g.kvRow(src, b, hk, j0 + jj + 3);
    int64_t d = 0;
    for (; d < D4; d += 4) {
      __m128 x0 = _mm_loadu_ps(r0 + d), x1 = _mm_loadu_ps(r1 + d);
      __m128 x2 = _mm_loadu_ps(r2 + d), x3 = _mm_loadu_ps(r3 + d);
      _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
      _mm_storeu_ps(t + d * Bk + jj, x0);
      _mm_storeu_ps(t + (d + 1) * Bk + jj, x1);
      _mm_storeu_ps(t + (d + 2) * Bk + jj, x2);
      _mm_storeu_ps(t + (d + 3) * Bk + jj, x3);
    }
    for (; d < g.D; ++d) {
      t[d * Bk + jj] = r0[d];
      t[d * Bk + jj + 1] = r1[d];
      t[d * Bk + jj + 2] = r2[d];
      t[d * Bk + jj + 3] = r3[d];
    }
  }
#endif
  for (; jj < nk; ++jj) {
    const float *r = g.kvRow(src, b, hk, j0 + jj);
#ifdef __clang__
#pragma clang loop vectorize(disable)
#endif
    for (int64_t d = 0; d < g.D; ++d)
      t[d * Bk + jj] = r[d];
  }
  if (rows)
    for (jj = 0; jj < nk; ++jj)
      std::memcpy(rows + jj * g.Dp, g.kvRow(src, b, hk, j0 + jj),
                  sizeof(float) * g.D);
}

/// Softcap and mask of one row of raw scores s = a . k (a is pre-scaled) to
/// [jlo, jhi) relative to the tile. If tanhOut != null it receives
/// tanh(raw / cap) (softcap only).
MTC_INLINE void finishScores(const Geometry &g, float *s, int64_t jlo,
                             int64_t jhi, float *tanhOut) {
  if (g.cap > 0) {
    float inv = 1.0f / g.cap;
    for (int64_t j = 0; j < Bk; ++j) {
      float th = detail::ftanh(s[j] * inv);
      if (tanhOut)
        tanhOut[j] = th;
      s[j] = g.cap * th;
    }
  }
  for (int64_t j = 0; j < jlo; ++j)
    s[j] = kNegInf;
  for (int64_t j = std::max<int64_t>(jhi, 0); j < Bk; ++j)
    s[j] = kNegInf;
}

/// Raw scores of query rows [0, rows) of a [.][Dp] against keys t[Dp][Bk]
/// into s[.][Bk].
MTC_INLINE void scoreRows(const Geometry &g, const float *a, int64_t rows,
                          const float *t, float *s) {
  blockTimesMatrix(a, g.Dp, 1, rows, g.Dp, t, Bk, Bk, s, Bk, false);
}

MTC_INLINE float maxOf64(const float *s) {
  float m[16];
  for (int l = 0; l < 16; ++l)
    m[l] = s[l];
  for (int64_t j = 16; j < Bk; j += 16)
    for (int l = 0; l < 16; ++l)
      m[l] = s[j + l] > m[l] ? s[j + l] : m[l];
  float r = m[0];
  for (int l = 1; l < 16; ++l)
    r = m[l] > r ? m[l] : r;
  return r;
}

MTC_INLINE float expSum64(float *s, float sub) {
  float a[16] = {};
  for (int64_t j = 0; j < Bk; j += 16)
    for (int l = 0; l < 16; ++l) {
      float e = fexp(s[j + l] - sub);
      s[j + l] = e;
      a[l] += e;
    }
  float r = 0;
  for (int l = 0; l < 16; ++l)
    r += a[l];
  return r;
}

/// Forward task: batch b, query head h, queries [i0, i1).
MTC_CLONES
void forwardTask(const Geometry &g, const float *q, const float *k,
                 const float *v, float *o, float *lse, int64_t b, int64_t h,
                 int64_t i0, int64_t i1, float *buf) {
  const int64_t Dp = g.Dp, nq = i1 - i0, hk = h / g.G;
  float *Qs = buf;          // [Bq][Dp]
  float *Oa = Qs + Bq * Dp; // [Bq][Dp]
  float *Kt = Oa + Bq * Dp; // [Dp][Bk]
  float *Vb = Kt + Dp * Bk; // [Bk][Dp]
  float *St = Vb + Bk * Dp; // [Bq][Bk]
  float m[Bq], l[Bq];
  bool active[Bq];
  std::memset(Qs, 0, sizeof(float) * Bq * Dp);
  std::memset(Oa, 0, sizeof(float) * Bq * Dp);
  for (int64_t ii = 0; ii < nq; ++ii) {
    const float *qr = g.qRow(q, b, h, i0 + ii);
    for (int64_t d = 0; d < g.D; ++d)
      Qs[ii * Dp + d] = qr[d] * g.scale;
    m[ii] = kNegInf;
    l[ii] = 0.0f;
  }
  int64_t jBegin = g.lo(g.qOffset + i0), jEnd = g.hi(g.qOffset + i1 - 1);
  for (int64_t j0 = jBegin; j0 < jEnd; j0 += Bk) {
    int64_t nk = std::min(Bk, g.Sk - j0);
    gatherKeys(g, k, b, hk, j0, nk, Kt, nullptr);
    if (nk < Bk || g.D < Dp)
      std::memset(Vb, 0, sizeof(float) * Bk * Dp);
    for (int64_t jj = 0; jj < nk; ++jj)
      std::memcpy(Vb + jj * Dp, g.kvRow(v, b, hk, j0 + jj),
                  sizeof(float) * g.D);
    // Scores of every row (rows that see no key of this tile are ignored).
    scoreRows(g, Qs, nq, Kt, St);
    bool allActive = true;
    for (int64_t ii = 0; ii < nq; ++ii) {
      int64_t pos = g.qOffset + i0 + ii;
      int64_t jlo = g.lo(pos) - j0, jhi = std::min(g.hi(pos) - j0, nk);
      active[ii] = jhi > 0 && jlo < nk;
      if (!active[ii]) {
        allActive = false;
        continue;
      }
      float *s = St + ii * Bk;
      finishScores(g, s, jlo, jhi, nullptr);
      float mNew = std::max(m[ii], maxOf64(s));
      float corr = fexp(m[ii] - mNew); // 0 when m was -inf
      float sum = expSum64(s, mNew);
      l[ii] = l[ii] * corr + sum;
      m[ii] = mNew;
      float *orow = Oa + ii * Dp;
      if (corr != 1.0f)
        for (int64_t d = 0; d < Dp; ++d)
          orow[d] *= corr;
    }
    // O += P V, four rows at a time when all of them take part.
    if (allActive) {
      blockTimesMatrix(St, Bk, 1, nq, Bk, Vb, Dp, Dp, Oa, Dp, true);
    } else {
      for (int64_t ii = 0; ii < nq; ++ii)
        if (active[ii])
          rowsTimesMatrix<1>(St + ii * Bk, Bk, 1, Bk, Vb, Dp, Dp, Oa + ii * Dp,
                             Dp, true);
    }
  }
  for (int64_t ii = 0; ii < nq; ++ii) {
    int64_t i = i0 + ii;
    float *out = o + ((b * g.S + i) * g.Hq + h) * g.D;
    float inv = l[ii] > 0.0f ? 1.0f / l[ii] : 0.0f;
    for (int64_t d = 0; d < g.D; ++d)
      out[d] = Oa[ii * Dp + d] * inv;
    if (lse)
      lse[(b * g.Hq + h) * g.S + i] =
          l[ii] > 0.0f ? m[ii] + std::log(l[ii]) : kNegInf;
  }
}

/// Backward pass 1 task: batch b, kv head hk, keys [j0, j0 + nk).
MTC_CLONES
void gradKVTask(const Geometry &g, const float *q, const float *k,
                const float *v, const float *lse, const float *delta,
                const float *dO, float *dk, float *dv, int64_t b, int64_t hk,
                int64_t j0, int64_t nk, float *buf) {
  const int64_t Dp = g.Dp;
  float *Kt = buf;            // [Dp][Bk]
  float *Vt = Kt + Dp * Bk;   // [Dp][Bk]
  float *dKa = Vt + Dp * Bk;  // [Bk][Dp]
  float *dVa = dKa + Bk * Dp; // [Bk][Dp]
  float *Qs = dVa + Bk * Dp;  // [Bq][Dp]
  float *dOb = Qs + Bq * Dp;  // [Bq][Dp]
  float *P = dOb + Bq * Dp;   // [Bq][Bk]
  float *dP = P + Bq * Bk;    // [Bq][Bk]
  float *Th = dP + Bq * Bk;   // [Bq][Bk] tanh (softcap)
  gatherKeys(g, k, b, hk, j0, nk, Kt, nullptr);
  gatherKeys(g, v, b, hk, j0, nk, Vt, nullptr);
  std::memset(dKa, 0, sizeof(float) * Bk * Dp);
  std::memset(dVa, 0, sizeof(float) * Bk * Dp);
  std::memset(Qs, 0, sizeof(float) * Bq * Dp);
  std::memset(dOb, 0, sizeof(float) * Bq * Dp);
  // Key rows [0, nkr) of the accumulators are updated: nk rounded up to the
  // 4-row blocks (rows past nk see P = dS = 0 and are never written out).
  const int64_t nkr = std::min<int64_t>(Bk, (nk + 3) / 4 * 4);
  for (int64_t gi = 0; gi < g.G; ++gi) {
    int64_t h = hk * g.G + gi;
    for (int64_t i0 = 0; i0 < g.S; i0 += Bq) {
      int64_t nq = std::min(Bq, g.S - i0);
      // Does any row of this query block see a key of this block?
      int64_t first = g.qOffset + i0, last = g.qOffset + i0 + nq - 1;
      if (g.hi(last) <= j0 || g.lo(first) >= j0 + nk)
        continue;
      for (int64_t ii = 0; ii < nq; ++ii) {
        const float *qr = g.qRow(q, b, h, i0 + ii);
        const float *gr = g.qRow(dO, b, h, i0 + ii);
        for (int64_t d = 0; d < g.D; ++d) {
          Qs[ii * Dp + d] = qr[d] * g.scale;
          dOb[ii * Dp + d] = gr[d];
        }
      }
      // Raw scores S = Qs K^T and dP = dO V^T for every row of the block.
      scoreRows(g, Qs, nq, Kt, P);
      scoreRows(g, dOb, nq, Vt, dP);
      for (int64_t ii = 0; ii < nq; ++ii) {
        int64_t i = i0 + ii, pos = g.qOffset + i;
        float *p = P + ii * Bk, *dp = dP + ii * Bk, *th = Th + ii * Bk;
        float L = lse[(b * g.Hq + h) * g.S + i];
        float Di = delta[(b * g.Hq + h) * g.S + i];
        int64_t jlo = g.lo(pos) - j0, jhi = std::min(g.hi(pos) - j0, nk);
        if (jhi <= 0 || jlo >= nk || L == kNegInf) {
          for (int64_t j = 0; j < Bk; ++j)
            p[j] = dp[j] = 0.0f;
          continue;
        }
        finishScores(g, p, jlo, jhi, th);
        for (int64_t j = 0; j < Bk; ++j)
          p[j] = fexp(p[j] - L);
        // dp <- dS = P (dP - Delta) [* (1 - tanh^2)]
        if (g.cap > 0)
          for (int64_t j = 0; j < Bk; ++j)
            dp[j] = p[j] * (dp[j] - Di) * (1.0f - th[j] * th[j]);
        else
          for (int64_t j = 0; j < Bk; ++j)
            dp[j] = p[j] * (dp[j] - Di);
      }
      // dV += P^T dO, dK += dS^T Qs: key rows of P^T are P's columns.
      blockTimesMatrix(P, 1, Bk, nkr, nq, dOb, Dp, Dp, dVa, Dp, true);
      blockTimesMatrix(dP, 1, Bk, nkr, nq, Qs, Dp, Dp, dKa, Dp, true);
    }
  }
  for (int64_t jj = 0; jj < nk; ++jj) {
    int64_t off = ((b * g.Sk + j0 + jj) * g.Hkv + hk) * g.D;
    std::memcpy(dk + off, dKa + jj * Dp, sizeof(float) * g.D);
    std::memcpy(dv + off, dVa + jj * Dp, sizeof(float) * g.D);
  }
}

/// Backward pass 2 task: batch b, query head h, queries [i0, i0 + nq).
MTC_CLONES
void gradQTask(const Geometry &g, const float *q, const float *k,
               const float *v, const float *lse, const float *delta,
               const float *dO, float *dq, int64_t b, int64_t h, int64_t i0,
               int64_t nq, float *buf) {
  const int64_t Dp = g.Dp, hk = h / g.G;
  float *Kt = buf;            // [Dp][Bk]
  float *Vt = Kt + Dp * Bk;   // [Dp][Bk]
  float *Kb = Vt + Dp * Bk;   // [Bk][Dp]
  float *Qs = Kb + Bk * Dp;   // [Bq][Dp]
  float *dOb = Qs + Bq * Dp;  // [Bq][Dp]
  float *dQa = dOb + Bq * Dp; // [Bq][Dp]
  float *P = dQa + Bq * Dp;   // [Bq][Bk]
  float *dP = P + Bq * Bk;    // [Bq][Bk]
  float *Th = dP + Bq * Bk;   // [Bq][Bk]
  bool active[Bq];
  std::memset(Qs, 0, sizeof(float) * Bq * Dp);
  std::memset(dOb, 0, sizeof(float) * Bq * Dp);
  std::memset(dQa, 0, sizeof(float) * Bq * Dp);
  for (int64_t ii = 0; ii < nq; ++ii) {
    const float *qr = g.qRow(q, b, h, i0 + ii);
    const float *gr = g.qRow(dO, b, h, i0 + ii);
    for (int64_t d = 0; d < g.D; ++d) {
      Qs[ii * Dp + d] = qr[d] * g.scale;
      dOb[ii * Dp + d] = gr[d];
    }
  }
  int64_t jBegin = g.lo(g.qOffset + i0), jEnd = g.hi(g.qOffset + i0 + nq - 1);
  for (int64_t j0 = jBegin; j0 < jEnd; j0 += Bk) {
    int64_t nk = std::min(Bk, g.Sk - j0);
    gatherKeys(g, k, b, hk, j0, nk, Kt, Kb);
    gatherKeys(g, v, b, hk, j0, nk, Vt, nullptr);
    scoreRows(g, Qs, nq, Kt, P);
    scoreRows(g, dOb, nq, Vt, dP);
    bool allActive = true;
    for (int64_t ii = 0; ii < nq; ++ii) {
      int64_t i = i0 + ii, pos = g.qOffset + i;
      float L = lse[(b * g.Hq + h) * g.S + i];
      float Di = delta[(b * g.Hq + h) * g.S + i];
      int64_t jlo = g.lo(pos) - j0, jhi = std::min(g.hi(pos) - j0, nk);
      active[ii] = !(jhi <= 0 || jlo >= nk || L == kNegInf);
      if (!active[ii]) {
        allActive = false;
        continue;
      }
      float *p = P + ii * Bk, *dp = dP + ii * Bk, *th = Th + ii * Bk;
      finishScores(g, p, jlo, jhi, th);
      for (int64_t j = 0; j < Bk; ++j)
        p[j] = fexp(p[j] - L);
      if (g.cap > 0)
        for (int64_t j = 0; j < Bk; ++j)
          dp[j] = p[j] * (dp[j] - Di) * (1.0f - th[j] * th[j]);
      else
        for (int64_t j = 0; j < Bk; ++j)
          dp[j] = p[j] * (dp[j] - Di);
    }
    // dQ += dS K, four rows at a time when all of them take part.
    if (allActive) {
      blockTimesMatrix(dP, Bk, 1, nq, nk, Kb, Dp, Dp, dQa, Dp, true);
    } else {
      for (int64_t ii = 0; ii < nq; ++ii)
        if (active[ii])
          rowsTimesMatrix<1>(dP + ii * Bk, Bk, 1, nk, Kb, Dp, Dp, dQa + ii * Dp,
                             Dp, true);
    }
  }
  for (int64_t ii = 0; ii < nq; ++ii) {
    float *out = dq + ((b * g.S + i0 + ii) * g.Hq + h) * g.D;
    for (int64_t d = 0; d < g.D; ++d)
      out[d] = dQa[ii * Dp + d] * g.scale;
  }
}

} // namespace

void attention(const float *q, const float *k, const float *v, float *o,
               float *lse, int64_t B, int64_t S, int64_t Sk, int64_t Hq,
               int64_t Hkv, int64_t D, const AttentionParams &p,
               int64_t qOffset) {
  Geometry g = makeGeometry(B, S, Sk, Hq, Hkv, D, p, qOffset);
  int64_t qBlocks = (S + Bq - 1) / Bq;
  int64_t tasks = B * Hq * qBlocks;
  size_t bufSize = 2 * Bq * g.Dp + 2 * Bk * g.Dp + Bq * Bk;
  parallelFor(tasks, [&](int64_t t0, int64_t t1) {
    std::vector<float> buf(bufSize);
    for (int64_t t = t0; t < t1; ++t) {
      int64_t qb = t % qBlocks, bh = t / qBlocks;
      int64_t h = bh % Hq, b = bh / Hq;
      int64_t i0 = qb * Bq, i1 = std::min(S, i0 + Bq);
      forwardTask(g, q, k, v, o, lse, b, h, i0, i1, buf.data());
    }
  });
}

void attentionGrad(const float *q, const float *k, const float *v,
                   const float *o, const float *lse, const float *dO, float *dq,
                   float *dk, float *dv, int64_t B, int64_t S, int64_t Hq,
                   int64_t Hkv, int64_t D, const AttentionParams &p) {
  Geometry g = makeGeometry(B, S, S, Hq, Hkv, D, p, 0);
  // Delta = rowsum(dO * O), [B, Hq, S].
  std::vector<float> delta(B * Hq * S);
  parallelFor(B * S, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t b = r / S, i = r % S;
      for (int64_t h = 0; h < Hq; ++h) {
        const float *a = g.qRow(o, b, h, i), *c = g.qRow(dO, b, h, i);
        double s = 0.0;
        for (int64_t d = 0; d < D; ++d)
          s += double(a[d]) * double(c[d]);
        delta[(b * Hq + h) * S + i] = static_cast<float>(s);
      }
    }
  });
  int64_t kBlocks = (S + Bk - 1) / Bk;
  size_t buf1 = 2 * g.Dp * Bk + 2 * Bk * g.Dp + 2 * Bq * g.Dp + 3 * Bq * Bk;
  parallelFor(B * Hkv * kBlocks, [&](int64_t t0, int64_t t1) {
    std::vector<float> buf(buf1);
    for (int64_t t = t0; t < t1; ++t) {
      int64_t kb = t % kBlocks, bh = t / kBlocks;
      int64_t hk = bh % Hkv, b = bh / Hkv;
      int64_t j0 = kb * Bk;
      gradKVTask(g, q, k, v, lse, delta.data(), dO, dk, dv, b, hk, j0,
                 std::min(Bk, S - j0), buf.data());
    }
  });
  int64_t qBlocks = (S + Bq - 1) / Bq;
  size_t buf2 = 2 * g.Dp * Bk + Bk * g.Dp + 3 * Bq * g.Dp + 3 * Bq * Bk;
  parallelFor(B * Hq * qBlocks, [&](int64_t t0, int64_t t1) {
    std::vector<float> buf(buf2);
    for (int64_t t = t0; t < t1; ++t) {
      int64_t qb = t % qBlocks, bh = t / qBlocks;
      int64_t h = bh % Hq, b = bh / Hq;
      int64_t i0 = qb * Bq;
      gradQTask(g, q, k, v, lse, delta.data(), dO, dq, b, h, i0,
                std::min(Bq, S - i0), buf.data());
    }
  });
}

} // namespace mtc::cpu
