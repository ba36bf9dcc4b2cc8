//===- Executor.h - Runs bundle functions on the CPU ------------*- C++ -*-===//
//
// Part of mtc. Interprets the functions of a bundle op by op with the CPU
// kernels of runtime/cpu, with parameters resident in a ParamStore. A layer
// application runs the layer's forward once per instance and keeps each
// instance's input (the activation checkpoint); its gradient runs the layer's
// backward in reverse order from those inputs, recomputing the rest.
//
// This executor binds the symbolic dims (B, S) at call time and allocates
// every value afresh; the streaming executor (device arena, prefetch) replaces
// it for models larger than memory.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_EXECUTOR_H
#define MTC_RUNTIME_EXEC_EXECUTOR_H

#include "lib/Bundle/Bundle.h"
#include "runtime/exec/ParamStore.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace mtc::exec {

/// A dense row-major tensor (fp32, or int32 for token ids).
struct Tensor {
  std::vector<int64_t> shape;
  bool isInt = false;
  std::shared_ptr<std::vector<float>> f;
  std::shared_ptr<std::vector<int32_t>> i;
  /// Attention outputs carry their log-sum-exp for the backward pass.
  std::shared_ptr<std::vector<float>> lse;

  int64_t numel() const;
  float *data() { return f->data(); }
  const float *data() const { return f->data(); }
  static Tensor zeros(std::vector<int64_t> shape);
  static Tensor ints(std::vector<int64_t> shape, const int32_t *src);
};

/// An error at run time, naming the source location of the op.
struct ExecError {
  std::string message;
};

class Executor {
public:
  Executor(const bundle::Bundle &b, ParamStore &store);

  /// Runs the model's forward_backward on one micro-batch: returns the loss
  /// and adds this batch's gradients to the store's gradient buffers.
  /// tokens and targets are [B, S]. Throws ExecError on bad input (a token id
  /// outside the vocabulary, ...).
  double forwardBackward(const int32_t *tokens, const int32_t *targets,
                         int64_t B, int64_t S);
  /// The loss without gradients (validation).
  double loss(const int32_t *tokens, const int32_t *targets, int64_t B,
              int64_t S);
  /// The logits [B, S, V] the loss is computed from (generation).
  Tensor logits(const int32_t *tokens, int64_t B, int64_t S);

  /// Incremental decoding with a KV cache (batch 1): runs the model on the
  /// \p n tokens that follow everything passed since resetCache(), and
  /// returns their logits [1, n, V]. Position-wise ops see only the new
  /// tokens; each attention op appends its keys and values to its cache and
  /// attends over all of them; rope rotates at the absolute positions.
  /// Throws ExecError for models with ops that mix positions in other ways
  /// (reductions or softmax over the sequence axis), which need a full
  /// recomputation instead (logits()).
  Tensor decode(const int32_t *tokens, int64_t n);
  void resetCache();
  int64_t cachedTokens() const { return cacheLength; }

  /// A compiled fused kernel: `void(inputs, outputs, n)` (docs/compiler.md).
  using FusedKernel = void (*)(const float *const *, float *const *, int64_t);
  /// Resolves kernel symbols of `fused` ops (null: run their bodies op by op).
  void setKernelResolver(std::function<FusedKernel(const std::string &)> r) {
    kernels = std::move(r);
  }

  /// Layer-instance loads during the last call (each apply runs an instance's
  /// forward once, each apply_layers_grad its backward once).
  int64_t layerForwardRuns() const { return forwardRuns; }
  int64_t layerBackwardRuns() const { return backwardRuns; }

private:
  struct Scope {
    std::string layer; ///< empty: model level
    int64_t instance = 0;
  };
  /// What the run is for: stop early at the loss' logits for generation.
  enum class Mode { Full, LogitsOnly };

  std::vector<Tensor> run(const bundle::Function &fn,
                          std::vector<Tensor> args, const Scope &scope,
                          Mode mode = Mode::Full, Tensor *logitsOut = nullptr);
  void exec(const bundle::Op &op, std::vector<Tensor> &values,
            const bundle::Function &fn, const Scope &scope);
  ParamSlot *slot(const bundle::Op &op, const Scope &scope);
  FusedKernel fusedKernel(const bundle::Op &op);
  std::vector<int64_t> concrete(const bundle::ValueType &t) const;

  const bundle::Bundle &bundle;
  ParamStore &store;
  int64_t B = 0, S = 0;
  /// Saved layer inputs: (layer, instance) -> input.
  std::map<std::pair<std::string, int64_t>, Tensor> checkpoints;
  int64_t forwardRuns = 0, backwardRuns = 0;
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
  int64_t cacheLength = 0; ///< positions already in the cache
};

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_EXECUTOR_H
