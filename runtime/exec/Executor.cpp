//===- Executor.cpp - Runs bundle functions on the CPU ----------*- C++ -*-===//
//
// Part of mtc. One case per bundle op; shapes come from the bundle's value
// types with B and S bound, data layouts follow runtime/cpu/Kernels.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"

#include "lib/Bundle/Plan.h"
#include "lib/Format/Safetensors.h"

#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <malloc.h>
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

namespace {
thread_local Workspace *currentWorkspace = nullptr;
} // namespace

void *Workspace::allocate(int64_t bytes, bool zero) {
  int64_t size = bundle::align64(bytes);
  if (size < 0 || top + size > cap)
    throw ExecError{"device memory plan violated: the " + name + " region (" +
                    std::to_string(cap) + " bytes) cannot hold " +
                    std::to_string(size) + " more bytes (" +
                    std::to_string(top) + " in use)"};
  char *p = base + top;
  top += size;
  high = std::max(high, top);
  if (zero)
    std::memset(p, 0, static_cast<size_t>(size));
  return p;
}

void Workspace::reserve(int64_t bytes) {
  if (bytes > cap)
    throw ExecError{"device memory plan violated: the " + name + " region (" +
                    std::to_string(cap) + " bytes) cannot hold the " +
                    std::to_string(bytes) + " bytes of planned values"};
  top = bytes;
  high = std::max(high, top);
}

char *Workspace::at(int64_t offset, int64_t bytes) {
  if (offset < 0 || bytes < 0 || offset + bytes > cap)
    throw ExecError{"device memory plan violated: [" + std::to_string(offset) +
                    ", +" + std::to_string(bytes) + ") lies outside the " +
                    name + " region (" + std::to_string(cap) + " bytes)"};
  return base + offset;
}

Workspace *Workspace::current() { return currentWorkspace; }

Workspace::Scope::Scope(Workspace *w) : saved(currentWorkspace) {
  currentWorkspace = w;
}

Workspace::Scope::~Scope() { currentWorkspace = saved; }

std::shared_ptr<float> Tensor::allocate(int64_t n, bool zero) {
  if (Workspace *w = Workspace::current())
    return std::shared_ptr<float>(
        static_cast<float *>(w->allocate(4 * n, zero)), [](float *) {});
  // Heap buffers come from malloc's free lists (keepFreedMemory below), so
  // an uninitialised one costs no memset and, in steady state, no page
  // faults. 64-byte alignment: whole cache lines for the vector kernels.
  size_t bytes = sizeof(float) * static_cast<size_t>(std::max<int64_t>(n, 1));
  auto *p = static_cast<float *>(::operator new(bytes, std::align_val_t(64)));
  if (zero)
    std::memset(p, 0, bytes);
  return std::shared_ptr<float>(
      p, [](float *q) { ::operator delete(q, std::align_val_t(64)); });
}

Tensor Tensor::zeros(std::vector<int64_t> shape) {
  Tensor t;
  t.shape = std::move(shape);
  t.f = allocate(t.numel());
  return t;
}

Tensor Tensor::empty(std::vector<int64_t> shape) {
  Tensor t;
  t.shape = std::move(shape);
  t.f = allocate(t.numel(), false);
  return t;
}

Tensor Tensor::ints(std::vector<int64_t> shape, const int32_t *src) {
  Tensor t;
  t.shape = std::move(shape);
  t.isInt = true;
  int64_t n = t.numel();
  if (Workspace *w = Workspace::current())
    t.i = std::shared_ptr<int32_t>(static_cast<int32_t *>(w->allocate(4 * n)),
                                   [](int32_t *) {});
  else
    t.i = std::shared_ptr<int32_t>(new int32_t[static_cast<size_t>(n)],
                                   std::default_delete<int32_t[]>());
  std::copy(src, src + n, t.i.get());
  return t;
}

