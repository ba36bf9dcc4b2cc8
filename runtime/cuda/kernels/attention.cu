//===- attention.cu - Flash attention forward and backward (CUDA C) -------===//
//
// Part of mtc. The library kernels of attention; cpu::attention and
// cpu::attentionGrad (runtime/cpu/Attention.cpp) are the reference.
//
// Layouts (storage T = f32 or bf16, fp32 math everywhere):
//   q, o, dO, dq  [B, S, Hq, D]      k, v, dk, dv  [B, Sk, Hkv, D]
//   lse, delta    [B, Hq, S] f32     (Hkv divides Hq; query head h reads kv
//                                     head h / (Hq / Hkv): GQA)
// Query i sits at position pos = qOffset + i and sees key j iff
//   lo(pos) <= j < hi(pos),  lo = window > 0 ? pos - window + 1 : 0,
//                            hi = causal ? pos + 1 : Sk   (and j < Sk),
// logits l = scale (q . k), then softcap * tanh(l / softcap) when
// softcap > 0; scale <= 0 means 1 / sqrt(D). A row that sees no key gets
// o = 0 and lse = -inf.
//
// Entries (D in {64, 80, 96, 128, 256}, one per D and storage type; BK = 64
// for D <= 128, 32 for D = 256; smem: the dynamic shared memory bytes, per
// D in a table in docs/cuda-kernels.md; above 48 KiB the launcher raises
// the limit):
//
//   attention_fwd_{f32,bf16}_d<D> (q, k, v, o, lse, S, Sk, Hq, Hkv, qOffset,
//                                  causal, window, scale, softcap)
//       grid (ceil(S / 64), Hq, B), block 128, smem (64 + 2 BK) (D + P)
//       sizeof(T), P = 16 / sizeof(T). o overwritten; lse written unless
//       null. Sk = qOffset + S for a KV cache.
//   attention_bwd_delta_{f32,bf16} (o, dO, delta, rows, S, H, D)
//       grid (ceil(rows / 4)), block 128 (one warp per row), no smem;
//       rows = B S H: delta[b, h, i] = sum_d dO[b, i, h, d] o[b, i, h, d].
//   attention_bwd_dkdv_{f32,bf16}_d<D> (q, k, v, dO, lse, delta, dk, dv, S,
//                                       Hq, Hkv, causal, window, scale,
//                                       softcap)
//       grid (ceil(S / BK), Hkv, B), block 2 BK (BK / 16 warps),
//       smem 8 BK D + 8 BQ + (2 BK + 2 BQ) (D + P) sizeof(T), BQ = BK.
//       dk, dv overwritten (Sk = S, qOffset = 0, as cpu::attentionGrad).
//   attention_bwd_dq_{f32,bf16}_d<D> (q, k, v, dO, lse, delta, dq, S, Hq,
//                                     Hkv, causal, window, scale, softcap)
//       grid (ceil(S / 64), Hq, B), block 128,
//       smem (2 64 + 2 BK) (D + P) sizeof(T). dq overwritten.
//   The backward runs delta, then dkdv and dq (independent of each other).
//
// Algorithm (FlashAttention-2). A warp owns 16 rows of a tile and holds its
// scores and accumulators in the register layout of mma.m16n8k16's C
// fragment: lane (g = lane / 4, t = lane % 4) holds rows g and g + 8,
// columns 8n + 2t and 8n + 2t + 1 of every 8-column group n. Q, K, V, dO
// tiles are staged in shared memory (rows padded by 16 bytes against bank
// conflicts); 16-byte loads when the tensors are 16-byte aligned, scalar
// ones otherwise.
//   forward: block = 64 queries of one (b, h); one pass over the key tiles
//     that intersect the rows' visible ranges; online softmax (running max
//     m and sum l per row, O rescaled by exp(m_old - m_new)); O / l and
//     lse = m + log l at the end.
//   dkdv: block = BK keys of one (b, kv head); loops over the group's query
//     heads in order and, for each, over the query tiles that see the keys:
//     P^T = exp(S^T - lse), dS^T = P^T (dP^T - delta) (times 1 - tanh^2
//     with softcap), dV += P^T dO, dK += dS^T Q, accumulated in fp32 shared
//     memory (registers could not hold both at D = 128 and 256). A kv head's
//     rows are owned by one block: GQA sums have one fixed order, no
//     atomics.
//   dq: block = 64 queries of one (b, h); loops over the key tiles:
//     dQ += dS K.
// Every sum has a fixed order (key order within a thread, xor butterflies
// across the four lanes of a row): results do not depend on the schedule.
//
// Two paths of the same tiling, chosen per storage type: bf16 on sm_80+
// multiplies tiles with tensor cores (mma.sync.aligned.m16n8k16, bf16
// inputs, fp32 accumulation; P and dS are rounded to bf16 as the A operand
// of the second product), f32 storage -- and everything under
// MTC_CUDA_PORTABLE (the emulator) -- with fp32 FMAs on the same fragments
// (SIMT: operands read from shared memory, P and dS exchanged between the
// four lanes of a row by shuffles). Only rowsDotRows and accumulateProduct
// differ between the two.
//
//===----------------------------------------------------------------------===//
#include "common.cuh"

