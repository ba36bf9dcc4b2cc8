//===- ExecMoE.cpp - Mixture-of-experts ops of the executor ----*- C++ -*-===//
//
// Part of mtc. The CPU kernels of `moe` and `moe_grad`: routing, each
// expert's forward (and backward) on the tokens routed to it, the aux loss.
//
// Semantics (HF Mixtral / Qwen2-MoE): router logits r = h @ router [N, E]
// (N = B * S tokens), p = softmax(r); each token's top_k experts by p (ties:
// the lower index first); gate weights g = p[top_k], divided by their sum when
// `normalize`; y_t = sum_k g_tk expert_{e_k}(h_t), each expert's forward run
// once on the [T_e, D] tokens routed to it (tokens in ascending order; experts
// without tokens are skipped). aux_loss c > 0 adds c * E * sum_e f_e P_e with
// f_e = (top-k assignments to e) / (N * top_k) and P_e = mean_t p_te; its
// gradient flows through P_e only.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/OpContext.h"

#include "runtime/cpu/Bf16.h"
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace mtc::exec {

namespace {

/// Rows \p slots[j].first of src [N, D], stacked: [slots.size(), D], stored
/// as \p type (an expert function's argument: bf16 under a bf16 plan).
Tensor gatherRows(const float *src, int64_t D,
                  const std::vector<std::pair<int64_t, int64_t>> &slots,
                  DType type) {
  Tensor x = Tensor::empty({static_cast<int64_t>(slots.size()), D}, type);
  for (size_t j = 0; j < slots.size(); ++j) {
    const float *row = src + slots[j].first * D;
    if (type == DType::BF16)
      cpu::narrowToBF16(row, reinterpret_cast<uint16_t *>(x.data()) + j * D, D);
    else
      std::copy(row, row + D, x.data() + static_cast<int64_t>(j) * D);
  }
  return x;
}

/// How argument \p i of function \p fn of \p expert is stored.
DType argStorage(
    const bundle::Op &op, const bundle::Expert &expert, const std::string &fn,
    size_t i,
    const std::function<DType(const bundle::Function &, int)> &storageOf) {
  auto it = expert.functions.find(fn);
  if (it == expert.functions.end() || i >= it->second.args.size())
    failOp(op, "expert '" + expert.name + "' has no " + fn +
                   " function taking argument " + std::to_string(i));
  return storageOf(it->second, it->second.args[i]);
}

/// A zero-filled fp32 accumulator for result \p r of \p c: in the op's
/// scratch where the result is stored f32, in host memory where it is bf16
/// (storeResult rounds it into place).
Tensor accumulator(OpContext &c, size_t r) {
  if (c.resultType(r) == DType::F32)
    return Tensor::zeros(c.resultShape(r));
  Workspace::Scope onHost(nullptr);
  return Tensor::zeros(c.resultShape(r));
}

/// Sets result \p r of \p c from its accumulator \p acc.
void storeResult(OpContext &c, size_t r, Tensor acc) {
  if (c.resultType(r) == DType::F32) {
    c.setResult(std::move(acc), r);
    return;
  }
  Tensor out = c.newOutput(r);
  storeNarrowed(acc, out);
  c.setResult(std::move(out), r);
}

} // namespace

MoeShape moeShape(const bundle::Op &op, int64_t topK, const Tensor &h,
                  const Tensor &router, int64_t numExperts) {
  MoeShape r;
  if (h.shape.empty() || router.shape.size() != 2)
    failOp(op, "expects an input [.., D] and a router [D, E]");
  r.D = h.shape.back();
  r.N = r.D ? h.numel() / r.D : 0;
  r.E = router.shape[1];
  r.K = topK;
  if (router.shape[0] != r.D || r.E != numExperts)
    failOp(op, "the router must be [" + std::to_string(r.D) + ", " +
                   std::to_string(numExperts) + "]");
  if (r.K < 1 || r.K > r.E)
    failOp(op, "top_k must be in [1, " + std::to_string(r.E) + "]");
  return r;
}

const bundle::Expert &OpContext::expert() const {
  const bundle::Layer *layer = ex.bundle.layer(scope.layer);
  if (!layer)
    failOp(op, "is only valid inside a layer");
  const bundle::Expert *e = layer->expert(op.symbol);
  if (!e)
    failOp(op, "layer '" + scope.layer + "' has no expert '" + op.symbol + "'");
  return *e;
}

std::vector<Tensor> OpContext::runExpert(const bundle::Expert &expert,
                                         const std::string &fn, int64_t e,
                                         std::vector<Tensor> args) {
  return ex.runExpert(op, expert, fn, e, std::move(args), scope);
}

Executor::Routing Executor::route(const bundle::Op &op, int64_t topK,
                                  const Tensor &h, const Tensor &router,
                                  int64_t numExperts) {
  Routing r;
  MoeShape shape = moeShape(op, topK, h, router, numExperts);
  r.N = shape.N, r.D = shape.D, r.E = shape.E, r.K = shape.K;
  const int64_t N = r.N, E = r.E, K = r.K;
  std::vector<float> logits(static_cast<size_t>(N * E));
  cpu::matmul(h.data(), router.data(), nullptr, logits.data(), N, r.D, E);
  r.probs.resize(logits.size());
  cpu::softmax(logits.data(), r.probs.data(), N, E, 1);
  r.choice.resize(static_cast<size_t>(N * K));
  // The gate weights follow in assign() (after a routing pin's replay).
  std::vector<float> gate(static_cast<size_t>(N * K));
  cpu::moeTopK(r.probs.data(), N, E, K, false, r.choice.data(), gate.data());
  return r;
}

void Executor::assign(Routing &r, bool normalize) {
  const int64_t N = r.N, E = r.E, K = r.K;
  r.gate.resize(static_cast<size_t>(N * K));
  for (int64_t t = 0; t < N; ++t) {
    const float *p = r.probs.data() + t * E;
    float sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      r.gate[t * K + k] = p[r.choice[t * K + k]];
      sum += r.gate[t * K + k];
    }
    if (normalize)
      for (int64_t k = 0; k < K; ++k)
        r.gate[t * K + k] /= sum;
  }
  r.routed.assign(static_cast<size_t>(E), {});
  for (int64_t t = 0; t < N; ++t)
    for (int64_t k = 0; k < K; ++k)
      r.routed[r.choice[t * K + k]].push_back({t, k});
}

