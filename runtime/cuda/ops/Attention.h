//===- Attention.h - Flash attention on the GPU -----------------*- C++ -*-===//
//
// Part of mtc. The launchers of attention.cu: cpu::attention and
// cpu::attentionGrad (runtime/cpu/Kernels.h) with device pointers. Layouts
// as the CPU: q, o, dO, dq [B, S, Hq, D]; k, v, dk, dv [B, Sk, Hkv, D] (Hkv
// divides Hq: GQA); lse [B, Hq, S] f32 whatever the storage. Causal masks,
// sliding windows, softcap and scale are cpu::AttentionParams.
//
// Head dims: the kernels are compiled per head dim; kAttentionHeadDims lists
// them, and any other D is an error naming it and the supported ones.
//
// The backward queues three kernels: delta = rowsum(dO o) into L.scratch
// (B Hq S floats), then dk/dv and dq (each output written by one block in a
// fixed order: deterministic, no atomics). Launchers never synchronise.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_OPS_ATTENTION_H
#define MTC_RUNTIME_CUDA_OPS_ATTENTION_H

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/ops/Launch.h"

#include <cstdint>

namespace mtc::cuda::ops {

/// The head dims attention.cu has entries for.
constexpr int64_t kAttentionHeadDims[] = {64, 80, 96, 128, 256};

/// Whether attention.cu has entries for head dim \p D.
bool attentionSupportsHeadDim(int64_t D);

/// o = attention(q, k, v) (cpu::attention); lse (optional, 0: not written)
/// receives each query row's log-sum-exp. Queries sit at positions
/// qOffset + i (a KV cache: Sk = qOffset + S). q, k, v, o of \p dtype.
/// Errors: an unsupported head dim, Hkv not dividing Hq, sizes beyond the
/// kernels' 32-bit arguments or grid limits.
Status attention(const Launch &L, DevPtr q, DevPtr k, DevPtr v, DevPtr o,
                 DevPtr lse, int64_t B, int64_t S, int64_t Sk, int64_t Hq,
                 int64_t Hkv, int64_t D, const cpu::AttentionParams &p,
                 int64_t qOffset = 0, DType dtype = DType::F32);

/// The backward from the saved o and lse (cpu::attentionGrad: Sk = S, no
/// query offset): dq, dk, dv overwritten. q, k, v, o, dO, dq, dk, dv of
/// \p dtype; lse f32. Scratch: attentionGradScratchBytes(B, S, Hq).
Status attentionGrad(const Launch &L, DevPtr q, DevPtr k, DevPtr v, DevPtr o,
                     DevPtr lse, DevPtr dO, DevPtr dq, DevPtr dk, DevPtr dv,
                     int64_t B, int64_t S, int64_t Hq, int64_t Hkv, int64_t D,
                     const cpu::AttentionParams &p, DType dtype = DType::F32);

/// The scratch bytes attentionGrad takes (delta, [B, Hq, S] f32).
int64_t attentionGradScratchBytes(int64_t B, int64_t S, int64_t Hq);

} // namespace mtc::cuda::ops

#endif // MTC_RUNTIME_CUDA_OPS_ATTENTION_H