#if !defined(MTC_CUDA_PORTABLE) && defined(__CUDA_ARCH__) &&                   \
    __CUDA_ARCH__ >= 800
#define MTC_ATTN_MMA 1
#endif

/// The dynamic shared memory of the running block (declared at global
/// namespace scope, as the emulator's build requires).
static __device__ __forceinline__ unsigned char *attnSharedBytes() {
  extern __shared__ __align__(16) unsigned char attnSmem[];
  return attnSmem;
}

namespace {

using namespace mtc_cuda;

__device__ __forceinline__ float negInf() { return __int_as_float(0xff800000); }

/// Tile sizes per head dimension (what the emulator tests is what the GPU
/// runs: the entries fix them). At D = 256 the key tiles halve so that the
/// f32 tiles fit in shared memory.
template <int D> struct Tiles {
  static constexpr int kBlockQ = 64; ///< forward / dq: query rows per block
  static constexpr int kBlockK = D <= 128 ? 64 : 32; ///< keys per tile
  /// dkdv: keys per block and query rows per step.
  static constexpr int kBwdKeys = kBlockK, kBwdQueries = kBlockK;
};

/// Row pitch, in elements, of a staged tile: 16 bytes of padding.
template <typename T, int D> struct Pitch {
  static constexpr int value = D + 16 / static_cast<int>(sizeof(T));
};

template <typename T> struct UseMma { static constexpr bool value = false; };
#ifdef MTC_ATTN_MMA
template <> struct UseMma<bf16> { static constexpr bool value = true; };
#endif

/// The visibility rule of the file banner.
struct Mask {
  int Sk, qOffset, causal, window;
  __device__ __forceinline__ int lo(int pos) const {
    return window > 0 ? max(0, pos - window + 1) : 0;
  }
  __device__ __forceinline__ int hi(int pos) const {
    return causal ? min(Sk, pos + 1) : Sk;
  }
  __device__ __forceinline__ bool visible(int i, int j) const {
    const int pos = qOffset + i;
    return j < Sk && (!causal || j <= pos) && (window <= 0 || pos - j < window);
  }
};

__device__ __forceinline__ bool aligned16(const void *p) {
  return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

/// Stages rows [0, rows) of a tile into dst[rows][ld]: row r from
/// src + r * stride (elements) when r < valid, zeros beyond. All threads of
/// the block take part; the caller synchronises.
template <typename T, int D>
__device__ __forceinline__ void stageRows(T *dst, int ld, const T *src,
                                          size_t stride, int rows, int valid,
                                          bool vec) {
  if (vec) {
    // D sizeof(T) is a multiple of 16 for every supported D, so rows and
    // pitches stay 16-byte aligned once the tensor is.
    constexpr int kPer = 16 / static_cast<int>(sizeof(T));
    constexpr int kChunks = D / kPer;
    for (int idx = threadIdx.x; idx < rows * kChunks; idx += blockDim.x) {
      const int r = idx / kChunks, c = idx % kChunks;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (r < valid)
        val = *reinterpret_cast<const uint4 *>(src + r * stride + c * kPer);
      *reinterpret_cast<uint4 *>(dst + r * ld + c * kPer) = val;
    }
    return;
  }
  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, c = idx % D;
    dst[r * ld + c] = r < valid ? src[r * stride + c] : fromFloat<T>(0.0f);
  }
}

//===----------------------------------------------------------------------===//
// The two warp-level products (SIMT and tensor-core paths)
//===----------------------------------------------------------------------===//

#ifdef MTC_ATTN_MMA
/// c += a b for one m16n8k16 tile (bf16 inputs, fp32 accumulation).
__device__ __forceinline__ void mma16816(float c[4], const unsigned a[4],
                                         const unsigned b[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// Two adjacent bf16 of shared memory (4-byte aligned) as one register.
__device__ __forceinline__ unsigned loadPair(const bf16 *p) {
  return *reinterpret_cast<const unsigned *>(p);
}

/// lo in the low half, hi in the high half (the operand order of mma).
__device__ __forceinline__ unsigned packPair(bf16 lo, bf16 hi) {
  return static_cast<unsigned>(__bfloat16_as_ushort(lo)) |
         (static_cast<unsigned>(__bfloat16_as_ushort(hi)) << 16);
}
__device__ __forceinline__ unsigned packPair(float lo, float hi) {
  return packPair(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}
#endif

/// acc[n][.] = sum over d < D of a[row][d] b[8n + col][d], for the fragment
/// positions (row, col) of the calling lane: the scores of the warp's 16
/// rows of a (pitch lda) against NT * 8 rows of b (pitch ldb).
template <typename T, int NT, int D>
__device__ __forceinline__ void rowsDotRows(float (&acc)[NT][4], const T *a,
                                            int lda, const T *b, int ldb) {
  const int lane = threadIdx.x % kWarpSize, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < NT; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#ifdef MTC_ATTN_MMA
  if constexpr (UseMma<T>::value) {
    for (int kk = 0; kk < D / 16; ++kk) {
      const T *pa = a + g * lda + 16 * kk + 2 * t;
      const unsigned af[4] = {loadPair(pa), loadPair(pa + 8 * lda),
                              loadPair(pa + 8), loadPair(pa + 8 * lda + 8)};
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const T *pb = b + (8 * n + g) * ldb + 16 * kk + 2 * t;
        const unsigned bfr[2] = {loadPair(pb), loadPair(pb + 8)};
        mma16816(acc[n], af, bfr);
      }
    }
    return;
  }
#endif
  const T *a0 = a + g * lda, *a1 = a0 + 8 * lda;
  const T *b0 = b + 2 * t * ldb;
#pragma unroll 2
  for (int d = 0; d < D; ++d) {
    const float x0 = toFloat(a0[d]), x1 = toFloat(a1[d]);
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const float y0 = toFloat(b0[8 * n * ldb + d]);
      const float y1 = toFloat(b0[(8 * n + 1) * ldb + d]);
      acc[n][0] = fmaf(x0, y0, acc[n][0]);
      acc[n][1] = fmaf(x0, y1, acc[n][1]);
      acc[n][2] = fmaf(x1, y0, acc[n][2]);
      acc[n][3] = fmaf(x1, y1, acc[n][3]);
    }
  }
}

/// acc[n][.] += sum over j < 8 KT of p[row][j] b[j][8n + col]: p is the
/// warp's [16][8 KT] tile in C-fragment layout (scores turned into
/// probabilities or dS), b a staged tile of 8 KT rows (pitch ldb), already
/// offset to the first of the NT * 8 columns.
template <typename T, int KT, int NT>
__device__ __forceinline__ void accumulateProduct(float (&acc)[NT][4],
                                                  const float (&p)[KT][4],
                                                  const T *b, int ldb) {
  const int lane = threadIdx.x % kWarpSize, t = lane % 4;
#ifdef MTC_ATTN_MMA
  if constexpr (UseMma<T>::value) {
    const int g = lane / 4;
    // C fragments of columns 16kk..16kk+15 are the A fragment of k-step kk.
#pragma unroll
    for (int kk = 0; kk < KT / 2; ++kk) {
      const unsigned af[4] = {packPair(p[2 * kk][0], p[2 * kk][1]),
                              packPair(p[2 * kk][2], p[2 * kk][3]),
                              packPair(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                              packPair(p[2 * kk + 1][2], p[2 * kk + 1][3])};
      const T *pb = b + (16 * kk + 2 * t) * ldb + g;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const unsigned bfr[2] = {
            packPair(pb[8 * n], pb[ldb + 8 * n]),
            packPair(pb[8 * ldb + 8 * n], pb[9 * ldb + 8 * n])};
        mma16816(acc[n], af, bfr);
      }
    }
    return;
  }
#endif
  // Lane (g, tp) holds row g's (and g + 8's) columns 8m + 2tp, 8m + 2tp + 1:
  // fetch them from there, in column order.
#pragma unroll
  for (int m = 0; m < KT; ++m) {
#pragma unroll 1
    for (int tp = 0; tp < 4; ++tp) {
      const int src = (lane & ~3) | tp;
      const float pa0 = __shfl_sync(kFullMask, p[m][0], src);
      const float pa1 = __shfl_sync(kFullMask, p[m][1], src);
      const float pb0 = __shfl_sync(kFullMask, p[m][2], src);
      const float pb1 = __shfl_sync(kFullMask, p[m][3], src);
      const T *r0 = b + (8 * m + 2 * tp) * ldb + 2 * t, *r1 = r0 + ldb;
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float v0 = toFloat(r0[8 * n + e]), v1 = toFloat(r1[8 * n + e]);
          acc[n][e] = fmaf(pa1, v1, fmaf(pa0, v0, acc[n][e]));
          acc[n][2 + e] = fmaf(pb1, v1, fmaf(pb0, v0, acc[n][2 + e]));
        }
    }
  }
}

/// Max / sum over the four lanes that share a fragment row.
__device__ __forceinline__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kFullMask, v, 2));
}
__device__ __forceinline__ float quadSum(float v) {
  v += __shfl_xor_sync(kFullMask, v, 1);
  return v + __shfl_xor_sync(kFullMask, v, 2);
}

