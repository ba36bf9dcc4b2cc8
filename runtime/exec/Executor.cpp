//===- Executor.cpp - Runs bundle functions on the CPU ----------*- C++ -*-===//
//
// Part of mtc. One case per bundle op; shapes come from the bundle's value
// types with B and S bound, data layouts follow runtime/cpu/Kernels.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"

#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mtc::exec {

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor Tensor::zeros(std::vector<int64_t> shape) {
  Tensor t;
  t.shape = std::move(shape);
  t.f = std::make_shared<std::vector<float>>(t.numel(), 0.0f);
  return t;
}

Tensor Tensor::ints(std::vector<int64_t> shape, const int32_t *src) {
  Tensor t;
  t.shape = std::move(shape);
  t.isInt = true;
  t.i = std::make_shared<std::vector<int32_t>>(src, src + t.numel());
  return t;
}

namespace {

[[noreturn]] void fail(const bundle::Op &op, const std::string &msg) {
  throw ExecError{(op.loc.empty() ? std::string("") : op.loc + ": ") +
                  "error in '" + op.name + "': " + msg};
}

int64_t product(const std::vector<int64_t> &s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i)
    n *= s[i];
  return n;
}

/// [outer, n, inner] around \p axis.
void split3(const std::vector<int64_t> &s, int64_t axis, int64_t &outer,
            int64_t &n, int64_t &inner) {
  outer = product(s, 0, axis);
  n = s[axis];
  inner = product(s, axis + 1, s.size());
}

cpu::Unary unaryKind(const bundle::Op &op, const std::string &k) {
  static const std::map<std::string, cpu::Unary> kinds = {
      {"neg", cpu::Unary::Neg},         {"exp", cpu::Unary::Exp},
      {"log", cpu::Unary::Log},         {"silu", cpu::Unary::Silu},
      {"relu", cpu::Unary::Relu},       {"sigmoid", cpu::Unary::Sigmoid},
      {"tanh", cpu::Unary::Tanh},       {"rsqrt", cpu::Unary::Rsqrt},
      {"sqrt", cpu::Unary::Sqrt},       {"square", cpu::Unary::Square},
      {"gelu_erf", cpu::Unary::GeluErf}, {"gelu_tanh", cpu::Unary::GeluTanh},
      {"softcap", cpu::Unary::Softcap}};
  auto it = kinds.find(k);
  if (it == kinds.end())
    fail(op, "unknown elementwise function '" + k + "'");
  return it->second;
}

/// Whether \p axis of the op's first operand is the symbolic sequence dim.
bool isSequenceAxis(const bundle::Function &fn, const bundle::Op &op,
                    int64_t axis) {
  const Shape &shape = fn.values[op.operands.at(0)].shape;
  return axis >= 0 && axis < static_cast<int64_t>(shape.size()) &&
         shape[axis] == kDimS;
}

cpu::RopeParams ropeParams(const bundle::Op &op) {
  cpu::RopeParams p;
  p.theta = op.floatAttr("theta", 10000.0);
  p.fraction = op.floatAttr("fraction", 1.0);
  if (op.strAttr("scaling") == "llama3") {
    p.llama3 = true;
    p.factor = op.floatAttr("factor", 1.0);
    p.lowFreqFactor = op.floatAttr("low_freq_factor", 1.0);
    p.highFreqFactor = op.floatAttr("high_freq_factor", 4.0);
    p.originalMaxPosition = op.intAttr("original_max_position", 8192);
  }
  return p;
}

cpu::AttentionParams attentionParams(const bundle::Op &op) {
  cpu::AttentionParams p;
  p.causal = op.boolAttr("causal", false);
  p.window = op.intAttr("window", 0);
  p.softcap = op.floatAttr("softcap", 0.0);
  p.scale = op.floatAttr("scale", 0.0);
  return p;
}

} // namespace

//===----------------------------------------------------------------------===//
// Executor
//===----------------------------------------------------------------------===//

