//===- Executor.h - Runs bundle functions on the CPU ------------*- C++ -*-===//
//
// Part of mtc. Runs the functions of a bundle op by op with the CPU kernels
// of runtime/cpu, with parameters resident in a ParamStore. The ops are
// decoded once, when the executor is constructed (DecodedOp.h), and each runs
// through the entry of its kind in the backend's kernel table
// (KernelTable.h; the CPU kernels are runtime/exec/Exec*.cpp, one file per
// op family). A layer application runs the layer's forward once per instance
// and keeps each instance's input (the activation checkpoint); its gradient
// runs the layer's backward in reverse order from those inputs, recomputing
// the rest.
//
// Mixture-of-experts layers: `moe` routes each token to its top-k experts
// and runs an expert's forward on the [T, D] tokens routed to it (T bound per
// call); `moe_grad` recomputes the routing and runs each expert's backward.
// The load-balancing (aux) losses of the moe ops a forward pass runs are
// summed by the executor and added to the loss it returns (forwardBackward,
// loss); their gradient is part of moe_grad.
//
// This executor binds the symbolic dims (B, S, T) at call time and allocates
// every value afresh; the streaming executor (device arena, prefetch) replaces
// it for models larger than memory.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_EXECUTOR_H
#define MTC_RUNTIME_EXEC_EXECUTOR_H

#include "lib/Bundle/Bundle.h"
#include "lib/Bundle/Plan.h"
#include "lib/Support/Status.h"
#include "runtime/exec/Backend.h"
#include "runtime/exec/DecodedOp.h"
#include "runtime/exec/Failure.h"
#include "runtime/exec/KernelLibrary.h"
#include "runtime/exec/KernelTable.h"
#include "runtime/exec/ParamStore.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace mtc::exec {

/// Where tensors are allocated while a run is active on this thread: a bump
/// region of device memory (the streaming runtime's workspace and stage
/// regions, docs/streaming.md). Without one, tensors live on the host heap.
/// Allocation follows the plan's byte rule (lib/Bundle/Plan.h: align64 of
/// 4 bytes per element); exceeding the region is an error, never an overflow.
class Workspace {
public:
  Workspace() = default;
  /// A region of \p backend's value memory (null: host memory).
  Workspace(void *base, int64_t capacity, std::string what,
            Backend *backend = nullptr)
      : base(static_cast<char *>(base)), cap(capacity), name(std::move(what)),
        mem(backend) {}
  /// \p bytes (rounded up to 64), zero-filled (through the backend) unless
  /// \p zero is false. For the kernels: exhausting the region fails the
  /// running op (raise(), Failure.h).
  void *allocate(int64_t bytes, bool zero = true);
  int64_t mark() const { return top; }
  void release(int64_t mark) { top = mark; }
  void reset() { top = 0; }
  int64_t used() const { return top; }
  int64_t peak() const { return high; }
  int64_t capacity() const { return cap; }
  void resetPeak() { high = top; }
  /// Bytes [0, bytes) hold planned values (FunctionPlan offsets); bump
  /// allocation continues after them. Fails the running op (raise()) if
  /// they do not fit.
  void reserve(int64_t bytes);
  /// The region's byte at \p offset (bounds-checked: raise()).
  char *at(int64_t offset, int64_t bytes);
  /// The backend whose memory the region is (null: host memory).
  Backend *backend() const { return mem; }

  /// The workspace tensors of this thread are allocated from (null: heap).
  static Workspace *current();
  /// Makes \p w current on this thread until the guard goes out of scope.
  class Scope {
  public:
    explicit Scope(Workspace *w);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Workspace *saved;
  };

private:
  char *base = nullptr;
  int64_t cap = 0, top = 0, high = 0;
  std::string name;
  Backend *mem = nullptr;
};

/// A dense row-major tensor (fp32, or int32 for token ids; bf16 on a device
/// under a bf16 step plan, where `f` then points at 2-byte elements that
/// only the device kernels read). The storage is shared: heap memory owned
/// by the tensor, a parameter's memory, or a region of device memory (not
/// owned).
struct Tensor {
  std::vector<int64_t> shape;
  bool isInt = false;
  /// How the elements are stored (lib/Bundle/Plan.h, valueStorage): F32
  /// or I32 (with isInt) everywhere except the values of a bf16 plan.
  DType dtype = DType::F32;
  std::shared_ptr<float> f;
  std::shared_ptr<int32_t> i;
  /// Attention outputs carry their log-sum-exp for the backward pass.
  std::shared_ptr<float> lse;