/// Scaled, soft-capped logit of a raw dot product; *th receives
/// tanh(l / softcap) (0 without softcap) for the backward's derivative.
__device__ __forceinline__ float logit(float dot, float scale, float softcap,
                                       float *th) {
  const float l = dot * scale;
  if (softcap > 0.0f) {
    *th = tanhf(l / softcap);
    return softcap * *th;
  }
  *th = 0.0f;
  return l;
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <typename T, int D>
__device__ __forceinline__ void
attentionForward(const T *q, const T *k, const T *v, T *o, float *lse, int S,
                 int Sk, int Hq, int Hkv, int qOffset, int causal, int window,
                 float scale, float softcap) {
  constexpr int BQ = Tiles<D>::kBlockQ, BK = Tiles<D>::kBlockK;
  constexpr int LD = Pitch<T, D>::value, NT = D / 8, KT = BK / 8;
  T *Qs = reinterpret_cast<T *>(attnSharedBytes()); // [BQ][LD]
  T *Ks = Qs + BQ * LD;                             // [BK][LD]
  T *Vs = Ks + BK * LD;                             // [BK][LD]
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * BQ;
  const int hk = h / (Hq / Hkv);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const Mask mask{Sk, qOffset, causal, window};
  if (scale <= 0.0f)
    scale = rsqrtf(static_cast<float>(D));
  const bool vec = aligned16(q) && aligned16(k) && aligned16(v);
  const size_t kvStride = static_cast<size_t>(Hkv) * D;
  stageRows<T, D>(Qs, LD, q + ((static_cast<size_t>(b) * S + i0) * Hq + h) * D,
                  static_cast<size_t>(Hq) * D, BQ, min(BQ, S - i0), vec);

  const int row0 = i0 + 16 * warp + g; // this lane's rows: row0, row0 + 8
  float m[2] = {negInf(), negInf()}, l[2] = {0.0f, 0.0f};
  float acc[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

  const int last = min(S, i0 + BQ) - 1;
  const int jEnd = mask.hi(qOffset + last);
  for (int j0 = mask.lo(qOffset + i0); j0 < jEnd; j0 += BK) {
    __syncthreads(); // the previous tile is no longer read
    const size_t kvBase = (static_cast<size_t>(b) * Sk + j0) * Hkv + hk;
    stageRows<T, D>(Ks, LD, k + kvBase * D, kvStride, BK, min(BK, Sk - j0),
                    vec);
    stageRows<T, D>(Vs, LD, v + kvBase * D, kvStride, BK, min(BK, Sk - j0),
                    vec);
    __syncthreads();
    float s[KT][4];
    rowsDotRows<T, KT, D>(s, Qs + 16 * warp * LD, LD, Ks, LD);
    float tileMax[2] = {negInf(), negInf()};
#pragma unroll
    for (int n = 0; n < KT; ++n)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = row0 + 8 * (r / 2), j = j0 + 8 * n + 2 * t + r % 2;
        float th;
        const float x = logit(s[n][r], scale, softcap, &th);
        s[n][r] = mask.visible(i, j) ? x : negInf();
        tileMax[r / 2] = fmaxf(tileMax[r / 2], s[n][r]);
      }
    float mUse[2], corr[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float mNew = fmaxf(m[half], quadMax(tileMax[half]));
      // A row that has seen no key yet keeps m = -inf: subtract 0 instead,
      // so that exp(-inf - -inf) never makes a NaN.
      mUse[half] = mNew == negInf() ? 0.0f : mNew;
      corr[half] = __expf(m[half] - mUse[half]);
      m[half] = mNew;
      l[half] *= corr[half];
    }
#pragma unroll
    for (int n = 0; n < KT; ++n)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        s[n][r] = __expf(s[n][r] - mUse[r / 2]);
        l[r / 2] += s[n][r];
      }
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        acc[n][r] *= corr[r / 2];
    accumulateProduct<T, KT, NT>(acc, s, Vs, LD);
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float sum = quadSum(l[half]);
    const int i = row0 + 8 * half;
    if (i >= S)
      continue;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    T *out = o + ((static_cast<size_t>(b) * S + i) * Hq + h) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      out[8 * n] = fromFloat<T>(acc[n][2 * half] * inv);
      out[8 * n + 1] = fromFloat<T>(acc[n][2 * half + 1] * inv);
    }
    if (lse && t == 0)
      lse[(static_cast<size_t>(b) * Hq + h) * S + i] =
          sum > 0.0f ? m[half] + logf(sum) : negInf();
  }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