Tensor Tensor::view(std::vector<int64_t> shape, float *data) {
  Tensor t;
  t.shape = std::move(shape);
  t.f = std::shared_ptr<float>(data, [](float *) {});
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
      {"neg", cpu::Unary::Neg},          {"exp", cpu::Unary::Exp},
      {"log", cpu::Unary::Log},          {"silu", cpu::Unary::Silu},
      {"relu", cpu::Unary::Relu},        {"sigmoid", cpu::Unary::Sigmoid},
      {"tanh", cpu::Unary::Tanh},        {"rsqrt", cpu::Unary::Rsqrt},
      {"sqrt", cpu::Unary::Sqrt},        {"square", cpu::Unary::Square},
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

namespace {

/// Every op allocates its results afresh; with glibc's defaults each buffer
/// over 128 KiB is a new mmap, so every step pays page faults for memory it
/// freed a moment ago. Keeping freed memory in the heap instead made training
/// steps ~13% faster on this project's machines (docs/benchmarks.md). Done
/// once per process; a buffer pool in the executor would make it portable.
void keepFreedMemory() {
  static const bool done = [] {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 64 << 20);
#endif
    return true;
  }();
  (void)done;
}

} // namespace

Executor::Executor(const bundle::Bundle &b, ParamStore &store)
    : bundle(b), store(store) {
  Expected<DecodedProgram> decoded = DecodedProgram::decode(b);
  if (!decoded)
    throw ExecError{"bundle: " + decoded.message()};
  program = std::move(*decoded);
  keepFreedMemory();
}

std::vector<int64_t> Executor::concrete(const bundle::ValueType &t) const {
  std::vector<int64_t> out;
  for (Dim d : t.shape)
    out.push_back(d == kDimB ? B : d == kDimS ? S : d == kDimT ? T : d);
  return out;
}

ParamSlot *Executor::slot(const bundle::Op &op, const Scope &scope) {
  ParamSlot *s = scope.layer.empty() ? store.model(op.symbol)
                 : scope.expert.empty()
                     ? store.layer(scope.layer, scope.instance, op.symbol)
                     : store.expert(scope.layer, scope.instance, scope.expert,
                                    scope.expertIndex, op.symbol);
  if (!s)
    fail(op, "no parameter '" + op.symbol + "' in " +
                 (scope.layer.empty() ? std::string("the model")
                  : scope.expert.empty()
                      ? "layer " + scope.layer
                      : "expert " + scope.expert + " of layer " + scope.layer));
  return s;
}

void Executor::beginCall(int64_t b, int64_t s) {
  B = b;
  S = s;
  forwardRuns = backwardRuns = 0;
  auxLossSum = 0;
  routingHash = 0;
  pinnedNext = 0;
  if (pin == RoutingPin::Record)
    pinnedChoices.clear();
}

double Executor::totalLoss(const Tensor &result) const {
  float value = result.data()[0];
  double loss = static_cast<float>(lastLoss) == value ? lastLoss : value;
  return loss + auxLossSum;
}

double Executor::forwardBackward(const int32_t *tokens, const int32_t *targets,
                                 int64_t b, int64_t s) {
  beginCall(b, s);
  auto it = bundle.functions.find("forward_backward");
  if (it == bundle.functions.end())
    throw ExecError{"the bundle has no forward_backward function (compile "
                    "it with the training pipeline)"};
  std::vector<Tensor> out =
      run(it->second,
          {Tensor::ints({B, S}, tokens), Tensor::ints({B, S}, targets)}, {});
  checkpoints.clear();
  return totalLoss(out.at(0));
}

double Executor::loss(const int32_t *tokens, const int32_t *targets, int64_t b,
                      int64_t s) {
  beginCall(b, s);
  std::vector<Tensor> out =
      run(bundle.functions.at("forward"),
          {Tensor::ints({B, S}, tokens), Tensor::ints({B, S}, targets)}, {});
  checkpoints.clear();
  return totalLoss(out.at(0));
}

