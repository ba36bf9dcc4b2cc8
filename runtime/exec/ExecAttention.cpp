//===- ExecAttention.cpp - Attention ops of the executor -------*- C++ -*-===//
//
// Part of mtc. The CPU kernels of rope, attention (keeping its log-sum-exp
// for the backward pass; while decoding, over the KV cache it appends to) and
// attention_grad.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/OpContext.h"

#include "runtime/cpu/Kernels.h"

namespace mtc::exec {

cpu::RopeParams ropeParams(const RopeAttrs &a) {
  cpu::RopeParams p;
  p.theta = a.theta;
  p.fraction = a.fraction;
  if (a.llama3) {
    p.llama3 = true;
    p.factor = a.factor;
    p.lowFreqFactor = a.lowFreqFactor;
    p.highFreqFactor = a.highFreqFactor;
    p.originalMaxPosition = a.originalMaxPosition;
  }
  return p;
}

cpu::AttentionParams attentionParams(const AttentionAttrs &a) {
  cpu::AttentionParams p;
  p.causal = a.causal;
  p.window = a.window;
  p.softcap = a.softcap;
  p.scale = a.scale;
  return p;
}

namespace {

void rope(OpContext &c) {
  const RopeAttrs &a = c.attrs<RopeAttrs>();
  const Tensor &x = c.in(0);
  Tensor y = c.newOutput();
  cpu::rope(x.data(), y.data(), x.shape[0], x.shape[1], x.shape[2], x.shape[3],
            ropeParams(a), a.inverse, c.decoding() ? c.cachePosition() : 0);
  c.setResult(std::move(y));
}

void attention(OpContext &c) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2);
  cpu::AttentionParams p = attentionParams(c.attrs<AttentionAttrs>());
  if (c.decoding()) {
    auto &kv = c.kvCache();
    kv.k.insert(kv.k.end(), k.data(), k.data() + k.numel());
    kv.v.insert(kv.v.end(), v.data(), v.data() + v.numel());
    int64_t hkv = k.shape[2], d = k.shape[3];
    int64_t sk = static_cast<int64_t>(kv.k.size()) / (hkv * d);
    Tensor o = c.newOutput();
    cpu::attention(q.data(), kv.k.data(), kv.v.data(), o.data(), nullptr, 1,
                   q.shape[1], sk, q.shape[2], hkv, d, p, c.cachePosition());
    c.setResult(std::move(o));
    return;
  }
  Tensor o = c.newOutput();
  int64_t b = q.shape[0], s = q.shape[1], hq = q.shape[2], d = q.shape[3];
  if (!o.lse)
    o.lse = Tensor::allocate(b * hq * s, false);
  cpu::attention(q.data(), k.data(), v.data(), o.data(), o.lse.get(), b, s,
                 k.shape[1], hq, k.shape[2], d, p);
  c.setResult(std::move(o));
}

void attentionGrad(OpContext &c) {
  const Tensor &q = c.in(0), &k = c.in(1), &v = c.in(2), &o = c.in(3),
               &dO = c.in(4);
  if (!o.lse)
    c.fail("the attention output lost its log-sum-exp");
  Tensor dq = c.newOutput(0), dk = c.newOutput(1), dv = c.newOutput(2);
  cpu::attentionGrad(q.data(), k.data(), v.data(), o.data(), o.lse.get(),
                     dO.data(), dq.data(), dk.data(), dv.data(), q.shape[0],
                     q.shape[1], q.shape[2], k.shape[2], q.shape[3],
                     attentionParams(c.attrs<AttentionAttrs>()));
  c.setResult(std::move(dq), 0);
  c.setResult(std::move(dk), 1);
  c.setResult(std::move(dv), 2);
}

} // namespace

void addAttentionKernels(KernelTable &t) {
  t.set(OpKind::Rope, rope);
  t.set(OpKind::Attention, attention);
  t.set(OpKind::AttentionGrad, attentionGrad);
}

} // namespace mtc::exec