template <typename T>
__device__ __forceinline__ void attentionDelta(const T *o, const T *dO,
                                               float *delta, int rows, int S,
                                               int H, int D) {
  const int lane = threadIdx.x % kWarpSize;
  const int r = blockIdx.x * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize;
  if (r >= rows) // the whole warp leaves
    return;
  const size_t base = static_cast<size_t>(r) * D;
  float s = 0.0f;
  for (int d = lane; d < D; d += kWarpSize)
    s = fmaf(toFloat(o[base + d]), toFloat(dO[base + d]), s);
  s = warpSum(s);
  if (lane == 0) {
    const int b = r / (S * H), i = r / H % S, h = r % H;
    delta[(static_cast<size_t>(b) * H + h) * S + i] = s;
  }
}

/// P and dS of one fragment element: p = exp(logit - L) where visible,
/// ds = p (dp - Di) (times 1 - tanh^2 with softcap).
__device__ __forceinline__ void probabilityAndGrad(float &s, float &dp,
                                                   bool visible, float L,
                                                   float Di, float scale,
                                                   float softcap) {
  float th;
  const float x = logit(s, scale, softcap, &th);
  const float p = visible && L != negInf() ? __expf(x - L) : 0.0f;
  float ds = p * (dp - Di);
  if (softcap > 0.0f)
    ds *= 1.0f - th * th;
  s = p;
  dp = ds;
}