std::vector<Tensor> Executor::runExpert(const bundle::Op &op,
                                        const bundle::Expert &expert,
                                        const std::string &fn, int64_t e,
                                        std::vector<Tensor> args,
                                        const Scope &scope) {
  auto it = expert.functions.find(fn);
  if (it == expert.functions.end())
    failOp(op, "expert '" + expert.name + "' has no " + fn + " function");
  Scope inner{scope.layer, scope.instance, expert.name, e, scope.backward};
  int64_t savedT = T;
  T = args.at(0).shape.at(0);
  std::vector<Tensor> out;
  try {
    out = run(it->second, std::move(args), inner);
  } catch (...) {
    T = savedT;
    throw;
  }
  T = savedT;
  if (out.size() != 1)
    failOp(op, "expert '" + expert.name + "' " + fn + " must return one value");
  return out;
}

void Executor::moe(OpContext &c) {
  const bundle::Op &op = c.op;
  const Scope &scope = c.scope;
  const MoeAttrs &a = c.attrs<MoeAttrs>();
  const bundle::Expert &expert = c.expert();
  // Under a bf16 plan: routing on the widened (exact) inputs, the rows
  // handed to the experts as their forward stores them, the sum in fp32.
  const Tensor h = widened(c.in(0));
  const Tensor router = widened(c.in(1));
  auto storage = [this](const bundle::Function &f, int v) {
    return storageOf(f, v);
  };
  const DType xT = argStorage(op, expert, "forward", 0, storage);
  Routing r = route(op, a.topK, h, router, expert.count);
  if (!scope.backward) {
    // A recomputation inside a layer's backward counts nothing twice.
    for (int32_t c : r.choice)
      routingHash =
          (routingHash ^ static_cast<uint64_t>(c + 1)) * 1099511628211ull;
    if (pin == RoutingPin::Record) {
      pinnedChoices.push_back(r.choice);
    } else if (pin == RoutingPin::Replay) {
      if (pinnedNext >= pinnedChoices.size() ||
          pinnedChoices[pinnedNext].size() != r.choice.size())
        failOp(op, "no recorded routing to replay for this call");
      r.choice = pinnedChoices[pinnedNext++];
    }
  }
  assign(r, a.normalize);
  const int64_t D = r.D, K = r.K;
  Tensor y = accumulator(c, 0);
  if (y.numel() != r.N * D)
    failOp(op, "result shape does not match the input");
  for (int64_t e = 0; e < r.E; ++e) {
    const auto &slots = r.routed[e];
    if (slots.empty())
      continue;
    int64_t Te = static_cast<int64_t>(slots.size());
    // Each expert's temporaries are released once its output is added in.
    WorkspaceRelease release;
    Tensor out = widened(runExpert(op, expert, "forward", e,
                                   {gatherRows(h.data(), D, slots, xT)}, scope)
                             .at(0));
    if (out.numel() != Te * D)
      failOp(op, "expert '" + expert.name + "' returned a wrong shape");
    for (int64_t j = 0; j < Te; ++j) {
      auto [t, k] = slots[j];
      float g = r.gate[t * K + k];
      float *yt = y.data() + t * D;
      const float *oj = out.data() + j * D;
      for (int64_t d = 0; d < D; ++d)
        yt[d] += g * oj[d];
    }
  }
  if (!scope.backward) {
    double coef = a.auxLoss;
    if (coef > 0 && r.N > 0) {
      double balance = 0;
      for (int64_t e = 0; e < r.E; ++e) {
        double f = static_cast<double>(r.routed[e].size()) / (r.N * r.K);
        double P = 0;
        for (int64_t t = 0; t < r.N; ++t)
          P += r.probs[t * r.E + e];
        balance += f * P / r.N;
      }
      aux.host += coef * r.E * balance;
    }
  }
  storeResult(c, 0, std::move(y));
}