Tensor Executor::logits(const int32_t *tokens, int64_t b, int64_t s) {
  beginCall(b, s);
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
  beginCall(1, n);
  std::vector<int32_t> dummy(static_cast<size_t>(n), 0);
  Tensor out;
  decoding = true;
  try {
    run(bundle.functions.at("forward"),
        {Tensor::ints({1, n}, tokens), Tensor::ints({1, n}, dummy.data())}, {},
        Mode::LogitsOnly, &out);
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

void Executor::beginStep(int64_t b, int64_t s) {
  beginCall(b, s);
  checkpoints.clear();
}

void Executor::runOps(const bundle::Function &fn, std::vector<Tensor> &values,
                      size_t begin, size_t end) {
  if (values.size() < fn.values.size())
    values.resize(fn.values.size());
  for (size_t k = begin; k < end && k < fn.ops.size(); ++k)
    exec(fn.ops[k], values, fn, {});
}

std::vector<Tensor> Executor::runLayer(const std::string &layer,
                                       int64_t instance, const std::string &fn,
                                       std::vector<Tensor> args) {
  const bundle::Layer *l = bundle.layer(layer);
  if (!l || !l->functions.count(fn))
    throw ExecError{"no layer '" + layer + "' with a " + fn + " function"};
  Scope scope{layer, instance};
  scope.backward = fn == "backward";
  std::vector<Tensor> out = run(l->functions.at(fn), std::move(args), scope);
  if (fn == "forward")
    ++forwardRuns;
  else
    ++backwardRuns;
  return out;
}

double Executor::lossOf(const Tensor &result) const {
  return totalLoss(result);
}

std::vector<Tensor> Executor::run(const bundle::Function &fn,
                                  std::vector<Tensor> args, const Scope &scope,
                                  Mode mode, Tensor *logitsOut) {
  std::vector<Tensor> values(fn.values.size());
  for (size_t i = 0; i < fn.args.size() && i < args.size(); ++i) {
    // The bound dims against the declared ones: a static dim the caller's
    // data does not have would make every kernel read out of bounds.
    std::vector<int64_t> want = concrete(fn.values[fn.args[i]]);
    if (args[i].shape != want)
      throw ExecError{"argument " + std::to_string(i) + " of a function is " +
                      formatTensorShape(args[i].shape) + ", but it declares " +
                      formatTensorShape(want)};
    values[fn.args[i]] = std::move(args[i]);
  }
  // Planned placement (the streaming runtime's workspace).
  Workspace *ws = Workspace::current();
  const bundle::FunctionPlan *plan = nullptr;
  if (ws && !functionPlans.empty()) {
    auto it = functionPlans.find(&fn);
    if (it != functionPlans.end()) {
      plan = &it->second;
      ws->reserve(plan->packedBytes);
    }
  }
  std::vector<Tensor> planned;
  for (const bundle::Op &op : fn.ops) {
    if (plan) {
      // Results start at their planned place; whatever an op
      // builds elsewhere (in the scratch after the packed region) is copied
      // there after it.
      planned.assign(op.results.size(), Tensor{});
      for (size_t r = 0; r < op.results.size(); ++r) {
        int v = op.results[r];
        int64_t off = plan->offset.at(v);
        if (off < 0)
          continue;
        Tensor t;
        t.shape = concrete(fn.values[v]);
        int64_t bytes = bundle::tensorBytes(t.numel());
        char *p = ws->at(off, bytes); // zeroed by newResult if needed
        if (fn.values[v].dtype == DType::I32) {
          t.isInt = true;
          t.i = std::shared_ptr<int32_t>(reinterpret_cast<int32_t *>(p),
                                         [](int32_t *) {});
        } else {
          t.f = std::shared_ptr<float>(reinterpret_cast<float *>(p),
                                       [](float *) {});
        }
        if (op.name == "attention" && r == 0 && t.shape.size() == 4) {
          int64_t lse =
              bundle::tensorBytes(t.shape[0] * t.shape[1] * t.shape[2]);
          t.lse = std::shared_ptr<float>(
              reinterpret_cast<float *>(ws->at(off + bytes, lse)),
              [](float *) {});
        }
        planned[r] = t;
        values[v] = t;
      }
    }
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
      *logitsOut = Tensor::empty(shape);
      cpu::linearLogits(x.data(), w.data(), tw, x.numel() / D, D, V,
                        op.floatAttr("softcap"), logitsOut->data());
      return {};
    }
    exec(op, values, fn, scope);
    if (plan) {
      for (size_t r = 0; r < op.results.size(); ++r) {
        Tensor &want = planned[r];
        if (!want.f && !want.i)
          continue;
        Tensor &got = values[op.results[r]];
        if (want.isInt) {
          if (got.i.get() != want.i.get())
            std::memcpy(want.i.get(), got.i.get(),
                        static_cast<size_t>(4 * want.numel()));
        } else {
          if (got.f.get() != want.f.get())
            std::memcpy(want.f.get(), got.data(),
                        static_cast<size_t>(4 * want.numel()));
          if (want.lse && got.lse && got.lse.get() != want.lse.get())
            std::memcpy(want.lse.get(), got.lse.get(),
                        static_cast<size_t>(4 * want.shape[0] * want.shape[1] *
                                            want.shape[2]));
          if (!got.lse)
            want.lse.reset();
        }
        got = want;
      }
      ws->release(plan->packedBytes);
    }
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
  // newResult: zero-filled, for kernels that accumulate into (or only partly
  // write) their result; newOutput: uninitialised, for kernels that write
  // every element (audited per op below).
  // A planned result is already in place: use it (zero-filled for
  // newResult).
  auto newResult = [&](size_t i = 0) {
    const Tensor &pre = values[op.results.at(i)];
    if (!pre.f)
      return Tensor::zeros(resultShape(i));
    std::memset(pre.f.get(), 0, static_cast<size_t>(4 * pre.numel()));
    return pre;
  };
  auto newOutput = [&](size_t i = 0) {
    const Tensor &pre = values[op.results.at(i)];
    return pre.f ? pre : Tensor::empty(resultShape(i));
  };
  const std::string &name = op.name;

  if (name == "param_ref") {
    ParamSlot *s = slot(op, scope);
    Tensor t;
    t.shape = resultShape();
    // Shares the parameter's storage (no copy; the store outlives the run).
    t.f = std::shared_ptr<float>(paramLocator ? paramLocator(*s, false)
                                              : s->value.data(),
                                 [](float *) {});
    setResult(std::move(t));
  } else if (name == "param_grad") {
    ParamSlot *s = slot(op, scope);
    const Tensor &g = in(0);
    if (static_cast<size_t>(g.numel()) != s->grad.size())
      fail(op, "gradient size mismatch for '" + s->name + "'");
    const float *src = g.data();
    float *dst = paramLocator ? paramLocator(*s, true) : s->grad.data();
    for (size_t k = 0; k < s->grad.size(); ++k)
      dst[k] += src[k];
  } else if (name == "constant") {
    Tensor t = newOutput();
    t.data()[0] = static_cast<float>(op.floatAttr("value"));
    setResult(std::move(t));
  } else if (name == "zeros") {
    setResult(newResult());
  } else if (name == "embedding") {
    const Tensor &ids = in(0), &table = in(1);
    Tensor y = newOutput();
    int64_t V = table.shape[0], D = table.shape[1], bad = 0;
    if (!cpu::embedding(ids.ints(), table.data(), y.data(), ids.numel(), V, D,
                        &bad))
      fail(op, "token id " + std::to_string(ids.ints()[bad]) + " at position " +
                   std::to_string(bad) + " is outside the vocabulary [0, " +
                   std::to_string(V) + ")");
    setResult(std::move(y));
  } else if (name == "embedding_grad") {
    const Tensor &ids = in(0), &dy = in(1);
    Tensor dt = newResult();
    cpu::embeddingGradAcc(ids.ints(), dy.data(), dt.data(), ids.numel(),
                          dt.shape[0], dt.shape[1]);
    setResult(std::move(dt));
  } else if (name == "matmul") {
    const Tensor &a = in(0), &w = in(1);
    Tensor y = newOutput();
    if (w.shape.size() == 2) {
      int64_t K = w.shape[0], N = w.shape[1];
      const float *bias = op.operands.size() > 2 ? in(2).data() : nullptr;
      cpu::matmul(a.data(), w.data(), bias, y.data(), a.numel() / K, K, N);
    } else {
      size_t r = w.shape.size();
      int64_t M = a.shape[r - 2], K = a.shape[r - 1], N = w.shape[r - 1];
      cpu::batchedMatmul(a.data(), w.data(), y.data(),
                         product(a.shape, 0, r - 2), M, K, N);
    }
    setResult(std::move(y));
  } else if (name == "weight_grad") {
    const Tensor &x = in(0), &dy = in(1);
    Tensor dw = newOutput();
    int64_t K = x.shape.back(), N = dy.shape.back();
    cpu::matmulGradWeight(x.data(), dy.data(), dw.data(), x.numel() / K, K, N);
    setResult(std::move(dw));
  } else if (name == "add" || name == "sub" || name == "mul" || name == "div") {
    cpu::Binary kind = name == "add"   ? cpu::Binary::Add
                       : name == "sub" ? cpu::Binary::Sub
                       : name == "mul" ? cpu::Binary::Mul
                                       : cpu::Binary::Div;
    const Tensor &a = in(0), &b = in(1);
    Tensor y = newOutput();
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
    Tensor y = newOutput();
    cpu::unary(unaryKind(op, kind), x.data(), y.data(), x.numel(), param);
    setResult(std::move(y));
  } else if (name == "unary_grad") {
    const Tensor &x = in(0), &dy = in(1);
    Tensor dx = newOutput();
    cpu::unaryGrad(unaryKind(op, op.strAttr("kind")), x.data(), dy.data(),
                   dx.data(), x.numel(),
                   static_cast<float>(op.floatAttr("param")));
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
    Tensor y = newOutput();
    int64_t D = x.shape.back();
    cpu::rmsnorm(x.data(), w.data(), y.data(), x.numel() / D, D,
                 static_cast<float>(op.floatAttr("eps")),
                 static_cast<float>(op.floatAttr("offset")));
    setResult(std::move(y));
  } else if (name == "rmsnorm_grad") {
    const Tensor &x = in(0), &w = in(1), &dy = in(2);
    Tensor dx = newOutput(0), dw = newResult(1);
    int64_t D = x.shape.back();
    cpu::rmsnormGrad(x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                     x.numel() / D, D, static_cast<float>(op.floatAttr("eps")),
                     static_cast<float>(op.floatAttr("offset")));
    setResult(std::move(dx), 0);
    setResult(std::move(dw), 1);
  } else if (name == "layernorm") {
    const Tensor &x = in(0), &w = in(1);
    const float *b = op.operands.size() > 2 ? in(2).data() : nullptr;
    Tensor y = newOutput();
    int64_t D = x.shape.back();
    cpu::layernorm(x.data(), w.data(), b, y.data(), x.numel() / D, D,
                   static_cast<float>(op.floatAttr("eps")));
    setResult(std::move(y));
  } else if (name == "layernorm_grad") {
    const Tensor &x = in(0), &w = in(1), &dy = in(2);
    Tensor dx = newOutput(0), dw = newResult(1), db = newResult(2);
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
    if (x.isInt)
      fail(op, "transposing integer tensors is not supported");
    Tensor y = newOutput();
    cpu::transpose(x.data(), x.shape, op.listAttr("perm"), y.data());
    setResult(std::move(y));
  } else if (name == "split") {
    const Tensor &x = in(0);
    int64_t axis = op.intAttr("axis"), outer, n, inner;
    split3(x.shape, axis, outer, n, inner);
    int64_t start = 0;
    for (size_t r = 0; r < op.results.size(); ++r) {
      Tensor y = newOutput(r);
      int64_t size = y.shape[axis];
      cpu::slice(x.data(), y.data(), outer, n, inner, start, start + size);
      start += size;
      setResult(std::move(y), r);
    }
  } else if (name == "concat") {
    Tensor y = newOutput();
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
    Tensor y = newOutput();
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
    Tensor y = newOutput();
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
    Tensor o = newOutput();
    cpu::attention(q.data(), kv.k.data(), kv.v.data(), o.data(), nullptr, 1,
                   q.shape[1], sk, q.shape[2], hkv, d, attentionParams(op),
                   cacheLength);
    setResult(std::move(o));
  } else if (name == "attention") {
    const Tensor &q = in(0), &k = in(1), &v = in(2);
    Tensor o = newOutput();
    int64_t b = q.shape[0], s = q.shape[1], hq = q.shape[2], d = q.shape[3];
    if (!o.lse)
      o.lse = Tensor::allocate(b * hq * s, false);
    cpu::attention(q.data(), k.data(), v.data(), o.data(), o.lse.get(), b, s,
                   k.shape[1], hq, k.shape[2], d, attentionParams(op));
    setResult(std::move(o));
  } else if (name == "attention_grad") {
    const Tensor &q = in(0), &k = in(1), &v = in(2), &o = in(3), &dO = in(4);
    if (!o.lse)
      fail(op, "the attention output lost its log-sum-exp");
    Tensor dq = newOutput(0), dk = newOutput(1), dv = newOutput(2);
    cpu::attentionGrad(q.data(), k.data(), v.data(), o.data(), o.lse.get(),
                       dO.data(), dq.data(), dk.data(), dv.data(), q.shape[0],
                       q.shape[1], q.shape[2], k.shape[2], q.shape[3],
                       attentionParams(op));
    setResult(std::move(dq), 0);
    setResult(std::move(dk), 1);
    setResult(std::move(dv), 2);
  } else if (name == "cross_entropy") {
    const Tensor &logits = in(0), &targets = in(1);
    int64_t V = logits.shape.back(), count = 0;
    double loss =
        cpu::crossEntropy(logits.data(), targets.ints(), logits.numel() / V, V,
                          op.intAttr("ignore_index", -100), &count);
    lastLoss = loss;
    Tensor y = newOutput();
    y.data()[0] = static_cast<float>(loss);
    setResult(std::move(y));
  } else if (name == "cross_entropy_grad") {
    const Tensor &logits = in(0), &targets = in(1), &dl = in(2);
    Tensor dx = newOutput();
    int64_t V = logits.shape.back();
    cpu::crossEntropyGrad(logits.data(), targets.ints(), dl.data()[0],
                          dx.data(), logits.numel() / V, V,
                          op.intAttr("ignore_index", -100));
    setResult(std::move(dx));
  } else if (name == "linear_cross_entropy") {
    const Tensor &x = in(0), &w = in(1), &targets = in(2);
    bool tw = op.boolAttr("transpose_weight");
    int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1], count = 0;
    double loss = cpu::linearCrossEntropy(
        x.data(), w.data(), tw, targets.ints(), x.numel() / D, D, V,
        op.intAttr("ignore_index", -100), op.floatAttr("softcap"), &count);
    lastLoss = loss;
    Tensor y = newOutput();
    y.data()[0] = static_cast<float>(loss);
    setResult(std::move(y));
  } else if (name == "linear_cross_entropy_grad") {
    const Tensor &x = in(0), &w = in(1), &targets = in(2), &dl = in(3);
    bool tw = op.boolAttr("transpose_weight");
    int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1];
    Tensor dx = newOutput(0), dw = newResult(1);
    cpu::linearCrossEntropyGrad(
        x.data(), w.data(), tw, targets.ints(), dl.data()[0], dx.data(),
        dw.data(), x.numel() / D, D, V, op.intAttr("ignore_index", -100),
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
      std::vector<Tensor> outs =
          run(layer->functions.at("forward"), {x}, {op.symbol, i});
      std::vector<Tensor> &saved = checkpoints[{op.symbol, i}];
      saved.assign(1, x);
      saved.insert(saved.end(), outs.begin() + 1, outs.end());
      x = outs.at(0);
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
      Scope inner{op.symbol, i};
      inner.backward = true;
      std::vector<Tensor> args{it->second[0], dy};
      args.insert(args.end(), it->second.begin() + 1, it->second.end());
      dy = run(layer->functions.at("backward"), std::move(args), inner).at(0);
      checkpoints.erase(it);
      ++backwardRuns;
    }
    setResult(std::move(dy));
  } else if (name == "moe") {
    moe(op, values, fn, scope);
  } else if (name == "moe_grad") {
    moeGrad(op, values, fn, scope);
  } else if (name == "fused") {
    if (!op.region)
      fail(op, "fused op without a body");
    std::vector<Tensor> inputs;
    for (size_t k = 0; k < op.operands.size(); ++k)
      inputs.push_back(in(k));
    std::vector<Tensor> outs;
    if (FusedKernel kernel = fusedKernel(op)) {
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
        outs.push_back(newOutput(r));
        outPtrs.push_back(outs.back().data());
      }
      kernel(ins.data(), outPtrs.data(), n);
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

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//
//
// Semantics (HF Mixtral / Qwen2-MoE): router logits r = h @ router [N, E]
// (N = B * S tokens), p = softmax(r); each token's top_k experts by p (ties:
// the lower index first); gate weights g = p[top_k], divided by their sum when
// `normalize`; y_t = sum_k g_tk expert_{e_k}(h_t), each expert's forward run
// once on the [T_e, D] tokens routed to it (tokens in ascending order; experts
// without tokens are skipped). aux_loss c > 0 adds c * E * sum_e f_e P_e with
// f_e = (top-k assignments to e) / (N * top_k) and P_e = mean_t p_te; its
// gradient flows through P_e only.

namespace {

/// Releases what the current Workspace allocated during its lifetime.
class ReleaseGuard {
public:
  ReleaseGuard() : w(Workspace::current()), mark(w ? w->mark() : 0) {}
  ~ReleaseGuard() {
    if (w)
      w->release(mark);
  }

private:
  Workspace *w;
  int64_t mark;
};

/// Rows \p slots[j].first of src [N, D], stacked: [slots.size(), D].
Tensor gatherRows(const float *src, int64_t D,
                  const std::vector<std::pair<int64_t, int64_t>> &slots) {
  Tensor x = Tensor::empty({static_cast<int64_t>(slots.size()), D});
  for (size_t j = 0; j < slots.size(); ++j)
    std::copy(src + slots[j].first * D, src + (slots[j].first + 1) * D,
              x.data() + static_cast<int64_t>(j) * D);
  return x;
}

const bundle::Expert &expertOf(const bundle::Bundle &b, const bundle::Op &op,
                               const std::string &layerName) {
  const bundle::Layer *layer = b.layer(layerName);
  if (!layer)
    fail(op, "is only valid inside a layer");
  const bundle::Expert *e = layer->expert(op.symbol);
  if (!e)
    fail(op, "layer '" + layerName + "' has no expert '" + op.symbol + "'");
  return *e;
}

} // namespace

Executor::Routing Executor::route(const bundle::Op &op, const Tensor &h,
                                  const Tensor &router, int64_t numExperts) {
  Routing r;
  if (h.shape.empty() || router.shape.size() != 2)
    fail(op, "expects an input [.., D] and a router [D, E]");
  r.D = h.shape.back();
  r.N = r.D ? h.numel() / r.D : 0;
  r.E = router.shape[1];
  r.K = op.intAttr("top_k", 1);
  if (router.shape[0] != r.D || r.E != numExperts)
    fail(op, "the router must be [" + std::to_string(r.D) + ", " +
                 std::to_string(numExperts) + "]");
  if (r.K < 1 || r.K > r.E)
    fail(op, "top_k must be in [1, " + std::to_string(r.E) + "]");
  const int64_t N = r.N, E = r.E, K = r.K;
  std::vector<float> logits(static_cast<size_t>(N * E));
  cpu::matmul(h.data(), router.data(), nullptr, logits.data(), N, r.D, E);
  r.probs.resize(logits.size());
  cpu::softmax(logits.data(), r.probs.data(), N, E, 1);
  r.choice.resize(static_cast<size_t>(N * K));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < N; ++t) {
    const float *p = r.probs.data() + t * E;
    auto key = [&](int32_t e) { return std::isnan(p[e]) ? -INFINITY : p[e]; };
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(),
                      [&](int32_t a, int32_t b) {
                        float ka = key(a), kb = key(b);
                        return ka > kb || (ka == kb && a < b);
                      });
    std::copy(order.begin(), order.begin() + K, r.choice.begin() + t * K);
  }
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
    fail(op, "expert '" + expert.name + "' has no " + fn + " function");
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
    fail(op, "expert '" + expert.name + "' " + fn + " must return one value");
  return out;
}