template <typename T, int D>
__device__ __forceinline__ void
attentionBackwardDkDv(const T *q, const T *k, const T *v, const T *dO,
                      const float *lse, const float *delta, T *dk, T *dv, int S,
                      int Hq, int Hkv, int causal, int window, float scale,
                      float softcap) {
  constexpr int BK = Tiles<D>::kBwdKeys, BQ = Tiles<D>::kBwdQueries;
  constexpr int LD = Pitch<T, D>::value, NT = D / 8, QT = BQ / 8;
  // dV / dK columns are updated NC fragments (8 NC columns) at a time.
  constexpr int NC = NT % 8 == 0 ? 8 : NT % 6 == 0 ? 6 : NT % 5 == 0 ? 5 : 4;
  static_assert(NT % NC == 0, "column chunk must divide D / 8");
  constexpr int kWarps = BK / 16;
  // Accumulators fragment-major ([warp][n][r][lane]): each lane reads and
  // writes only its own elements, conflict-free.
  float *dKacc = reinterpret_cast<float *>(attnSharedBytes()); // [BK * D]
  float *dVacc = dKacc + BK * D;                               // [BK * D]
  float *Ls = dVacc + BK * D;                                  // [BQ]
  float *Ds = Ls + BQ;                                         // [BQ]
  T *Ks = reinterpret_cast<T *>(Ds + BQ);                      // [BK][LD]
  T *Vs = Ks + BK * LD;                                        // [BK][LD]
  T *Qs = Vs + BK * LD;                                        // [BQ][LD]
  T *dOs = Qs + BQ * LD;                                       // [BQ][LD]
  static_assert(kWarps * NT * 4 * kWarpSize == BK * D, "accumulator layout");

  const int b = blockIdx.z, hk = blockIdx.y, j0 = blockIdx.x * BK;
  const int G = Hq / Hkv;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const Mask mask{S, 0, causal, window};
  if (scale <= 0.0f)
    scale = rsqrtf(static_cast<float>(D));
  const bool vec =
      aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dO);
  float *myK = dKacc + warp * NT * 4 * kWarpSize + lane;
  float *myV = dVacc + warp * NT * 4 * kWarpSize + lane;
  for (int e = 0; e < NT * 4; ++e)
    myK[e * kWarpSize] = myV[e * kWarpSize] = 0.0f;
  const size_t kvBase = (static_cast<size_t>(b) * S + j0) * Hkv + hk;
  const size_t kvStride = static_cast<size_t>(Hkv) * D;
  stageRows<T, D>(Ks, LD, k + kvBase * D, kvStride, BK, min(BK, S - j0), vec);
  stageRows<T, D>(Vs, LD, v + kvBase * D, kvStride, BK, min(BK, S - j0), vec);

  const int key0 = j0 + 16 * warp + g; // this lane's keys: key0, key0 + 8
  const int keyEnd = min(S, j0 + BK);
  for (int gi = 0; gi < G; ++gi) {
    const int h = hk * G + gi;
    const size_t rowBase = (static_cast<size_t>(b) * Hq + h) * S;
    for (int i0 = 0; i0 < S; i0 += BQ) {
      const int last = min(S, i0 + BQ) - 1;
      if (mask.hi(last) <= j0 || mask.lo(i0) >= keyEnd)
        continue;      // no row of this tile sees a key of the block
      __syncthreads(); // the previous query tile is no longer read
      const size_t qBase = (static_cast<size_t>(b) * S + i0) * Hq + h;
      const size_t qStride = static_cast<size_t>(Hq) * D;
      stageRows<T, D>(Qs, LD, q + qBase * D, qStride, BQ, min(BQ, S - i0), vec);
      stageRows<T, D>(dOs, LD, dO + qBase * D, qStride, BQ, min(BQ, S - i0),
                      vec);
      for (int r = threadIdx.x; r < BQ; r += blockDim.x) {
        const bool in = i0 + r < S;
        Ls[r] = in ? lse[rowBase + i0 + r] : negInf();
        Ds[r] = in ? delta[rowBase + i0 + r] : 0.0f;
      }
      __syncthreads();
      // Transposed tiles: rows are this warp's keys, columns the queries.
      float sT[QT][4], dpT[QT][4];
      rowsDotRows<T, QT, D>(sT, Ks + 16 * warp * LD, LD, Qs, LD);
      rowsDotRows<T, QT, D>(dpT, Vs + 16 * warp * LD, LD, dOs, LD);
#pragma unroll
      for (int n = 0; n < QT; ++n)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int j = key0 + 8 * (r / 2), c = 8 * n + 2 * t + r % 2;
          const int i = i0 + c;
          probabilityAndGrad(sT[n][r], dpT[n][r], i < S && mask.visible(i, j),
                             Ls[c], Ds[c], scale, softcap);
        }
        // dV += P^T dO, dK += dS^T Q, NC column fragments at a time.
#pragma unroll 1
      for (int c0 = 0; c0 < NT; c0 += NC) {
        float a[NC][4];
#pragma unroll
        for (int n = 0; n < NC; ++n)
#pragma unroll
          for (int r = 0; r < 4; ++r)
            a[n][r] = myV[((c0 + n) * 4 + r) * kWarpSize];
        accumulateProduct<T, QT, NC>(a, sT, dOs + 8 * c0, LD);
#pragma unroll
        for (int n = 0; n < NC; ++n)
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            myV[((c0 + n) * 4 + r) * kWarpSize] = a[n][r];
            a[n][r] = myK[((c0 + n) * 4 + r) * kWarpSize];
          }
        accumulateProduct<T, QT, NC>(a, dpT, Qs + 8 * c0, LD);
#pragma unroll
        for (int n = 0; n < NC; ++n)
#pragma unroll
          for (int r = 0; r < 4; ++r)
            myK[((c0 + n) * 4 + r) * kWarpSize] = a[n][r];
      }
    }
  }

  // dK = scale dS^T Q: the scale of the logits' derivative, applied once.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int j = key0 + 8 * half;
    if (j >= S)
      continue;
    const size_t off = ((static_cast<size_t>(b) * S + j) * Hkv + hk) * D;
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int idx = (n * 4 + 2 * half + e) * kWarpSize;
        dk[off + 8 * n + 2 * t + e] = fromFloat<T>(myK[idx] * scale);
        dv[off + 8 * n + 2 * t + e] = fromFloat<T>(myV[idx]);
      }
  }
}