void Executor::moeGrad(OpContext &c) {
  const bundle::Op &op = c.op;
  const Scope &scope = c.scope;
  const MoeAttrs &a = c.attrs<MoeAttrs>();
  const bundle::Expert &expert = c.expert();
  const Tensor h = widened(c.in(0));
  const Tensor router = widened(c.in(1));
  const Tensor dy = widened(c.in(2));
  // As moe; the backward takes the forward's rows and the output gradient's
  // rows as it stores them.
  auto storage = [this](const bundle::Function &f, int v) {
    return storageOf(f, v);
  };
  const DType xT = argStorage(op, expert, "forward", 0, storage),
              dyeT = argStorage(op, expert, "backward", 1, storage);
  if (argStorage(op, expert, "backward", 0, storage) != xT)
    failOp(op, "expert '" + expert.name +
                   "': its forward and backward functions store their input "
                   "rows differently");
  // The same inputs as the forward pass, so the same choices.
  Routing r = route(op, a.topK, h, router, expert.count);
  assign(r, a.normalize);
  const int64_t N = r.N, D = r.D, E = r.E, K = r.K;
  Tensor dh = accumulator(c, 0);
  Tensor drouter = accumulator(c, 1);
  if (dy.numel() != N * D || dh.numel() != N * D || drouter.numel() != D * E)
    failOp(op, "operand and result shapes do not match");

  // Experts: dy_e = g * dy on each expert's tokens; dg = <dy_t, expert_out>.
  std::vector<double> dg(static_cast<size_t>(N * K), 0.0);
  for (int64_t e = 0; e < E; ++e) {
    const auto &slots = r.routed[e];
    if (slots.empty())
      continue;
    int64_t Te = static_cast<int64_t>(slots.size());
    WorkspaceRelease release;
    Tensor xe = gatherRows(h.data(), D, slots, xT);
    Tensor out =
        widened(runExpert(op, expert, "forward", e, {xe}, scope).at(0));
    if (out.numel() != Te * D)
      failOp(op, "expert '" + expert.name + "' returned a wrong shape");
    Tensor dye = Tensor::empty({Te, D}, dyeT);
    Tensor dye32 = dye;
    if (dyeT != DType::F32) {
      Workspace::Scope onHost(nullptr);
      dye32 = Tensor::empty({Te, D});
    }
    for (int64_t j = 0; j < Te; ++j) {
      auto [t, k] = slots[j];
      float g = r.gate[t * K + k];
      const float *dyt = dy.data() + t * D, *oj = out.data() + j * D;
      float *dj = dye32.data() + j * D;
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) {
        dj[d] = g * dyt[d];
        dot += static_cast<double>(dyt[d]) * oj[d];
      }
      dg[t * K + k] = dot;
    }
    if (dye32.data() != dye.data())
      storeNarrowed(dye32, dye);
    Tensor dxe = widened(runExpert(op, expert, "backward", e,
                                   {std::move(xe), std::move(dye)}, scope)
                             .at(0));
    if (dxe.numel() != Te * D)
      failOp(op,
             "expert '" + expert.name + "' backward returned a wrong shape");
    for (int64_t j = 0; j < Te; ++j) {
      float *dht = dh.data() + slots[j].first * D;
      const float *dj = dxe.data() + j * D;
      for (int64_t d = 0; d < D; ++d)
        dht[d] += dj[d];
    }
  }

  // Gate weights -> probabilities (through the renormalisation), plus the
  // aux loss' gradient c * E * f_e / N in every token's dp_e.
  std::vector<float> dp(static_cast<size_t>(N * E), 0.0f);
  const bool normalize = a.normalize;
  for (int64_t t = 0; t < N; ++t) {
    const float *p = r.probs.data() + t * E;
    const int32_t *ch = r.choice.data() + t * K;
    if (normalize) {
      // g_k = p_k / s: dp_k = (dg_k - sum_j dg_j g_j) / s.
      double sum = 0, dot = 0;
      for (int64_t k = 0; k < K; ++k) {
        sum += p[ch[k]];
        dot += dg[t * K + k] * r.gate[t * K + k];
      }
      for (int64_t k = 0; k < K; ++k)
        dp[t * E + ch[k]] += static_cast<float>((dg[t * K + k] - dot) / sum);
    } else {
      for (int64_t k = 0; k < K; ++k)
        dp[t * E + ch[k]] += static_cast<float>(dg[t * K + k]);
    }
  }
  double aux = a.auxLoss;
  if (aux > 0 && N > 0)
    for (int64_t e = 0; e < E; ++e) {
      double f = static_cast<double>(r.routed[e].size()) / (N * K);
      float coef = static_cast<float>(aux * E * f / N);
      for (int64_t t = 0; t < N; ++t)
        dp[t * E + e] += coef;
    }
  std::vector<float> dr(dp.size());
  cpu::softmaxGrad(r.probs.data(), dp.data(), dr.data(), N, E, 1);
  // dh += dr @ router^T; drouter = h^T dr.
  cpu::gemm(false, true, N, D, E, 1.0f, dr.data(), router.data(), 1.0f,
            dh.data());
  cpu::matmulGradWeightAcc(h.data(), dr.data(), drouter.data(), N, D, E);
  storeResult(c, 0, std::move(dh));
  storeResult(c, 1, std::move(drouter));
}

void addMoeKernels(KernelTable &t) {
  t.set(OpKind::Moe, [](OpContext &c) { c.moe(); });
  t.set(OpKind::MoeGrad, [](OpContext &c) { c.moeGrad(); });
}

} // namespace mtc::exec