  int64_t numel() const;
  /// The bytes of the elements (not rounded).
  int64_t bytes() const { return bundle::elementBytes(dtype) * numel(); }
  float *data() { return f.get(); }
  const float *data() const { return f.get(); }
  const int32_t *ints() const { return i.get(); }
  /// Zero-filled, from the current Workspace or the heap. Like every
  /// allocation here, for use inside an entry point of the executor: an
  /// exhausted workspace fails the running op (raise(), Failure.h).
  static Tensor zeros(std::vector<int64_t> shape, DType t = DType::F32);
  /// Uninitialised (for results a kernel writes in full), from the current
  /// Workspace or the heap.
  static Tensor empty(std::vector<int64_t> shape, DType t = DType::F32);
  static Tensor ints(std::vector<int64_t> shape, const int32_t *src);
  /// \p n elements of \p t (4 bytes unless bf16), zero-filled unless \p
  /// zero is false, 64-byte aligned, from the current Workspace or the heap.
  static std::shared_ptr<float> allocate(int64_t n, bool zero = true,
                                         DType t = DType::F32);
  /// A tensor over memory it does not own.
  static Tensor view(std::vector<int64_t> shape, float *data,
                     DType t = DType::F32);
};

/// The aux (load-balancing) losses of the moe ops a call ran: what the CPU
/// kernels summed on the host, plus the terms a device backend's kernels
/// computed into its own memory (Backend::reserveAuxTerm), listed by index
/// and read once the work queued so far has run (Backend::takeAuxTerms): no
/// host round trip inside a step.
struct AuxLoss {
  double host = 0;
  std::vector<int64_t> terms;

  AuxLoss &operator+=(const AuxLoss &o) {
    host += o.host;
    terms.insert(terms.end(), o.terms.begin(), o.terms.end());
    return *this;
  }
  /// host plus the listed terms of \p values (takeAuxTerms' result), summed
  /// in order; an internal error if a listed term was not read back.
  Expected<double> total(const std::vector<double> &values) const;
};

/// Errors are values: every public method that can fail returns a Status or
/// an Expected whose message names the op's source location ("file:line:col:
/// error in 'op': ..."); a failure inside an op unwinds only to the method
/// (Failure.h).
class Executor {
public:
  /// Decodes every op of \p b (DecodedOp.h). An error when the bundle holds
  /// an op the runtime (or the CPU kernel table) does not know or an
  /// attribute that is missing, misspelt or ill-typed, naming the function,
  /// the op and its source location. \p b must outlive the executor and
  /// not change.
  /// The ops run through \p backend's kernel table (default: the CPU's); a
  /// bundle op the table has no kernel for is an error here.
  static Expected<std::unique_ptr<Executor>>
  create(const bundle::Bundle &b, ParamStore &store,
         Backend &backend = cpuBackend());
  /// The backend the executor runs on.
  Backend &runsOn() const { return *backend; }
  /// How value \p v of \p fn is stored (its step plan's precision,
  /// bundle::valueStorage; F32 or I32 for fp32 plans and no plan).
  DType storageOf(const bundle::Function &fn, int v) const;

  /// Runs the model's forward_backward on one micro-batch: returns the loss
  /// (the function's result plus the aux losses of its moe ops) and adds this
  /// batch's gradients to the store's gradient buffers.
  /// tokens and targets are [B, S]. An error on bad input (a token id
  /// outside the vocabulary, ...).
  Expected<double> forwardBackward(const int32_t *tokens,
                                   const int32_t *targets, int64_t B,
                                   int64_t S);
  /// The loss without gradients (validation), aux losses included.
  Expected<double> loss(const int32_t *tokens, const int32_t *targets,
                        int64_t B, int64_t S);
  /// The logits [B, S, V] the loss is computed from (generation).
  Expected<Tensor> logits(const int32_t *tokens, int64_t B, int64_t S);

  /// Incremental decoding with a KV cache (batch 1): runs the model on the
  /// \p n tokens that follow everything passed since resetCache(), and
  /// returns their logits [1, n, V]. Position-wise ops see only the new
  /// tokens; each attention op appends its keys and values to its cache and
  /// attends over all of them; rope rotates at the absolute positions.
  /// An error for models with ops that mix positions in other ways
  /// (reductions or softmax over the sequence axis), which need a full
  /// recomputation instead (logits()).
  Expected<Tensor> decode(const int32_t *tokens, int64_t n);
  void resetCache();
  int64_t cachedTokens() const { return cacheLength; }

  /// A compiled fused kernel: `void(inputs, outputs, n)` (docs/compiler.md).
  using FusedKernel = void (*)(const float *const *, float *const *, int64_t);
  /// Resolves kernel symbols of `fused` ops (null: run their bodies op by op).
  void setKernelResolver(std::function<FusedKernel(const std::string &)> r) {
    kernels = std::move(r);
  }
  /// Loads the bundle's compiled CPU kernels (if it carries any) and calls
  /// them for its fused ops; the executor keeps the library loaded.
  Status useBundleKernels();