Executor::Executor(const bundle::Bundle &b, ParamStore &store)
    : bundle(b), store(store) {}

std::vector<int64_t> Executor::concrete(const bundle::ValueType &t) const {
  std::vector<int64_t> out;
  for (Dim d : t.shape)
    out.push_back(d == kDimB ? B : d == kDimS ? S : d);
  return out;
}

ParamSlot *Executor::slot(const bundle::Op &op, const Scope &scope) {
  ParamSlot *s = scope.layer.empty()
                     ? store.model(op.symbol)
                     : store.layer(scope.layer, scope.instance, op.symbol);
  if (!s)
    fail(op, "no parameter '" + op.symbol + "' in " +
                 (scope.layer.empty() ? std::string("the model")
                                      : "layer " + scope.layer));
  return s;
}

double Executor::forwardBackward(const int32_t *tokens, const int32_t *targets,
                                 int64_t b, int64_t s) {
  B = b;
  S = s;
  forwardRuns = backwardRuns = 0;
  auto it = bundle.functions.find("forward_backward");
  if (it == bundle.functions.end())
    throw ExecError{"the bundle has no forward_backward function (compile "
                    "it with the training pipeline)"};
  std::vector<Tensor> out =
      run(it->second,
          {Tensor::ints({B, S}, tokens), Tensor::ints({B, S}, targets)}, {});
  checkpoints.clear();
  // The loss op's double-precision value when the result is exactly it.
  return static_cast<float>(lastLoss) == out.at(0).data()[0]
             ? lastLoss
             : out.at(0).data()[0];
}

double Executor::loss(const int32_t *tokens, const int32_t *targets,
                      int64_t b, int64_t s) {
  B = b;
  S = s;
  forwardRuns = backwardRuns = 0;
  std::vector<Tensor> out =
      run(bundle.functions.at("forward"),
          {Tensor::ints({B, S}, tokens), Tensor::ints({B, S}, targets)}, {});
  checkpoints.clear();
  return static_cast<float>(lastLoss) == out.at(0).data()[0]
             ? lastLoss
             : out.at(0).data()[0];
}

Tensor Executor::logits(const int32_t *tokens, int64_t b, int64_t s) {
  B = b;
  S = s;
  forwardRuns = backwardRuns = 0;
  std::vector<int32_t> dummy(static_cast<size_t>(b * s), 0);
  Tensor out;
  run(bundle.functions.at("forward"),
      {Tensor::ints({B, S}, tokens), Tensor::ints({B, S}, dummy.data())}, {},
      Mode::LogitsOnly, &out);
  checkpoints.clear();
  if (!out.f)
    throw ExecError{"the model's forward computes no cross_entropy, so it "
                    "has no logits to generate from"};
  return out;
}

void Executor::resetCache() {
  kvCache.clear();
  cacheLength = 0;
}

Tensor Executor::decode(const int32_t *tokens, int64_t n) {
  B = 1;
  S = n;
  forwardRuns = backwardRuns = 0;
  std::vector<int32_t> dummy(static_cast<size_t>(n), 0);
  Tensor out;
  decoding = true;
  try {
    run(bundle.functions.at("forward"),
        {Tensor::ints({1, n}, tokens), Tensor::ints({1, n}, dummy.data())},
        {}, Mode::LogitsOnly, &out);
  } catch (...) {
    decoding = false;
    checkpoints.clear();
    throw;
  }
  decoding = false;
  checkpoints.clear();
  cacheLength += n;
  if (!out.f)
    throw ExecError{"the model's forward computes no cross_entropy, so it "
                    "has no logits to generate from"};
  return out;
}