template <typename T, int D>
__device__ __forceinline__ void
attentionBackwardDq(const T *q, const T *k, const T *v, const T *dO,
                    const float *lse, const float *delta, T *dq, int S, int Hq,
                    int Hkv, int causal, int window, float scale,
                    float softcap) {
  constexpr int BQ = Tiles<D>::kBlockQ, BK = Tiles<D>::kBlockK;
  constexpr int LD = Pitch<T, D>::value, NT = D / 8, KT = BK / 8;
  T *Qs = reinterpret_cast<T *>(attnSharedBytes()); // [BQ][LD]
  T *dOs = Qs + BQ * LD;                            // [BQ][LD]
  T *Ks = dOs + BQ * LD;                            // [BK][LD]
  T *Vs = Ks + BK * LD;                             // [BK][LD]
  const int b = blockIdx.z, h = blockIdx.y, i0 = blockIdx.x * BQ;
  const int hk = h / (Hq / Hkv);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const Mask mask{S, 0, causal, window};
  if (scale <= 0.0f)
    scale = rsqrtf(static_cast<float>(D));
  const bool vec =
      aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dO);
  const size_t qBase = (static_cast<size_t>(b) * S + i0) * Hq + h;
  const size_t qStride = static_cast<size_t>(Hq) * D;
  stageRows<T, D>(Qs, LD, q + qBase * D, qStride, BQ, min(BQ, S - i0), vec);
  stageRows<T, D>(dOs, LD, dO + qBase * D, qStride, BQ, min(BQ, S - i0), vec);

  const int row0 = i0 + 16 * warp + g; // this lane's rows: row0, row0 + 8
  float L[2], Di[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = row0 + 8 * half;
    const size_t at = (static_cast<size_t>(b) * Hq + h) * S + i;
    L[half] = i < S ? lse[at] : negInf();
    Di[half] = i < S ? delta[at] : 0.0f;
  }
  float acc[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

  const size_t kvStride = static_cast<size_t>(Hkv) * D;
  const int last = min(S, i0 + BQ) - 1;
  const int jEnd = mask.hi(last);
  for (int j0 = mask.lo(i0); j0 < jEnd; j0 += BK) {
    __syncthreads(); // the previous tile is no longer read
    const size_t kvBase = (static_cast<size_t>(b) * S + j0) * Hkv + hk;
    stageRows<T, D>(Ks, LD, k + kvBase * D, kvStride, BK, min(BK, S - j0), vec);
    stageRows<T, D>(Vs, LD, v + kvBase * D, kvStride, BK, min(BK, S - j0), vec);
    __syncthreads();
    float s[KT][4], dp[KT][4];
    rowsDotRows<T, KT, D>(s, Qs + 16 * warp * LD, LD, Ks, LD);
    rowsDotRows<T, KT, D>(dp, dOs + 16 * warp * LD, LD, Vs, LD);
#pragma unroll
    for (int n = 0; n < KT; ++n)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = row0 + 8 * (r / 2), j = j0 + 8 * n + 2 * t + r % 2;
        probabilityAndGrad(s[n][r], dp[n][r], mask.visible(i, j), L[r / 2],
                           Di[r / 2], scale, softcap);
      }
    accumulateProduct<T, KT, NT>(acc, dp, Ks, LD);
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = row0 + 8 * half;
    if (i >= S)
      continue;
    T *out = dq + ((static_cast<size_t>(b) * S + i) * Hq + h) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      out[8 * n] = fromFloat<T>(acc[n][2 * half] * scale);
      out[8 * n + 1] = fromFloat<T>(acc[n][2 * half + 1] * scale);
    }
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Entries
//===----------------------------------------------------------------------===//