  /// Pieces of forwardBackward for a runtime that schedules the layers itself
  /// (the streaming executor, runtime/stream): beginStep binds B and S and
  /// clears per-call state; runOps runs ops [begin, end) of a model-level
  /// function on \p values (sized to the function's values); runLayer runs
  /// one function ("forward", "backward") of a layer instance.
  void beginStep(int64_t b, int64_t s);
  Status runOps(const bundle::Function &fn, std::vector<Tensor> &values,
                size_t begin, size_t end);
  Expected<std::vector<Tensor>> runLayer(const std::string &layer,
                                         int64_t instance,
                                         const std::string &fn,
                                         std::vector<Tensor> args);
  /// The loss a forward_backward result stands for plus the aux losses so
  /// far (see forwardBackward); resetAux() clears the aux sum.
  Expected<double> lossOf(const Tensor &result) const;
  void resetAux() { aux = AuxLoss{}; }

  /// Value placement for functions run while a Workspace is current: each
  /// planned value lives at its FunctionPlan offset, each op's scratch after
  /// the packed region (released after the op). Functions without a plan
  /// bump-allocate. The plans must outlive the executor's use of them.
  void setFunctionPlans(
      std::map<const bundle::Function *, bundle::FunctionPlan> plans) {
    functionPlans = std::move(plans);
  }

  /// Where parameter values and gradients live (default: the ParamStore's
  /// host vectors). The streaming executor points them at device memory:
  /// \p grad false asks for the value, true for the gradient accumulator.
  using ParamLocator = std::function<float *(const ParamSlot &, bool grad)>;
  void setParamLocator(ParamLocator l) { paramLocator = std::move(l); }

  /// Layer-instance loads during the last call (each apply runs an instance's
  /// forward once, each apply_layers_grad its backward once).
  int64_t layerForwardRuns() const { return forwardRuns; }
  int64_t layerBackwardRuns() const { return backwardRuns; }
  /// Called after each layer instance's backward (apply_layers_grad) with
  /// the layer and the instance: its gradients of this call are complete
  /// (data-parallel training starts their sum over the ranks). Null: none.
  using InstanceGradHook = std::function<void(const std::string &, int64_t)>;
  void setInstanceGradHook(InstanceGradHook fn) {
    instanceGradHook = std::move(fn);
  }
  /// Called after every op the executor runs (a fused op once, not its
  /// body; apply_layers once around its instances' ops) with the op, the
  /// concrete shape of its first result ({} when it has none) and when it
  /// began and ended: `mtc train --trace-ops` turns these into per-op
  /// spans. Null: none (no clock is read).
  using OpTimer =
      std::function<void(const bundle::Op &, const std::vector<int64_t> &,
                         std::chrono::steady_clock::time_point,
                         std::chrono::steady_clock::time_point)>;
  void setOpTimer(OpTimer fn) { opTimer = std::move(fn); }
  /// The aux (load-balancing) losses of the moe ops the last call ran,
  /// already included in the loss it returned (device terms unread: the
  /// streaming executor reads them after its step's synchronisation).
  const AuxLoss &auxLoss() const { return aux; }
  /// A fingerprint of every top-k choice the last call's forward pass made
  /// (0 without moe ops; under Replay: the choices it would have made).
  uint64_t routingSignature() const { return routingHash; }

  /// Top-k routing is piecewise constant in the parameters. For gradient
  /// checks, Record keeps the expert choices of every moe op a call's forward
  /// pass runs, and Replay makes later calls reuse them (in the same order)
  /// instead of choosing: the loss is then the smooth function of that one
  /// routing piece, whose derivative the compiled gradient is. Gate weights,
  /// probabilities and the aux loss' P_e still follow the parameters.
  enum class RoutingPin { Off, Record, Replay };
  void pinRouting(RoutingPin mode) { pin = mode; }

private:
  /// The kernels' view of the executor (runtime/exec/OpContext.h).
  friend class OpContext;

  struct Scope {
    std::string layer; ///< empty: model level
    int64_t instance = 0;
    /// Non-empty: inside expert `expertIndex` of `layer`.
    std::string expert = {};
    int64_t expertIndex = 0;
    /// Inside a layer's backward: a recomputed moe adds no aux loss again.
    bool backward = false;
  };
  /// The routing of one moe op over its N tokens.
  struct Routing {
    int64_t N = 0, D = 0, E = 0, K = 0;
    std::vector<float> probs;    ///< [N, E] router softmax
    std::vector<int32_t> choice; ///< [N, K] chosen experts, best first
    std::vector<float> gate;     ///< [N, K] gate weights
    /// Per expert: the (token, k) slots routed to it, tokens ascending.
    std::vector<std::vector<std::pair<int64_t, int64_t>>> routed;
  };
  /// What the run is for: stop early at the loss' logits for generation.
  enum class Mode { Full, LogitsOnly };