void Executor::moe(const bundle::Op &op, std::vector<Tensor> &values,
                   const bundle::Function &fn, const Scope &scope) {
  const bundle::Expert &expert = expertOf(bundle, op, scope.layer);
  const Tensor &h = values[op.operands.at(0)];
  const Tensor &router = values[op.operands.at(1)];
  Routing r = route(op, h, router, expert.count);
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
        fail(op, "no recorded routing to replay for this call");
      r.choice = pinnedChoices[pinnedNext++];
    }
  }
  assign(r, op.boolAttr("normalize"));
  const int64_t D = r.D, K = r.K;
  Tensor y = Tensor::zeros(concrete(fn.values[op.results.at(0)]));
  if (y.numel() != r.N * D)
    fail(op, "result shape does not match the input");
  for (int64_t e = 0; e < r.E; ++e) {
    const auto &slots = r.routed[e];
    if (slots.empty())
      continue;
    int64_t Te = static_cast<int64_t>(slots.size());
    // Each expert's temporaries are released once its output is added in.
    ReleaseGuard release;
    Tensor out = runExpert(op, expert, "forward", e,
                           {gatherRows(h.data(), D, slots)}, scope)
                     .at(0);
    if (out.numel() != Te * D)
      fail(op, "expert '" + expert.name + "' returned a wrong shape");
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
    double c = op.floatAttr("aux_loss");
    if (c > 0 && r.N > 0) {
      double aux = 0;
      for (int64_t e = 0; e < r.E; ++e) {
        double f = static_cast<double>(r.routed[e].size()) / (r.N * r.K);
        double P = 0;
        for (int64_t t = 0; t < r.N; ++t)
          P += r.probs[t * r.E + e];
        aux += f * P / r.N;
      }
      auxLossSum += c * r.E * aux;
    }
  }
  values[op.results[0]] = std::move(y);
}

