//===- Executor.cpp - Runs bundle functions on the CPU ----------*- C++ -*-===//
//
// Part of mtc. The executor's entry points and its loop over a function's
// decoded ops: each op runs through the entry of its kind in the backend's
// kernel table (KernelTable.h). The kernels live in one file per op family:
// ExecLayers.cpp (parameters, layers, fused regions), ExecMatmul.cpp,
// ExecElementwise.cpp, ExecNorm.cpp, ExecMovement.cpp, ExecAttention.cpp,
// ExecLoss.cpp and ExecMoE.cpp; shapes come from the bundle's value types
// with B and S bound, data layouts follow runtime/cpu/Kernels.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"
#include "runtime/exec/Failure.h"

#include "lib/Bundle/Plan.h"
#include "lib/Format/Safetensors.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/exec/OpContext.h"

#include <algorithm>
#include <cstring>
#include <malloc.h>

namespace mtc::exec {

//===----------------------------------------------------------------------===//
// Helpers shared by the kernels (OpContext.h)
//===----------------------------------------------------------------------===//

void failOp(const bundle::Op &op, const std::string &msg) {
  raise((op.loc.empty() ? std::string("") : op.loc + ": ") + "error in '" +
        op.name + "': " + msg);
}

int64_t product(const std::vector<int64_t> &s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i)
    n *= s[i];
  return n;
}

void split3(const std::vector<int64_t> &s, int64_t axis, int64_t &outer,
            int64_t &n, int64_t &inner) {
  outer = product(s, 0, axis);
  n = s[axis];
  inner = product(s, axis + 1, s.size());
}

void OpContext::checkDecodable(int64_t axis) const {
  if (!ex.decoding)
    return;
  const Shape &shape = fn.values[op.operands.at(0)].shape;
  if (axis >= 0 && axis < static_cast<int64_t>(shape.size()) &&
      shape[axis] == kDimS)
    fail("mixes positions along the sequence axis; the KV cache cannot "
         "decode this model");
}

Executor::KV &OpContext::kvCache() {
  return ex.kvCache[{scope.layer, scope.instance, decoded.index}];
}

//===----------------------------------------------------------------------===//
// Kernel tables
//===----------------------------------------------------------------------===//

Status KernelTable::covers(const DecodedProgram &program) const {
  Status st;
  program.forEachOp([&](const DecodedFunction &fn, const DecodedOp &op) {
    if (st.ok() && !(*this)[op.kind])
      st = Status::error(DecodedProgram::describe(fn, op) + ": the " + name +
                         " backend has no kernel for this op");
  });
  return st;
}