  /// create() decoded the program.
  Executor(const bundle::Bundle &b, ParamStore &store, Backend &backend,
           DecodedProgram program);
  /// The bodies of the public methods of the same name: their failures
  /// unwind (raise()) to the public method, which returns them.
  double forwardBackwardOrRaise(const int32_t *tokens, const int32_t *targets,
                                int64_t B, int64_t S);
  Tensor logitsOrRaise(const int32_t *tokens, int64_t B, int64_t S);
  Tensor decodeOrRaise(const int32_t *tokens, int64_t n);

  std::vector<Tensor> run(const bundle::Function &fn, std::vector<Tensor> args,
                          const Scope &scope, Mode mode = Mode::Full,
                          Tensor *logitsOut = nullptr);
  /// The decoded form of \p fn (a function of the bundle).
  const DecodedFunction &decoded(const bundle::Function &fn) const;
  /// \p t in host memory (a copy from a device backend's memory).
  Tensor hostCopy(const Tensor &t) const;
  /// Runs \p op through the kernel table.
  void exec(const DecodedOp &op, std::vector<Tensor> &values,
            const bundle::Function &fn, const Scope &scope);
  ParamSlot *slot(const bundle::Op &op, const Scope &scope);
  FusedKernel fusedKernel(const std::string &symbol);
  std::vector<int64_t> concrete(const bundle::ValueType &t) const;
  /// The router softmax and each token's top-k experts.
  Routing route(const bundle::Op &op, int64_t topK, const Tensor &h,
                const Tensor &router, int64_t numExperts);
  /// Gate weights and per-expert token lists from r.choice.
  static void assign(Routing &r, bool normalize);
  /// Runs function \p fn of expert \p e on \p args ([T_e, D] tokens).
  std::vector<Tensor> runExpert(const bundle::Op &op,
                                const bundle::Expert &expert,
                                const std::string &fn, int64_t e,
                                std::vector<Tensor> args, const Scope &scope);
  /// The kernels that run functions of the bundle (ExecLayers.cpp,
  /// ExecMoE.cpp), entered through OpContext.
  void applyLayers(OpContext &c);
  void applyLayersGrad(OpContext &c);
  void fused(OpContext &c);
  void moe(OpContext &c);
  void moeGrad(OpContext &c);
  /// Clears per-call state (counters, aux loss, routing fingerprint).
  void beginCall(int64_t b, int64_t s);
  /// The function's loss (the loss op's double value when the result is
  /// exactly it) plus the aux losses.
  double totalLoss(const Tensor &result) const;

  const bundle::Bundle &bundle;
  ParamStore &store;
  /// The bundle's functions, decoded at construction.
  DecodedProgram program;
  /// The backend the executor runs on, and its kernels.
  Backend *backend;
  const KernelTable *table;
  int64_t B = 0, S = 0;
  int64_t T = 0; ///< tokens routed to the expert being run
  AuxLoss aux;
  uint64_t routingHash = 0;
  RoutingPin pin = RoutingPin::Off;
  std::vector<std::vector<int32_t>> pinnedChoices; ///< per forward moe op
  size_t pinnedNext = 0;
  /// Saved layer inputs: (layer, instance) -> input.
  /// Per instance: its input, then whatever else its forward returned (the
  /// intermediates a `--recompute none` or `selective` backward takes
  /// instead of recomputing them).
  std::map<std::pair<std::string, int64_t>, std::vector<Tensor>> checkpoints;
  int64_t forwardRuns = 0, backwardRuns = 0;
  InstanceGradHook instanceGradHook;
  OpTimer opTimer;
  /// The last loss computed by a cross_entropy op, in double precision.
  double lastLoss = 0;

  /// KV cache: per (layer, instance, op index) the keys and values seen so
  /// far, [1, cacheLength, Hkv, D] each. Active while `decoding` is set.
  struct KV {
    std::vector<float> k, v;
  };
  std::map<std::tuple<std::string, int64_t, size_t>, KV> kvCache;
  bool decoding = false;
  std::function<FusedKernel(const std::string &)> kernels;
  ParamLocator paramLocator;
  std::map<const bundle::Function *, bundle::FunctionPlan> functionPlans;
  /// Under a bf16 plan: every function's value storage (empty under fp32).
  std::map<const bundle::Function *, std::vector<DType>> valueTypes;
  std::unique_ptr<KernelLibrary> kernelLibrary;
  int64_t cacheLength = 0; ///< positions already in the cache
};

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_EXECUTOR_H
