//===- Attention.cpp - Flash attention on the GPU -------------------------===//
//
// Part of mtc. The host side of attention.cu; the kernels' banner has the
// launch rules this file follows (tiles per head dim, dynamic shared
// memory, grids). The tile sizes here must match the kernels' Tiles<D>.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/ops/Attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

namespace mtc::cuda::ops {

namespace {

constexpr unsigned kBlockQ = 64;        ///< forward / dq: query rows per block
constexpr unsigned kQueryThreads = 128; ///< forward / dq / delta
constexpr unsigned kDeltaRows = 4;      ///< delta: rows (warps) per block
constexpr int64_t kMaxGridYZ = 65535;

/// Keys per tile (dkdv: keys per block; its threads are twice that).
unsigned blockKeys(int64_t D) { return D <= 128 ? 64 : 32; }
/// A staged tile row: D elements and 16 bytes of padding.
unsigned pitchBytes(int64_t D, DType t) {
  const int64_t e = dtypeBytes(t);
  return static_cast<unsigned>((D + 16 / e) * e);
}
unsigned fwdSmem(int64_t D, DType t) {
  return (kBlockQ + 2 * blockKeys(D)) * pitchBytes(D, t);
}
unsigned dqSmem(int64_t D, DType t) {
  return (2 * kBlockQ + 2 * blockKeys(D)) * pitchBytes(D, t);
}
unsigned dkdvSmem(int64_t D, DType t) {
  // fp32 dK, dV accumulators [BK][D] each, lse and delta [BQ] each, K, V,
  // Q, dO tiles (BQ = BK).
  const unsigned bk = blockKeys(D);
  return 8 * bk * static_cast<unsigned>(D) + 8 * bk + 4 * bk * pitchBytes(D, t);
}
unsigned ceilDiv(int64_t a, unsigned b) {
  return static_cast<unsigned>((a + b - 1) / b);
}

std::string headDimList() {
  std::string s;
  for (int64_t d : kAttentionHeadDims)
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  return s;
}

/// The kernels' int and float arguments, checked.
struct Args {
  int S = 0, Sk = 0, Hq = 0, Hkv = 0, qOffset = 0, causal = 0, window = 0;
  float scale = 0, softcap = 0;
};

Expected<Args> checkArgs(const char *op, int64_t B, int64_t S, int64_t Sk,
                         int64_t Hq, int64_t Hkv, int64_t D, int64_t qOffset,
                         const cpu::AttentionParams &p) {
  const std::string shape =
      "B=" + std::to_string(B) + " S=" + std::to_string(S) +
      " Sk=" + std::to_string(Sk) + " Hq=" + std::to_string(Hq) +
      " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D);
  if (!attentionSupportsHeadDim(D))
    return Status::error(std::string(op) + ": head dim " + std::to_string(D) +
                         " has no kernel (supported: " + headDimList() + ")");
  if (B < 0 || S < 0 || Sk < 0 || Hq < 1 || Hkv < 1 || qOffset < 0)
    return Status::error(std::string(op) + ": bad sizes " + shape +
                         " qOffset=" + std::to_string(qOffset));
  if (Hq % Hkv != 0)
    return Status::error(std::string(op) + ": Hkv=" + std::to_string(Hkv) +
                         " does not divide Hq=" + std::to_string(Hq));
  if (Hq > kMaxGridYZ || B > kMaxGridYZ)
    return Status::error(std::string(op) + ": " + shape +
                         " exceeds the grid (Hq and B at most 65535)");
  // Element offsets inside the kernels are 64-bit, the sizes int.
  if (B * S * Hq > INT_MAX || Sk > INT_MAX || qOffset > INT_MAX ||
      qOffset + S > INT_MAX)
    return Status::error(std::string(op) + ": " + shape +
                         " exceeds the kernels' 32-bit sizes");
  Args a;
  a.S = static_cast<int>(S);
  a.Sk = static_cast<int>(Sk);
  a.Hq = static_cast<int>(Hq);
  a.Hkv = static_cast<int>(Hkv);
  a.qOffset = static_cast<int>(qOffset);
  a.causal = p.causal ? 1 : 0;
  // A window at least as long as every position reaches is no window.
  a.window = static_cast<int>(std::clamp<int64_t>(p.window, 0, INT_MAX));
  // The CPU's scale, computed the CPU's way (the kernels would take
  // 1 / sqrt(D) for 0 themselves; passing the value keeps one formula).
  a.scale =
      static_cast<float>(p.scale > 0 ? p.scale : 1.0 / std::sqrt(double(D)));
  a.softcap = static_cast<float>(p.softcap);
  return a;
}

std::string suffix(DType t, int64_t D) {
  return std::string(dtypeSuffix(t)) + "_d" + std::to_string(D);
}

} // namespace

bool attentionSupportsHeadDim(int64_t D) {
  return std::find(std::begin(kAttentionHeadDims), std::end(kAttentionHeadDims),
                   D) != std::end(kAttentionHeadDims);
}

int64_t attentionGradScratchBytes(int64_t B, int64_t S, int64_t Hq) {
  return 4 * B * Hq * S;
}

Status attention(const Launch &L, DevPtr q, DevPtr k, DevPtr v, DevPtr o,
                 DevPtr lse, int64_t B, int64_t S, int64_t Sk, int64_t Hq,
                 int64_t Hkv, int64_t D, const cpu::AttentionParams &p,
                 int64_t qOffset, DType dtype) {
  Expected<Args> a = checkArgs("attention", B, S, Sk, Hq, Hkv, D, qOffset, p);
  if (!a)
    return a.status();
  if (B == 0 || S == 0)
    return Status::success();
  // Sk == 0: every row sees no key (o = 0, lse = -inf); the kernel handles
  // it without reading k or v.
  Args &x = *a;
  return L.kernel("attention.cu", "attention_fwd_" + suffix(dtype, D),
                  {ceilDiv(S, kBlockQ), static_cast<unsigned>(Hq),
                   static_cast<unsigned>(B)},
                  {kQueryThreads}, fwdSmem(D, dtype),
                  {&q, &k, &v, &o, &lse, &x.S, &x.Sk, &x.Hq, &x.Hkv, &x.qOffset,
                   &x.causal, &x.window, &x.scale, &x.softcap});
}

Status attentionGrad(const Launch &L, DevPtr q, DevPtr k, DevPtr v, DevPtr o,
                     DevPtr lse, DevPtr dO, DevPtr dq, DevPtr dk, DevPtr dv,
                     int64_t B, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
                     const cpu::AttentionParams &p, DType dtype) {
  Expected<Args> a = checkArgs("attentionGrad", B, S, S, Hq, Hkv, D, 0, p);
  if (!a)
    return a.status();
  if (B == 0 || S == 0)
    return Status::success();
  Expected<DevPtr> delta = L.scratch(attentionGradScratchBytes(B, S, Hq));
  if (!delta)
    return Status::error("attentionGrad: " + delta.message());
  DevPtr d = *delta;
  Args &x = *a;
  int rows = static_cast<int>(B * S * Hq), Di = static_cast<int>(D);
  if (Status s =
          L.kernel("attention.cu",
                   std::string("attention_bwd_delta_") + dtypeSuffix(dtype),
                   {ceilDiv(rows, kDeltaRows)}, {kQueryThreads}, 0,
                   {&o, &dO, &d, &rows, &x.S, &x.Hq, &Di});
      !s)
    return s;
  const unsigned bk = blockKeys(D);
  if (Status s =
          L.kernel("attention.cu", "attention_bwd_dkdv_" + suffix(dtype, D),
                   {ceilDiv(S, bk), static_cast<unsigned>(Hkv),
                    static_cast<unsigned>(B)},
                   {2 * bk}, dkdvSmem(D, dtype),
                   {&q, &k, &v, &dO, &lse, &d, &dk, &dv, &x.S, &x.Hq, &x.Hkv,
                    &x.causal, &x.window, &x.scale, &x.softcap});
      !s)
    return s;
  return L.kernel("attention.cu", "attention_bwd_dq_" + suffix(dtype, D),
                  {ceilDiv(S, kBlockQ), static_cast<unsigned>(Hq),
                   static_cast<unsigned>(B)},
                  {kQueryThreads}, dqSmem(D, dtype),
                  {&q, &k, &v, &dO, &lse, &d, &dq, &x.S, &x.Hq, &x.Hkv,
                   &x.causal, &x.window, &x.scale, &x.softcap});
}

} // namespace mtc::cuda::ops
