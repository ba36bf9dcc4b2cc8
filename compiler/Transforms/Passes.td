//===- Passes.td - mtc passes ------------------------------*- tablegen -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_TRANSFORMS_PASSES_TD
#define MTC_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def MtcAutodiff : Pass<"mtc-autodiff", "::mlir::ModuleOp"> {
  let summary = "Derives stateless backward functions by reverse-mode autodiff";
  let description = [{
    For every `mt.layer` template this pass adds `func.func @backward(%x, %dy)
    -> %dx` beside its `@forward`. The backward recomputes the layer's forward
    from the saved layer input (the only activation kept per instance), then
    sweeps the ops in reverse applying each op's vector-Jacobian product, and
    accumulates parameter gradients with `mt.param_grad`. Like the forward,
    the backward reads weights through `mt.param_ref`: one function serves
    every instance, whose weights and gradient buffers the runtime binds.

    For the `mt.model` it adds `func.func @forward_backward(%tokens, %targets)
    -> loss`: the model body, then its reverse sweep seeded with dloss = 1,
    where each `mt.apply_layers @L[i, n]` is paired with
    `mt.apply_layers_grad @L[i, n]` (the runtime runs the layers' backward in
    reverse order from their saved inputs).

    Before:
    ```mlir
    mt.layer @Block x 2 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
        %y = mt.matmul %x, %w : ... -> !mt.tensor<[B, S, 8], f32>
        return %y : !mt.tensor<[B, S, 8], f32>
      }
    }
    ```
    After (added):
    ```mlir
      func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>)
          -> !mt.tensor<[B, S, 8], f32> {
        %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
        %wt = mt.transpose %w perm = [1, 0] : ...
        %dx = mt.matmul %dy, %wt : ...
        %dw = mt.weight_grad %x, %dy : ... -> !mt.tensor<[8, 8], f32>
        mt.param_grad @w, %dw : !mt.tensor<[8, 8], f32>
        return %dx : !mt.tensor<[B, S, 8], f32>
      }
    ```
    Unused recomputation is removed. With `save=all`, a layer's `@forward`
    returns, after its activation, every intermediate its backward reads, and
    `@backward(%x, %dy, %saved...)` takes them instead of recomputing (the
    runtime keeps them with the instance's input); experts always recompute. Every `mt.expert` gets a `@backward(%t,
    %dt) -> %dt_in` of the same form (its `[T, D]` tokens, parameter gradients
    through `mt.param_grad` into the current expert's buffers), and `mt.moe`
    differentiates to one `mt.moe_grad`, which the runtime implements by
    recomputing the routing and running those expert backwards.
  }];
  let options = [
    Option<"save", "save", "std::string", /*default=*/"\"input\"",
           "What a layer keeps for its backward: `input` (its input only; "
           "the backward recomputes the rest) or `all` (its forward also "
           "returns every intermediate the backward reads, which the "
           "backward then takes as arguments instead of recomputing)">
  ];
  let dependentDialects = ["::mtc::mt::MtDialect", "::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numSavedValues", "saved-values",
              "Intermediates layers keep for their backward (save=all)">,
    Statistic<"numBackwardFunctions", "backward-functions",
              "Number of backward functions created">,
    Statistic<"numGradOps", "grad-ops", "Number of operations emitted by the reverse sweeps">
  ];
}

def MtcFuse : Pass<"mtc-fuse", "::mlir::ModuleOp"> {
  let summary = "Groups chains of elementwise ops and last-axis reductions into mt.fused regions";
  let description = [{
    Walks every function in order and grows clusters of elementwise ops
    (`mt.add`, `mt.silu`, `mt.unary_grad`, ...) and reductions over a static
    last axis (`mt.sum`, `mt.mean`, `mt.max`, `axis = rank - 1`) along
    producer-consumer edges. A cluster's iteration shape is the shape of its
    elementwise values (the shape a reduction reduces). An op joins its
    producer's cluster when

    1. its result (a reduction: its input) has the cluster's iteration shape,
    2. each of its other operands has the iteration shape, is a scalar, has
       a static shape that is a suffix of it (a bias or norm weight), or is
       `[R..., 1]` for an iteration shape `[R..., n]` with a static `n` (a
       per-row statistic, read once per row),
    3. no value of the cluster is used outside it before this op (so the
       region can stand where its last op stood, and no cycle forms through
       an unfused op such as a matmul), and
    4. if it reads a value computed from one of the cluster's reductions (a
       *row value*), it is elementwise with a row-shaped result (`[R...]` or
       `[R..., 1]` for an iteration shape `[R..., n]`), and its other
       operands are row values of that shape, constants, or outside values of
       that shape or scalars (read once per row). Such an op replaces rules 1
       and 2. A row value is never broadcast back over the iteration shape
       in the same region, nor reduced again: `x * rsqrt(mean(square(x)) +
       eps)` fuses up to the rsqrt, and a softmax-style `exp(x - m) / sum`
       stays outside.

    Reductions over another axis or over a symbolic last axis (`S`) stay
    library calls (the CPU kernels need the row length). Scalar constants are
    copied into the regions that use them. Each cluster of at least
    `min-ops` ops becomes one `mt.fused` op whose results are the cluster
    values used outside it (row values included). Matmuls, attention, norms,
    softmax and data movement stay library calls. The regions are
    target-neutral: the CPU target compiles them to LLVM code, the CUDA
    target to CUDA C.

    Before:
    ```mlir
    %g = mt.matmul %h, %wg : ...
    %u = mt.matmul %h, %wu : ...
    %s = mt.silu %g : !mt.tensor<[B, S, 688], f32>
    %m = mt.mul %s, %u : ... -> !mt.tensor<[B, S, 688], f32>
    ```
    After:
    ```mlir
    %m = mt.fused (%g, %u) : (...) -> !mt.tensor<[B, S, 688], f32> {
    ^bb0(%a: ..., %b: ...):
      %s = mt.silu %a : ...
      %p = mt.mul %s, %b : ...
      mt.yield %p : !mt.tensor<[B, S, 688], f32>
    }
    ```
  }];
  let options = [
    Option<"minOps", "min-ops", "unsigned", /*default=*/"2",
           "Smallest number of ops (constants not counted) worth a region">
  ];
  let dependentDialects = ["::mtc::mt::MtDialect"];
  let statistics = [
    Statistic<"numRegions", "regions", "Number of mt.fused regions created">,
    Statistic<"numFusedOps", "fused-ops", "Number of ops moved into regions">
  ];
}

def MtcFuseLinearCrossEntropy
    : Pass<"mtc-fuse-linear-cross-entropy", "::mlir::ModuleOp"> {
  let summary = "Merges the LM head matmul into the cross-entropy";
  let description = [{
    Rewrites `cross_entropy(softcap?(x @ w), targets)` — with `w` a rank-2
    weight or the transpose of one (a tied embedding), and the logits used by
    nothing else — into `mt.linear_cross_entropy`, so that neither the
    forward nor the backward pass ever holds all `[B, S, V]` logits: the
    runtime computes them a chunk of rows at a time. Runs before
    mtc-autodiff, which differentiates the merged op.

    Before:
    ```mlir
    %et = mt.transpose %emb perm = [1, 0] : ...
    %l = mt.matmul %x, %et : ... -> !mt.tensor<[B, S, 256], f32>
    %c = mt.softcap %l cap = 3.0e+01 : !mt.tensor<[B, S, 256], f32>
    %loss = mt.cross_entropy %c, %t ignore_index = -1 : ...
    ```
    After:
    ```mlir
    %loss = mt.linear_cross_entropy %x, %emb, %t transpose_weight
        softcap = 3.0e+01 ignore_index = -1 : ...
    ```
  }];
  let dependentDialects = ["::mtc::mt::MtDialect"];
  let statistics = [
    Statistic<"numMerged", "merged", "Number of LM heads merged">
  ];
}

#endif // MTC_COMPILER_TRANSFORMS_PASSES_TD
