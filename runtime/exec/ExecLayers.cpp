//===- ExecLayers.cpp - Parameters, layers and fused regions ---*- C++ -*-===//
//
// Part of mtc. The ops of the executor that touch its own state rather than
// only their operands: param_ref and param_grad (a parameter of the model,
// the layer instance or the expert being run), apply_layers and
// apply_layers_grad (a layer's forward over its instances, keeping each
// instance's input as its checkpoint, and its backward in reverse order), and
// fused regions (a compiled kernel, or the body op by op).
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/OpContext.h"

#include <algorithm>

namespace mtc::exec {

void Executor::applyLayers(OpContext &c) {
  const bundle::Op &op = c.op;
  const LayersAttrs &a = c.attrs<LayersAttrs>();
  const bundle::Layer *layer = bundle.layer(op.symbol);
  if (!layer || !layer->functions.count("forward"))
    failOp(op, "no layer '" + op.symbol + "' with a forward function");
  Tensor x = c.in(0);
  int64_t first = a.first, count = a.count;
  for (int64_t i = first; i < first + count; ++i) {
    std::vector<Tensor> outs =
        run(layer->functions.at("forward"), {x}, {op.symbol, i});
    std::vector<Tensor> &saved = checkpoints[{op.symbol, i}];
    saved.assign(1, x);
    saved.insert(saved.end(), outs.begin() + 1, outs.end());
    x = outs.at(0);
    ++forwardRuns;
  }
  c.setResult(std::move(x));
}

void Executor::applyLayersGrad(OpContext &c) {
  const bundle::Op &op = c.op;
  const LayersAttrs &a = c.attrs<LayersAttrs>();
  const bundle::Layer *layer = bundle.layer(op.symbol);
  if (!layer || !layer->functions.count("backward"))
    failOp(op, "no layer '" + op.symbol + "' with a backward function");
  Tensor dy = c.in(0);
  int64_t first = a.first, count = a.count;
  for (int64_t i = first + count - 1; i >= first; --i) {
    auto it = checkpoints.find({op.symbol, i});
    if (it == checkpoints.end())
      failOp(op, "no saved input for instance " + std::to_string(i));
    Scope inner{op.symbol, i};
    inner.backward = true;
    std::vector<Tensor> args{it->second[0], dy};
    args.insert(args.end(), it->second.begin() + 1, it->second.end());
    dy = run(layer->functions.at("backward"), std::move(args), inner).at(0);
    checkpoints.erase(it);
    ++backwardRuns;
    if (instanceGradHook)
      instanceGradHook(op.symbol, i);
  }
  c.setResult(std::move(dy));
}

void Executor::fused(OpContext &c) {
  const bundle::Op &op = c.op;
  if (!op.region)
    failOp(op, "fused op without a body");
  std::vector<Tensor> inputs;
  for (size_t k = 0; k < op.operands.size(); ++k)
    inputs.push_back(c.in(k));
  std::vector<Tensor> outs;
  if (FusedKernel kernel = fusedKernel(c.attrs<FusedAttrs>().kernel)) {
    // n: the elements of the iteration shape, the largest shape in the
    // body (results may be row-shaped: reductions over the last axis).
    int64_t n = 0;
    for (const bundle::ValueType &t : op.region->values) {
      int64_t numel = 1;
      for (int64_t d : concrete(t))
        numel *= d;
      n = std::max(n, numel);
    }
    std::vector<const float *> ins;
    for (const Tensor &t : inputs)
      ins.push_back(t.data());
    std::vector<float *> outPtrs;
    for (size_t r = 0; r < op.results.size(); ++r) {
      outs.push_back(c.newOutput(r));
      outPtrs.push_back(outs.back().data());
    }
    kernel(ins.data(), outPtrs.data(), n);
  } else {
    // No compiled kernel: run the body op by op.
    outs = run(*op.region, std::move(inputs), c.scope);
  }
  for (size_t r = 0; r < op.results.size(); ++r)
    c.setResult(std::move(outs[r]), r);
}

namespace {

void paramRef(OpContext &c) {
  ParamSlot &s = c.param();
  Tensor t;
  t.shape = c.resultShape();
  t.dtype = c.resultType();
  // Shares the parameter's storage (no copy; the store outlives the run).
  t.f = std::shared_ptr<float>(c.paramData(s, false), [](float *) {});
  c.setResult(std::move(t));
}

void paramGrad(OpContext &c) {
  ParamSlot &s = c.param();
  const Tensor &g = c.in(0);
  if (static_cast<size_t>(g.numel()) != s.value.size())
    c.fail("gradient size mismatch for '" + s.name + "'");
  const float *src = g.data();
  float *dst = c.paramData(s, true);
  for (size_t k = 0; k < s.value.size(); ++k)
    dst[k] += src[k];
}

} // namespace

void addLayerKernels(KernelTable &t) {
  t.set(OpKind::ParamRef, paramRef);
  t.set(OpKind::ParamGrad, paramGrad);
  t.set(OpKind::ApplyLayers, [](OpContext &c) { c.applyLayers(); });
  t.set(OpKind::ApplyLayersGrad, [](OpContext &c) { c.applyLayersGrad(); });
  t.set(OpKind::Fused, [](OpContext &c) { c.fused(); });
}

} // namespace mtc::exec