namespace {

class CpuBackend final : public Backend {
public:
  /// \p device: the CPU device's backend (values as the plan stores them).
  explicit CpuBackend(bool device) : device(device) {}
  const KernelTable &table() const override { return cpuKernelTable(); }
  bool hostMemory() const override { return true; }
  bool planStorage() const override { return device; }
  void zero(void *p, int64_t bytes) override {
    if (bytes > 0)
      std::memset(p, 0, static_cast<size_t>(bytes));
  }
  void copy(void *dst, const void *src, int64_t bytes) override {
    if (bytes > 0 && dst != src)
      std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  void upload(void *dst, const void *src, int64_t bytes) override {
    copy(dst, src, bytes);
  }
  void download(void *dst, const void *src, int64_t bytes) override {
    copy(dst, src, bytes);
  }

private:
  bool device;
};

} // namespace

Backend &cpuBackend() {
  static CpuBackend backend(false);
  return backend;
}

Backend &cpuDeviceBackend() {
  static CpuBackend backend(true);
  return backend;
}

const KernelTable &cpuKernelTable() {
  static const KernelTable table = [] {
    KernelTable t("CPU");
    addLayerKernels(t);
    addMatmulKernels(t);
    addElementwiseKernels(t);
    addNormKernels(t);
    addMovementKernels(t);
    addAttentionKernels(t);
    addLossKernels(t);
    addMoeKernels(t);
    return t;
  }();
  return table;
}

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

/// \p t in host memory: itself on a host-memory backend (an fp32 copy of
/// a bf16 one), else an f32 copy brought back from the device (which must
/// hold f32).
Tensor Executor::hostCopy(const Tensor &t) const {
  if (backend->hostMemory() || !t.f)
    return widened(t);
  if (t.dtype != DType::F32)
    raise("internal error: logits to bring back from the device "
          "are not f32");
  Workspace::Scope onHost(nullptr);
  Tensor h = Tensor::empty(t.shape);
  backend->download(h.data(), t.data(), h.bytes());
  return h;
}

Executor::Executor(const bundle::Bundle &b, ParamStore &store, Backend &backend,
                   DecodedProgram decoded)
    : bundle(b), store(store), program(std::move(decoded)), backend(&backend),
      table(&backend.table()) {
  // A bf16 plan's storage types are the device's (a device backend, or the
  // CPU device's backend: its fp32 kernels then run through the conversion
  // layer, ExecConvert.cpp); the host executor that validates and samples
  // a bf16 run (cpuBackend) runs the bundle's functions in fp32.
  if (bundle::Precision p = bundle::planPrecision(b);
      p != bundle::Precision::F32 && backend.planStorage()) {
    auto add = [&](const bundle::Function &fn) {
      valueTypes[&fn] = bundle::valueStorage(fn, p);
    };
    for (const auto &[name, fn] : b.functions)
      add(fn);
    for (const bundle::Layer &l : b.layers) {
      for (const auto &[name, fn] : l.functions)
        add(fn);
      for (const bundle::Expert &x : l.experts)
        for (const auto &[name, fn] : x.functions)
          add(fn);
    }
    if (backend.hostMemory())
      table = &cpuBf16KernelTable();
  }
  keepFreedMemory();
}

Expected<std::unique_ptr<Executor>>
Executor::create(const bundle::Bundle &b, ParamStore &store, Backend &backend) {
  Expected<DecodedProgram> decoded = DecodedProgram::decode(b);
  if (!decoded)
    return Status::error("bundle: " + decoded.message());
  if (Status st = backend.table().covers(*decoded); !st.ok())
    return Status::error("bundle: " + st.message());
  return std::unique_ptr<Executor>(
      new Executor(b, store, backend, std::move(*decoded)));
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
    failOp(op, "no parameter '" + op.symbol + "' in " +
                   (scope.layer.empty()    ? std::string("the model")
                    : scope.expert.empty() ? "layer " + scope.layer
                                           : "expert " + scope.expert +
                                                 " of layer " + scope.layer));
  return s;
}

void Executor::beginCall(int64_t b, int64_t s) {
  B = b;
  S = s;
  forwardRuns = backwardRuns = 0;
  aux = AuxLoss{};
  routingHash = 0;
  pinnedNext = 0;
  if (pin == RoutingPin::Record)
    pinnedChoices.clear();
}

double Executor::totalLoss(const Tensor &result) const {
  float value = 0;
  backend->download(&value, result.data(), sizeof(float));
  double loss = static_cast<float>(lastLoss) == value ? lastLoss : value;
  // The download synchronised: device aux terms have landed.
  return loss +
         valueOrRaise(aux.total(aux.terms.empty() ? std::vector<double>{}
                                                  : backend->takeAuxTerms()));
}

Expected<double> AuxLoss::total(const std::vector<double> &values) const {
  double sum = host;
  for (int64_t i : terms) {
    if (i < 0 || i >= static_cast<int64_t>(values.size()))
      return Status::error("internal error: aux loss term " +
                           std::to_string(i) + " was not read back");
    sum += values[i];
  }
  return sum;
}

Expected<double> Executor::forwardBackward(const int32_t *tokens,
                                           const int32_t *targets, int64_t b,
                                           int64_t s) {
  return catchRaisedValue<double>(
      [&] { return forwardBackwardOrRaise(tokens, targets, b, s); });
}

double Executor::forwardBackwardOrRaise(const int32_t *tokens,
                                        const int32_t *targets, int64_t b,
                                        int64_t s) {
  beginCall(b, s);
  auto it = bundle.functions.find("forward_backward");
  if (it == bundle.functions.end())
    raise("the bundle has no forward_backward function (compile "
          "it with the training pipeline)");
  std::vector<Tensor> out =
      run(it->second,
          {Tensor::ints({B, S}, tokens), Tensor::ints({B, S}, targets)}, {});
  checkpoints.clear();
  return totalLoss(out.at(0));
}

Expected<double> Executor::loss(const int32_t *tokens, const int32_t *targets,
                                int64_t b, int64_t s) {
  return catchRaisedValue<double>([&] {
    beginCall(b, s);
    std::vector<Tensor> out =
        run(bundle.functions.at("forward"),
            {Tensor::ints({B, S}, tokens), Tensor::ints({B, S}, targets)}, {});
    checkpoints.clear();
    return totalLoss(out.at(0));
  });
}

Expected<Tensor> Executor::logits(const int32_t *tokens, int64_t b, int64_t s) {
  return catchRaisedValue<Tensor>([&] { return logitsOrRaise(tokens, b, s); });
}

Tensor Executor::logitsOrRaise(const int32_t *tokens, int64_t b, int64_t s) {
  beginCall(b, s);
  std::vector<int32_t> dummy(static_cast<size_t>(b * s), 0);
  Tensor out;
  run(bundle.functions.at("forward"),
      {Tensor::ints({B, S}, tokens), Tensor::ints({B, S}, dummy.data())}, {},
      Mode::LogitsOnly, &out);
  checkpoints.clear();
  if (!out.f)
    raise("the model's forward computes no cross_entropy, so it "
          "has no logits to generate from");
  return out;
}

void Executor::resetCache() {
  kvCache.clear();
  cacheLength = 0;
}

Expected<Tensor> Executor::decode(const int32_t *tokens, int64_t n) {
  return catchRaisedValue<Tensor>([&] { return decodeOrRaise(tokens, n); });
}

Tensor Executor::decodeOrRaise(const int32_t *tokens, int64_t n) {
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
    raise("the model's forward computes no cross_entropy, so it "
          "has no logits to generate from");
  return out;
}

void Executor::beginStep(int64_t b, int64_t s) {
  beginCall(b, s);
  checkpoints.clear();
}

Status Executor::runOps(const bundle::Function &fn, std::vector<Tensor> &values,
                        size_t begin, size_t end) {
  return catchRaised([&] {
    if (values.size() < fn.values.size())
      values.resize(fn.values.size());
    const DecodedFunction &dfn = decoded(fn);
    for (size_t k = begin; k < end && k < dfn.ops.size(); ++k)
      exec(dfn.ops[k], values, fn, {});
  });
}

Expected<std::vector<Tensor>> Executor::runLayer(const std::string &layer,
                                                 int64_t instance,
                                                 const std::string &fn,
                                                 std::vector<Tensor> args) {
  const bundle::Layer *l = bundle.layer(layer);
  if (!l || !l->functions.count(fn))
    return Status::error("no layer '" + layer + "' with a " + fn + " function");
  Scope scope{layer, instance};
  scope.backward = fn.rfind("backward", 0) == 0; // backward, backward_full
  Expected<std::vector<Tensor>> out = catchRaisedValue<std::vector<Tensor>>(
      [&] { return run(l->functions.at(fn), std::move(args), scope); });
  if (!out)
    return out;
  if (fn == "forward")
    ++forwardRuns;
  else
    ++backwardRuns;
  return out;
}

Expected<double> Executor::lossOf(const Tensor &result) const {
  return catchRaisedValue<double>([&] { return totalLoss(result); });
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
      raise("argument " + std::to_string(i) + " of a function is " +
            formatTensorShape(args[i].shape) + ", but it declares " +
            formatTensorShape(want));
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
  for (const DecodedOp &dop : decoded(fn).ops) {
    const bundle::Op &op = *dop.op;
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
        t.dtype = storageOf(fn, v);
        int64_t bytes = bundle::tensorBytes(t.numel(), t.dtype);
        char *p = ws->at(off, bytes); // zeroed by newResult if needed
        if (fn.values[v].dtype == DType::I32) {
          t.isInt = true;
          t.i = std::shared_ptr<int32_t>(reinterpret_cast<int32_t *>(p),
                                         [](int32_t *) {});
        } else {
          t.f = std::shared_ptr<float>(reinterpret_cast<float *>(p),
                                       [](float *) {});
        }
        if (dop.kind == OpKind::Attention && r == 0 && t.shape.size() == 4) {
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
    if (mode == Mode::LogitsOnly && dop.kind == OpKind::CrossEntropy) {
      *logitsOut = hostCopy(values[op.operands[0]]);
      return {};
    }
    if (mode == Mode::LogitsOnly && dop.kind == OpKind::LinearCrossEntropy) {
      // The logits are computed on the host (from the device's x and w on a
      // device backend).
      const Tensor x = hostCopy(values[op.operands[0]]),
                   w = hostCopy(values[op.operands[1]]);
      const LinearCrossEntropyAttrs &a = dop.get<LinearCrossEntropyAttrs>();
      Workspace::Scope onHost(nullptr);
      bool tw = a.transposeWeight;
      int64_t D = x.shape.back(), V = tw ? w.shape[0] : w.shape[1];
      std::vector<int64_t> shape = x.shape;
      shape.back() = V;
      *logitsOut = Tensor::empty(shape);
      cpu::linearLogits(x.data(), w.data(), tw, x.numel() / D, D, V, a.softcap,
                        logitsOut->data());
      return {};
    }
    exec(dop, values, fn, scope);
    if (plan) {
      for (size_t r = 0; r < op.results.size(); ++r) {
        Tensor &want = planned[r];
        if (!want.f && !want.i)
          continue;
        Tensor &got = values[op.results[r]];
        if (want.isInt) {
          if (got.i.get() != want.i.get())
            backend->copy(want.i.get(), got.i.get(), 4 * want.numel());
        } else {
          if (got.f.get() != want.f.get())
            backend->copy(want.f.get(), got.data(), want.bytes());
          if (want.lse && got.lse && got.lse.get() != want.lse.get())
            backend->copy(want.lse.get(), got.lse.get(),
                          4 * want.shape[0] * want.shape[1] * want.shape[2]);
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

DType Executor::storageOf(const bundle::Function &fn, int v) const {
  if (!valueTypes.empty()) {
    auto it = valueTypes.find(&fn);
    if (it != valueTypes.end())
      return it->second.at(v);
  }
  return fn.values.at(v).dtype == DType::I32 ? DType::I32 : DType::F32;
}

const DecodedFunction &Executor::decoded(const bundle::Function &fn) const {
  const DecodedFunction *d = program.find(fn);
  if (!d)
    raise("internal error: a function the executor did not decode "
          "(not one of its bundle's)");
  return *d;
}

void Executor::exec(const DecodedOp &op, std::vector<Tensor> &values,
                    const bundle::Function &fn, const Scope &scope) {
  OpContext c(*this, op, values, fn, scope);
  if (!opTimer) {
    (*table)[op.kind](c);
    return;
  }
  auto begin = std::chrono::steady_clock::now();
  (*table)[op.kind](c);
  auto end = std::chrono::steady_clock::now();
  std::vector<int64_t> shape;
  if (!op.op->results.empty()) {
    int r = op.op->results[0];
    if (r >= 0 && static_cast<size_t>(r) < values.size())
      shape = values[static_cast<size_t>(r)].shape;
  }
  opTimer(*op.op, shape, begin, end);
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

Executor::FusedKernel Executor::fusedKernel(const std::string &symbol) {
  if (!kernels)
    return nullptr;
  if (symbol.empty())
    return nullptr;
  return kernels(symbol);
}

} // namespace mtc::exec