std::vector<Tensor> Executor::run(const bundle::Function &fn,
                                  std::vector<Tensor> args, const Scope &scope,
                                  Mode mode, Tensor *logitsOut) {
  std::vector<Tensor> values(fn.values.size());
  for (size_t i = 0; i < fn.args.size() && i < args.size(); ++i)
    values[fn.args[i]] = std::move(args[i]);
  for (const bundle::Op &op : fn.ops) {
    if (mode == Mode::LogitsOnly && op.name == "cross_entropy") {
      *logitsOut = values[op.operands[0]];
      return {};
    }
    if (mode == Mode::LogitsOnly && op.name == "linear_cross_entropy") {
      const Tensor &x = values[op.operands[0]], &w = values[op.operands[1]];
      bool tw = op.boolAttr("transpose_weight");
      int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1];
      std::vector<int64_t> shape = x.shape;
      shape.back() = V;
      *logitsOut = Tensor::zeros(shape);
      cpu::linearLogits(x.data(), w.data(), tw, x.numel() / D, D, V,
                        op.floatAttr("softcap"), logitsOut->data());
      return {};
    }
    exec(op, values, fn, scope);
  }
  std::vector<Tensor> out;
  for (int r : fn.results)
    out.push_back(values[r]);
  return out;
}

void Executor::exec(const bundle::Op &op, std::vector<Tensor> &values,
                    const bundle::Function &fn, const Scope &scope) {
  auto in = [&](size_t i) -> Tensor & {
    if (i >= op.operands.size())
      fail(op, "missing operand");
    return values[op.operands[i]];
  };
  auto resultShape = [&](size_t i = 0) {
    return concrete(fn.values[op.results.at(i)]);
  };
  auto setResult = [&](Tensor t, size_t i = 0) {
    values[op.results.at(i)] = std::move(t);
  };
  auto newResult = [&](size_t i = 0) {
    return Tensor::zeros(resultShape(i));
  };
  const std::string &name = op.name;

  if (name == "param_ref") {
    ParamSlot *s = slot(op, scope);
    Tensor t;
    t.shape = resultShape();
    // Shares the parameter's storage (no copy; the store outlives the run).
    t.f = std::shared_ptr<std::vector<float>>(&s->value,
                                              [](std::vector<float> *) {});
    setResult(std::move(t));
  } else if (name == "param_grad") {
    ParamSlot *s = slot(op, scope);
    const Tensor &g = in(0);
    if (static_cast<size_t>(g.numel()) != s->grad.size())
      fail(op, "gradient size mismatch for '" + s->name + "'");
    const float *src = g.data();
    float *dst = s->grad.data();
    for (size_t k = 0; k < s->grad.size(); ++k)
      dst[k] += src[k];
  } else if (name == "constant") {
    Tensor t = newResult();
    t.data()[0] = static_cast<float>(op.floatAttr("value"));
    setResult(std::move(t));
  } else if (name == "zeros") {
    setResult(newResult());
  } else if (name == "embedding") {
    const Tensor &ids = in(0), &table = in(1);
    Tensor y = newResult();
    int64_t V = table.shape[0], D = table.shape[1], bad = 0;
    if (!cpu::embedding(ids.i->data(), table.data(), y.data(), ids.numel(), V,
                        D, &bad))
      fail(op, "token id " + std::to_string((*ids.i)[bad]) + " at position " +
                   std::to_string(bad) + " is outside the vocabulary [0, " +
                   std::to_string(V) + ")");
    setResult(std::move(y));
  } else if (name == "embedding_grad") {
    const Tensor &ids = in(0), &dy = in(1);
    Tensor dt = newResult();
    cpu::embeddingGradAcc(ids.i->data(), dy.data(), dt.data(), ids.numel(),
                          dt.shape[0], dt.shape[1]);
    setResult(std::move(dt));
  } else if (name == "matmul") {
    const Tensor &a = in(0), &w = in(1);
    Tensor y = newResult();
    if (w.shape.size() == 2) {
      int64_t K = w.shape[0], N = w.shape[1];
      const float *bias = op.operands.size() > 2 ? in(2).data() : nullptr;
      cpu::matmul(a.data(), w.data(), bias, y.data(), a.numel() / K, K, N);
    } else {
      size_t r = w.shape.size();
      int64_t M = a.shape[r - 2], K = a.shape[r - 1], N = w.shape[r - 1];
      cpu::batchedMatmul(a.data(), w.data(), y.data(), product(a.shape, 0, r - 2),
                         M, K, N);
    }
    setResult(std::move(y));
  } else if (name == "weight_grad") {
    const Tensor &x = in(0), &dy = in(1);
    Tensor dw = newResult();
    int64_t K = x.shape.back(), N = dy.shape.back();
    cpu::matmulGradWeightAcc(x.data(), dy.data(), dw.data(), x.numel() / K, K,
                             N);
    setResult(std::move(dw));
  } else if (name == "add" || name == "sub" || name == "mul" ||
             name == "div") {
    cpu::Binary kind = name == "add"   ? cpu::Binary::Add
                       : name == "sub" ? cpu::Binary::Sub
                       : name == "mul" ? cpu::Binary::Mul
                                       : cpu::Binary::Div;
    const Tensor &a = in(0), &b = in(1);
    Tensor y = newResult();
    cpu::binary(kind, a.data(), a.shape, b.data(), b.shape, y.data(), y.shape);
    setResult(std::move(y));
  } else if (name == "reduce_to") {
    const Tensor &x = in(0);
    Tensor y = newResult();
    cpu::reduceTo(x.data(), x.shape, y.data(), y.shape);
    setResult(std::move(y));
  } else if (name == "neg" || name == "exp" || name == "log" ||
             name == "silu" || name == "relu" || name == "sigmoid" ||
             name == "tanh" || name == "rsqrt" || name == "sqrt" ||
             name == "square" || name == "gelu" || name == "softcap") {
    std::string kind = name;
    float param = 0;
    if (name == "gelu")
      kind = op.strAttr("approximate", "none") == "tanh" ? "gelu_tanh"
                                                         : "gelu_erf";
    if (name == "softcap")
      param = static_cast<float>(op.floatAttr("cap"));
    const Tensor &x = in(0);
    Tensor y = newResult();
    cpu::unary(unaryKind(op, kind), x.data(), y.data(), x.numel(), param);
    setResult(std::move(y));
  } else if (name == "unary_grad") {
    const Tensor &x = in(0), &dy = in(1);
    Tensor dx = newResult();
    cpu::unaryGrad(unaryKind(op, op.strAttr("kind")), x.data(), dy.data(),
                   dx.data(), x.numel(), static_cast<float>(op.floatAttr("param")));
    setResult(std::move(dx));
  } else if (name == "sum" || name == "mean" || name == "max" ||
             name == "reduce_grad") {
    if (decoding && isSequenceAxis(fn, op, op.intAttr("axis")))
      fail(op, "mixes positions along the sequence axis; the KV cache "
               "cannot decode this model");
    std::string kind = name == "reduce_grad" ? op.strAttr("kind") : name;
    cpu::Reduce r = kind == "sum"    ? cpu::Reduce::Sum
                    : kind == "mean" ? cpu::Reduce::Mean
                                     : cpu::Reduce::Max;
    const Tensor &x = in(0);
    int64_t outer, n, inner;
    split3(x.shape, op.intAttr("axis"), outer, n, inner);
    Tensor y = newResult();
    if (name == "reduce_grad")
      cpu::reduceGrad(r, x.data(), in(1).data(), y.data(), outer, n, inner);
    else
      cpu::reduce(r, x.data(), y.data(), outer, n, inner);
    setResult(std::move(y));
  } else if (name == "softmax" || name == "softmax_grad") {
    const Tensor &x = in(0);
    if (decoding && isSequenceAxis(fn, op, op.intAttr("axis")))
      fail(op, "mixes positions along the sequence axis; the KV cache "
               "cannot decode this model");
    int64_t outer, n, inner;
    split3(x.shape, op.intAttr("axis"), outer, n, inner);
    Tensor y = newResult();
    if (name == "softmax")
      cpu::softmax(x.data(), y.data(), outer, n, inner);
    else
      cpu::softmaxGrad(x.data(), in(1).data(), y.data(), outer, n, inner);
    setResult(std::move(y));
  } else if (name == "rmsnorm") {
    const Tensor &x = in(0), &w = in(1);
    Tensor y = newResult();
    int64_t D = x.shape.back();
    cpu::rmsnorm(x.data(), w.data(), y.data(), x.numel() / D, D,
                 static_cast<float>(op.floatAttr("eps")),
                 static_cast<float>(op.floatAttr("offset")));
    setResult(std::move(y));
  } else if (name == "rmsnorm_grad") {
    const Tensor &x = in(0), &w = in(1), &dy = in(2);
    Tensor dx = newResult(0), dw = newResult(1);
    int64_t D = x.shape.back();
    cpu::rmsnormGrad(x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                     x.numel() / D, D, static_cast<float>(op.floatAttr("eps")),
                     static_cast<float>(op.floatAttr("offset")));
    setResult(std::move(dx), 0);
    setResult(std::move(dw), 1);
  } else if (name == "layernorm") {
    const Tensor &x = in(0), &w = in(1);
    const float *b = op.operands.size() > 2 ? in(2).data() : nullptr;
    Tensor y = newResult();
    int64_t D = x.shape.back();
    cpu::layernorm(x.data(), w.data(), b, y.data(), x.numel() / D, D,
                   static_cast<float>(op.floatAttr("eps")));
    setResult(std::move(y));
  } else if (name == "layernorm_grad") {
    const Tensor &x = in(0), &w = in(1), &dy = in(2);
    Tensor dx = newResult(0), dw = newResult(1), db = newResult(2);
    int64_t D = x.shape.back();
    cpu::layernormGrad(x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                       db.data(), x.numel() / D, D,
                       static_cast<float>(op.floatAttr("eps")));
    setResult(std::move(dx), 0);
    setResult(std::move(dw), 1);
    setResult(std::move(db), 2);
  } else if (name == "reshape") {
    Tensor t = in(0);
    t.shape = resultShape();
    t.lse.reset();
    setResult(std::move(t));
  } else if (name == "transpose") {
    const Tensor &x = in(0);
    Tensor y;
    y.shape = resultShape();
    y.isInt = x.isInt;
    if (x.isInt)
      fail(op, "transposing integer tensors is not supported");
    y.f = std::make_shared<std::vector<float>>(x.numel());
    cpu::transpose(x.data(), x.shape, op.listAttr("perm"), y.data());
    setResult(std::move(y));
  } else if (name == "split") {
    const Tensor &x = in(0);
    int64_t axis = op.intAttr("axis"), outer, n, inner;
    split3(x.shape, axis, outer, n, inner);
    int64_t start = 0;
    for (size_t r = 0; r < op.results.size(); ++r) {
      Tensor y = newResult(r);
      int64_t size = y.shape[axis];
      cpu::slice(x.data(), y.data(), outer, n, inner, start, start + size);
      start += size;
      setResult(std::move(y), r);
    }
  } else if (name == "concat") {
    Tensor y = newResult();
    int64_t axis = op.intAttr("axis"), outer, n, inner;
    split3(y.shape, axis, outer, n, inner);
    std::vector<const float *> parts;
    std::vector<int64_t> sizes;
    for (size_t k = 0; k < op.operands.size(); ++k) {
      parts.push_back(in(k).data());
      sizes.push_back(in(k).shape[axis]);
    }
    cpu::concat(parts, sizes, y.data(), outer, inner);
    setResult(std::move(y));
  } else if (name == "slice" || name == "pad") {
    const Tensor &x = in(0);
    Tensor y = newResult();
    int64_t axis = op.intAttr("axis"), outer, n, inner;
    int64_t start = op.intAttr("start"), end = op.intAttr("end");
    if (name == "slice") {
      split3(x.shape, axis, outer, n, inner);
      cpu::slice(x.data(), y.data(), outer, n, inner, start, end);
    } else {
      split3(y.shape, axis, outer, n, inner);
      cpu::pad(x.data(), y.data(), outer, n, inner, start, end);
    }
    setResult(std::move(y));
  } else if (name == "rope") {
    const Tensor &x = in(0);
    Tensor y = newResult();
    cpu::rope(x.data(), y.data(), x.shape[0], x.shape[1], x.shape[2],
              x.shape[3], ropeParams(op), op.boolAttr("inverse"),
              decoding ? cacheLength : 0);
    setResult(std::move(y));
  } else if (name == "attention" && decoding) {
    const Tensor &q = in(0), &k = in(1), &v = in(2);
    size_t index = static_cast<size_t>(&op - fn.ops.data());
    KV &kv = kvCache[{scope.layer, scope.instance, index}];
    kv.k.insert(kv.k.end(), k.data(), k.data() + k.numel());
    kv.v.insert(kv.v.end(), v.data(), v.data() + v.numel());
    int64_t hkv = k.shape[2], d = k.shape[3];
    int64_t sk = static_cast<int64_t>(kv.k.size()) / (hkv * d);
    Tensor o = newResult();
    cpu::attention(q.data(), kv.k.data(), kv.v.data(), o.data(), nullptr, 1,
                   q.shape[1], sk, q.shape[2], hkv, d, attentionParams(op),
                   cacheLength);
    setResult(std::move(o));
  } else if (name == "attention") {
    const Tensor &q = in(0), &k = in(1), &v = in(2);
    Tensor o = newResult();
    int64_t b = q.shape[0], s = q.shape[1], hq = q.shape[2], d = q.shape[3];
    o.lse = std::make_shared<std::vector<float>>(b * hq * s);
    cpu::attention(q.data(), k.data(), v.data(), o.data(), o.lse->data(), b,
                   s, k.shape[1], hq, k.shape[2], d, attentionParams(op));
    setResult(std::move(o));
  } else if (name == "attention_grad") {
    const Tensor &q = in(0), &k = in(1), &v = in(2), &o = in(3), &dO = in(4);
    if (!o.lse)
      fail(op, "the attention output lost its log-sum-exp");
    Tensor dq = newResult(0), dk = newResult(1), dv = newResult(2);
    cpu::attentionGrad(q.data(), k.data(), v.data(), o.data(), o.lse->data(),
                       dO.data(), dq.data(), dk.data(), dv.data(), q.shape[0],
                       q.shape[1], q.shape[2], k.shape[2], q.shape[3],
                       attentionParams(op));
    setResult(std::move(dq), 0);
    setResult(std::move(dk), 1);
    setResult(std::move(dv), 2);
  } else if (name == "cross_entropy") {
    const Tensor &logits = in(0), &targets = in(1);
    int64_t V = logits.shape.back(), count = 0;
    double loss = cpu::crossEntropy(logits.data(), targets.i->data(),
                                    logits.numel() / V, V,
                                    op.intAttr("ignore_index", -100), &count);
    lastLoss = loss;
    Tensor y = newResult();
    y.data()[0] = static_cast<float>(loss);
    setResult(std::move(y));
  } else if (name == "cross_entropy_grad") {
    const Tensor &logits = in(0), &targets = in(1), &dl = in(2);
    Tensor dx = newResult();
    int64_t V = logits.shape.back();
    cpu::crossEntropyGrad(logits.data(), targets.i->data(), dl.data()[0],
                          dx.data(), logits.numel() / V, V,
                          op.intAttr("ignore_index", -100));
    setResult(std::move(dx));
  } else if (name == "linear_cross_entropy") {
    const Tensor &x = in(0), &w = in(1), &targets = in(2);
    bool tw = op.boolAttr("transpose_weight");
    int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1], count = 0;
    double loss = cpu::linearCrossEntropy(
        x.data(), w.data(), tw, targets.i->data(), x.numel() / D, D, V,
        op.intAttr("ignore_index", -100), op.floatAttr("softcap"), &count);
    lastLoss = loss;
    Tensor y = newResult();
    y.data()[0] = static_cast<float>(loss);
    setResult(std::move(y));
  } else if (name == "linear_cross_entropy_grad") {
    const Tensor &x = in(0), &w = in(1), &targets = in(2), &dl = in(3);
    bool tw = op.boolAttr("transpose_weight");
    int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1];
    Tensor dx = newResult(0), dw = newResult(1);
    cpu::linearCrossEntropyGrad(x.data(), w.data(), tw, targets.i->data(),
                                dl.data()[0], dx.data(), dw.data(),
                                x.numel() / D, D, V,
                                op.intAttr("ignore_index", -100),
                                op.floatAttr("softcap"));
    setResult(std::move(dx), 0);
    setResult(std::move(dw), 1);
  } else if (name == "apply_layers") {
    const bundle::Layer *layer = bundle.layer(op.symbol);
    if (!layer || !layer->functions.count("forward"))
      fail(op, "no layer '" + op.symbol + "' with a forward function");
    Tensor x = in(0);
    int64_t first = op.intAttr("first"), count = op.intAttr("count");
    for (int64_t i = first; i < first + count; ++i) {
      checkpoints[{op.symbol, i}] = x;
      x = run(layer->functions.at("forward"), {x}, {op.symbol, i}).at(0);
      ++forwardRuns;
    }
    setResult(std::move(x));
  } else if (name == "apply_layers_grad") {
    const bundle::Layer *layer = bundle.layer(op.symbol);
    if (!layer || !layer->functions.count("backward"))
      fail(op, "no layer '" + op.symbol + "' with a backward function");
    Tensor dy = in(0);
    int64_t first = op.intAttr("first"), count = op.intAttr("count");
    for (int64_t i = first + count - 1; i >= first; --i) {
      auto it = checkpoints.find({op.symbol, i});
      if (it == checkpoints.end())
        fail(op, "no saved input for instance " + std::to_string(i));
      dy = run(layer->functions.at("backward"), {it->second, dy},
               {op.symbol, i})
               .at(0);
      checkpoints.erase(it);
      ++backwardRuns;
    }
    setResult(std::move(dy));
  } else if (name == "fused") {
    if (!op.region)
      fail(op, "fused op without a body");
    std::vector<Tensor> inputs;
    for (size_t k = 0; k < op.operands.size(); ++k)
      inputs.push_back(in(k));
    std::vector<Tensor> outs;
    if (FusedKernel kernel = fusedKernel(op)) {
      std::vector<int64_t> shape = resultShape(0);
      std::vector<const float *> ins;
      for (const Tensor &t : inputs)
        ins.push_back(t.data());
      std::vector<float *> outPtrs;
      for (size_t r = 0; r < op.results.size(); ++r) {
        outs.push_back(newResult(r));
        outPtrs.push_back(outs.back().data());
      }
      kernel(ins.data(), outPtrs.data(), outs[0].numel());
    } else {
      // No compiled kernel: run the body op by op.
      outs = run(*op.region, std::move(inputs), scope);
    }
    for (size_t r = 0; r < op.results.size(); ++r)
      setResult(std::move(outs[r]), r);
  } else {
    fail(op, "the CPU executor has no kernel for this operation");
  }
}

Executor::FusedKernel Executor::fusedKernel(const bundle::Op &op) {
  if (!kernels)
    return nullptr;
  std::string symbol = op.strAttr("kernel");
  if (symbol.empty())
    return nullptr;
  return kernels(symbol);
}

} // namespace mtc::exec
