//===- Cost.cpp - Per-op durations on a hardware profile --------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Sim/Cost.h"

#include "lib/Bundle/Plan.h"

#include <algorithm>
#include <cmath>

namespace mtc::sim {

CostModel::CostModel(const Profile &profile, bundle::Precision precision)
    : p(profile), precision(precision),
      peak(profile.peakFlops(bundle::precisionName(precision))) {}

double CostModel::gemmSeconds(double flops) const {
  return p.device.kernelFixedSeconds() +
         p.device.kernelTimeScale * flops /
             (peak * p.device.gemmEfficiency.at(flops));
}

double CostModel::gemmSeconds(double m, double n, double k) const {
  return p.device.kernelFixedSeconds() +
         p.device.kernelTimeScale * 2.0 * m * n * k /
             (peak * p.device.gemmEfficiencyAt(m, n, k));
}

double CostModel::attentionSeconds(double flops) const {
  return p.device.kernelFixedSeconds() +
         p.device.kernelTimeScale * flops /
             (peak * p.device.attentionEfficiency.at(flops));
}

double CostModel::memorySeconds(double bytes, const std::string &kind) const {
  return p.device.kernelFixedSeconds() +
         p.device.kernelTimeScale * bytes / p.device.bandwidthOf(kind);
}

Cost CostModel::function(const bundle::Function &fn, const bundle::Layer *layer,
                         int64_t batch, int64_t seq, int64_t tokens,
                         size_t begin, size_t end) const {
  std::vector<DType> storage = bundle::valueStorage(fn, precision);
  Cost total;
  end = std::min(end, fn.ops.size());
  for (size_t i = begin; i < end; ++i)
    total += op(fn, storage, fn.ops[i], layer, batch, seq, tokens);
  return total;
}

Cost CostModel::op(const bundle::Function &fn,
                   const std::vector<DType> &storage, const bundle::Op &op,
                   const bundle::Layer *layer, int64_t batch, int64_t seq,
                   int64_t tokens) const {
  Cost c;
  const std::string &n = op.name;
  if (n == "param_ref" || n == "reshape" || n == "apply_layers" ||
      n == "apply_layers_grad")
    return c;
  auto numel = [&](int v) {
    return static_cast<double>(
        bundle::concreteNumel(fn.values.at(v).shape, batch, seq, tokens));
  };
  auto bytesOf = [&](int v) {
    return numel(v) * static_cast<double>(bundle::elementBytes(storage.at(v)));
  };
  // The last dimension (at least 1: it divides).
  auto lastDim = [&](int v) {
    const Shape &s = fn.values.at(v).shape;
    return s.empty() ? 1.0
                     : std::max(1.0, static_cast<double>(bundle::concreteNumel(
                                         {s.back()}, batch, seq, tokens)));
  };
  // An m x n x k product, \p times over (the loss gradient's three).
  auto gemm = [&](double m, double nn, double k, double times = 1) {
    Cost g;
    g.flops = g.gemmFlops = times * 2.0 * m * nn * k;
    double fixed = p.device.kernelFixedSeconds();
    g.seconds = times * (gemmSeconds(m, nn, k) - fixed) + fixed;
    g.kernels = 1;
    return g;
  };
  double ioBytes = 0;
  for (int v : op.operands)
    ioBytes += bytesOf(v);
  for (int v : op.results)
    ioBytes += bytesOf(v);
  auto memory = [&](double bytes) {
    Cost m;
    m.bytes = bytes;
    m.seconds = memorySeconds(bytes, n);
    m.kernels = 1;
    return m;
  };

  if (n == "matmul") {
    // [..., M, K] x [K, N] (or batched; the batch counts into M): 2 K per
    // result element.
    double cols = lastDim(op.results.at(0));
    return gemm(numel(op.results.at(0)) / cols, cols,
                lastDim(op.operands.at(0)));
  }
  if (n == "weight_grad") {
    // x [..., K], dy [..., N] -> [K, N]: xᵀ dy, a K x N x rows product.
    double k = lastDim(op.operands.at(0));
    return gemm(k, lastDim(op.results.at(0)), numel(op.operands.at(0)) / k);
  }
  if (n == "linear_cross_entropy" || n == "linear_cross_entropy_grad") {
    // Logits x [N, D] . W: 2 N D V; the gradient recomputes them and forms
    // dx and dW (three GEMMs of that size).
    double d = lastDim(op.operands.at(0));
    double rows = numel(op.operands.at(0)) / d;
    double v = numel(op.operands.at(1)) / d;
    c = gemm(rows, v, d, n == "linear_cross_entropy" ? 1 : 3);
    c += memory(ioBytes);
    return c;
  }
  if (n == "attention" || n == "attention_grad") {
    // q [B, S, Hq, D], k [B, S, Hk, D]: QK^T and PV, 2 B Hq S S' D each;
    // causal halves the keys, a window caps them. The backward recomputes
    // the scores and forms dV, dP, dQ, dK: 2.5 x the forward.
    const Shape &q = fn.values.at(op.operands.at(0)).shape;
    std::vector<int64_t> d;
    for (Dim x : q)
      d.push_back(bundle::concreteNumel({x}, batch, seq, tokens));
    if (d.size() != 4)
      return memory(ioBytes);
    double keys = static_cast<double>(d[1]);
    int64_t window = op.intAttr("window", 0);
    if (window > 0)
      keys = std::min(keys, static_cast<double>(window));
    if (op.boolAttr("causal", false))
      keys = window > 0 && window < d[1] ? keys : (keys + 1) / 2;
    double f = 4.0 * d[0] * d[2] * static_cast<double>(d[1]) * keys * d[3];
    if (n == "attention_grad")
      f *= 2.5;
    c.flops = f;
    c.seconds = attentionSeconds(f);
    c.kernels = 1;
    return c;
  }
  if ((n == "moe" || n == "moe_grad") && layer) {
    // The router GEMM (and its gradient), then every expert on the tokens
    // routed to it on average; the gradient reruns each expert's forward.
    const bundle::Expert *e = layer->expert(op.symbol);
    double rows = numel(op.operands.at(0)) / lastDim(op.operands.at(0));
    double experts = e ? static_cast<double>(e->count) : 1;
    double routes = numel(op.operands.at(1)) / lastDim(op.operands.at(0));
    c = gemm(rows, routes, lastDim(op.operands.at(0)), n == "moe" ? 1 : 2);
    c += memory(ioBytes);
    if (!e)
      return c;
    int64_t k = std::max<int64_t>(1, op.intAttr("top_k", 1));
    int64_t t = static_cast<int64_t>(
        std::ceil(rows * static_cast<double>(k) / experts));
    for (const char *f : {"forward", "backward"}) {
      if (n == "moe" && std::string(f) == "backward")
        continue;
      auto it = e->functions.find(f);
      if (it != e->functions.end())
        c += function(it->second, layer, batch, seq, t).scaled(experts);
    }
    return c;
  }
  if (n == "param_grad")
    // Adds the gradient into the parameter's gradient buffer: reads both,
    // writes one (the operand's bytes three times).
    return memory(3 * ioBytes);
  if (n == "fused" && op.region) {
    // One kernel: its operands in, its results out.
    return memory(ioBytes);
  }
  return memory(ioBytes);
}

} // namespace mtc::sim