void Executor::moeGrad(const bundle::Op &op, std::vector<Tensor> &values,
                       const bundle::Function &fn, const Scope &scope) {
  const bundle::Expert &expert = expertOf(bundle, op, scope.layer);
  const Tensor &h = values[op.operands.at(0)];
  const Tensor &router = values[op.operands.at(1)];
  const Tensor &dy = values[op.operands.at(2)];
  // The same inputs as the forward pass, so the same choices.
  Routing r = route(op, h, router, expert.count);
  assign(r, op.boolAttr("normalize"));
  const int64_t N = r.N, D = r.D, E = r.E, K = r.K;
  Tensor dh = Tensor::zeros(concrete(fn.values[op.results.at(0)]));
  Tensor drouter = Tensor::zeros(concrete(fn.values[op.results.at(1)]));
  if (dy.numel() != N * D || dh.numel() != N * D || drouter.numel() != D * E)
    fail(op, "operand and result shapes do not match");

  // Experts: dy_e = g * dy on each expert's tokens; dg = <dy_t, expert_out>.
  std::vector<double> dg(static_cast<size_t>(N * K), 0.0);
  for (int64_t e = 0; e < E; ++e) {
    const auto &slots = r.routed[e];
    if (slots.empty())
      continue;
    int64_t Te = static_cast<int64_t>(slots.size());
    ReleaseGuard release;
    Tensor xe = gatherRows(h.data(), D, slots);
    Tensor out = runExpert(op, expert, "forward", e, {xe}, scope).at(0);
    if (out.numel() != Te * D)
      fail(op, "expert '" + expert.name + "' returned a wrong shape");
    Tensor dye = Tensor::empty({Te, D});
    for (int64_t j = 0; j < Te; ++j) {
      auto [t, k] = slots[j];
      float g = r.gate[t * K + k];
      const float *dyt = dy.data() + t * D, *oj = out.data() + j * D;
      float *dj = dye.data() + j * D;
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) {
        dj[d] = g * dyt[d];
        dot += static_cast<double>(dyt[d]) * oj[d];
      }
      dg[t * K + k] = dot;
    }
    Tensor dxe = runExpert(op, expert, "backward", e,
                           {std::move(xe), std::move(dye)}, scope)
                     .at(0);
    if (dxe.numel() != Te * D)
      fail(op, "expert '" + expert.name + "' backward returned a wrong shape");
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
  const bool normalize = op.boolAttr("normalize");
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
  double c = op.floatAttr("aux_loss");
  if (c > 0 && N > 0)
    for (int64_t e = 0; e < E; ++e) {
      double f = static_cast<double>(r.routed[e].size()) / (N * K);
      float coef = static_cast<float>(c * E * f / N);
      for (int64_t t = 0; t < N; ++t)
        dp[t * E + e] += coef;
    }
  std::vector<float> dr(dp.size());
  cpu::softmaxGrad(r.probs.data(), dp.data(), dr.data(), N, E, 1);
  // dh += dr @ router^T; drouter = h^T dr.
  cpu::gemm(false, true, N, D, E, 1.0f, dr.data(), router.data(), 1.0f,
            dh.data());
  cpu::matmulGradWeightAcc(h.data(), dr.data(), drouter.data(), N, D, E);
  values[op.results[0]] = std::move(dh);
  values[op.results[1]] = std::move(drouter);
}

Status Executor::useBundleKernels() {
  if (bundle.cpuKernels.empty())
    return Status::success();
  Expected<std::unique_ptr<KernelLibrary>> lib =
      KernelLibrary::load(bundle.cpuKernels);
  if (!lib)
    return lib.status().withPrefix("loading the bundle's CPU kernels (built "
                                   "for '" +
                                   bundle.cpuKernelsTarget + "')");
  kernelLibrary = std::move(*lib);
  KernelLibrary *library = kernelLibrary.get();
  kernels = [library](const std::string &name) -> FusedKernel {
    Expected<KernelLibrary::Kernel> k = library->lookup(name);
    return k ? *k : nullptr;
  };
  return Status::success();
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