// Every entry is spelled out (the emulator's build finds entries by name).
#define MTC_ATTN_FWD_PARAMS(T)                                                 \
  const T *q, const T *k, const T *v, T *o, float *lse, int S, int Sk, int Hq, \
      int Hkv, int qOffset, int causal, int window, float scale, float softcap
#define MTC_ATTN_FWD_CALL(T, D)                                                \
  attentionForward<T, D>(q, k, v, o, lse, S, Sk, Hq, Hkv, qOffset, causal,     \
                         window, scale, softcap)
#define MTC_ATTN_BWD_PARAMS(T)                                                 \
  const T *q, const T *k, const T *v, const T *dO, const float *lse,           \
      const float *delta
#define MTC_ATTN_BWD_TAIL                                                      \
  int S, int Hq, int Hkv, int causal, int window, float scale, float softcap
#define MTC_ATTN_DKDV_CALL(T, D)                                               \
  attentionBackwardDkDv<T, D>(q, k, v, dO, lse, delta, dk, dv, S, Hq, Hkv,     \
                              causal, window, scale, softcap)
#define MTC_ATTN_DQ_CALL(T, D)                                                 \
  attentionBackwardDq<T, D>(q, k, v, dO, lse, delta, dq, S, Hq, Hkv, causal,   \
                            window, scale, softcap)

// --- forward ---------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_fwd_f32_d64(MTC_ATTN_FWD_PARAMS(float)) {
  MTC_ATTN_FWD_CALL(float, 64);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_fwd_f32_d80(MTC_ATTN_FWD_PARAMS(float)) {
  MTC_ATTN_FWD_CALL(float, 80);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_fwd_f32_d96(MTC_ATTN_FWD_PARAMS(float)) {
  MTC_ATTN_FWD_CALL(float, 96);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_fwd_f32_d128(MTC_ATTN_FWD_PARAMS(float)) {
  MTC_ATTN_FWD_CALL(float, 128);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_fwd_f32_d256(MTC_ATTN_FWD_PARAMS(float)) {
  MTC_ATTN_FWD_CALL(float, 256);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_fwd_bf16_d64(MTC_ATTN_FWD_PARAMS(bf16)) {
  MTC_ATTN_FWD_CALL(bf16, 64);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_fwd_bf16_d80(MTC_ATTN_FWD_PARAMS(bf16)) {
  MTC_ATTN_FWD_CALL(bf16, 80);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_fwd_bf16_d96(MTC_ATTN_FWD_PARAMS(bf16)) {
  MTC_ATTN_FWD_CALL(bf16, 96);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_fwd_bf16_d128(MTC_ATTN_FWD_PARAMS(bf16)) {
  MTC_ATTN_FWD_CALL(bf16, 128);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_fwd_bf16_d256(MTC_ATTN_FWD_PARAMS(bf16)) {
  MTC_ATTN_FWD_CALL(bf16, 256);
}

// --- backward: delta = rowsum(dO * o)
// -----------------------------------------
extern "C" __global__ void attention_bwd_delta_f32(const float *o,
                                                   const float *dO,
                                                   float *delta, int rows,
                                                   int S, int H, int D) {
  attentionDelta(o, dO, delta, rows, S, H, D);
}
extern "C" __global__ void attention_bwd_delta_bf16(const bf16 *o,
                                                    const bf16 *dO,
                                                    float *delta, int rows,
                                                    int S, int H, int D) {
  attentionDelta(o, dO, delta, rows, S, H, D);
}

// --- backward: dk, dv
// ---------------------------------------------------------
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dkdv_f32_d64(MTC_ATTN_BWD_PARAMS(float), float *dk, float *dv,
                               MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DKDV_CALL(float, 64);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dkdv_f32_d80(MTC_ATTN_BWD_PARAMS(float), float *dk, float *dv,
                               MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DKDV_CALL(float, 80);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dkdv_f32_d96(MTC_ATTN_BWD_PARAMS(float), float *dk, float *dv,
                               MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DKDV_CALL(float, 96);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dkdv_f32_d128(MTC_ATTN_BWD_PARAMS(float), float *dk,
                                float *dv, MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DKDV_CALL(float, 128);
}
extern "C" __global__ void __launch_bounds__(64, 1)
    attention_bwd_dkdv_f32_d256(MTC_ATTN_BWD_PARAMS(float), float *dk,
                                float *dv, MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DKDV_CALL(float, 256);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dkdv_bf16_d64(MTC_ATTN_BWD_PARAMS(bf16), bf16 *dk, bf16 *dv,
                                MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DKDV_CALL(bf16, 64);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dkdv_bf16_d80(MTC_ATTN_BWD_PARAMS(bf16), bf16 *dk, bf16 *dv,
                                MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DKDV_CALL(bf16, 80);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dkdv_bf16_d96(MTC_ATTN_BWD_PARAMS(bf16), bf16 *dk, bf16 *dv,
                                MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DKDV_CALL(bf16, 96);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dkdv_bf16_d128(MTC_ATTN_BWD_PARAMS(bf16), bf16 *dk, bf16 *dv,
                                 MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DKDV_CALL(bf16, 128);
}
extern "C" __global__ void __launch_bounds__(64, 1)
    attention_bwd_dkdv_bf16_d256(MTC_ATTN_BWD_PARAMS(bf16), bf16 *dk, bf16 *dv,
                                 MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DKDV_CALL(bf16, 256);
}

// --- backward: dq
// -------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dq_f32_d64(MTC_ATTN_BWD_PARAMS(float), float *dq,
                             MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DQ_CALL(float, 64);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dq_f32_d80(MTC_ATTN_BWD_PARAMS(float), float *dq,
                             MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DQ_CALL(float, 80);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dq_f32_d96(MTC_ATTN_BWD_PARAMS(float), float *dq,
                             MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DQ_CALL(float, 96);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dq_f32_d128(MTC_ATTN_BWD_PARAMS(float), float *dq,
                              MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DQ_CALL(float, 128);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dq_f32_d256(MTC_ATTN_BWD_PARAMS(float), float *dq,
                              MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DQ_CALL(float, 256);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dq_bf16_d64(MTC_ATTN_BWD_PARAMS(bf16), bf16 *dq,
                              MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DQ_CALL(bf16, 64);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dq_bf16_d80(MTC_ATTN_BWD_PARAMS(bf16), bf16 *dq,
                              MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DQ_CALL(bf16, 80);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dq_bf16_d96(MTC_ATTN_BWD_PARAMS(bf16), bf16 *dq,
                              MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DQ_CALL(bf16, 96);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dq_bf16_d128(MTC_ATTN_BWD_PARAMS(bf16), bf16 *dq,
                               MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DQ_CALL(bf16, 128);
}
extern "C" __global__ void __launch_bounds__(128, 1)
    attention_bwd_dq_bf16_d256(MTC_ATTN_BWD_PARAMS(bf16), bf16 *dq,
                               MTC_ATTN_BWD_TAIL) {
  MTC_ATTN_DQ_CALL(bf16, 256);
}
