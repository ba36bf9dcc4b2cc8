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
    runtime keeps them with the instance's input); with `save=selective`
    only the results of its `mt.matmul`, `mt.attention` and `mt.moe` ops that
    the backward needs are kept, and the cheap ops between them are
    recomputed (about a quarter of the bytes of `save=all` for a llama
    block, and almost none of the forward's FLOPs). With `full-backward`
    the layer also gets `@backward_full(%x, %dy) -> %dx` (mt.save "input"),
    the backward of save=input built from the same forward: a plan can then
    keep the intermediates of some instances and only the input of others
    (mtc-insert-recompute selective-layers). These are the recompute
    policies full, none and selective (`::mtc::RecomputePolicy`, spelled
    here by what a layer keeps; compiler/Transforms/Policies.h). The
    backward carries `mt.save` ("input", "all" or "selective"); experts
    always recompute. Every `mt.expert` gets a `@backward(%t,
    %dt) -> %dt_in` of the same form (its `[T, D]` tokens, parameter gradients
    through `mt.param_grad` into the current expert's buffers), and `mt.moe`
    differentiates to one `mt.moe_grad`, which the runtime implements by
    recomputing the routing and running those expert backwards.
  }];
  let options = [
    Option<"save", "save", "::mtc::RecomputePolicy",
           /*default=*/"::mtc::RecomputePolicy::Full",
           "What a layer keeps for its backward: `input` (recompute full), "
           "`all` (recompute none) or `selective` (recompute selective)",
           "::mtc::saveOptionValues()">,
    Option<"fullBackward", "full-backward", "bool", /*default=*/"false",
           "With save=selective or save=all, also add each layer's "
           "`@backward_full(%x, %dy) -> %dx`, which recomputes the whole "
           "forward from the input (mixed plans: some instances keep only "
           "their input)">
  ];
  let dependentDialects = ["::mtc::mt::MtDialect", "::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numSavedValues", "saved-values",
              "Intermediates layers keep for their backward (save=all or "
              "save=selective)">,
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


//===----------------------------------------------------------------------===//
// Streaming: the stream dialect's step program (docs/streaming.md)
//===----------------------------------------------------------------------===//

def MtcBuildStep : Pass<"mtc-build-step", "::mlir::ModuleOp"> {
  let summary = "Builds the stream.step program of a differentiated model";
  let description = [{
    From the `mt.model` of the module (after mtc-autodiff: every layer has a
    `@backward` and the model a `@forward_backward`) appends a module-level
    `stream.step` for micro-batches of `[batch, seq]` tokens:
    `stream.load_model_weights`, then `@forward_backward` cut at its
    `mt.apply_layers` / `mt.apply_layers_grad` ops: a `stream.stage` for each
    non-empty run of other ops (op indices as in the bundle: `func.return`
    not counted) and one `stream.layers` per layer op, in the function's
    order, with its `op_index`; `stream.return_model_grads` ends the step.
    Forward loops `save` the instance's input and `compute forward`;
    backward loops `restore`, `compute backward` and `grad_return`. The
    step starts with one weight slot (`prefetch_depth = 1`), device
    checkpoints and the recompute policy the layers were differentiated with
    (their backward's `mt.save`); the later passes refine it.

    Before (ops 0-1, a layer op, ops 3-9, a layer op, ops 11-14):
    ```mlir
    mt.model @Tiny {
      mt.layer @Block x 4 { ... @forward, @backward ... }
      func.func @forward_backward(%t: ..., %u: ...) -> !mt.tensor<[], f32> {
        %e = mt.param_ref @emb : !mt.tensor<[16, 8], f32>
        %x = mt.embedding %t, %e : ...
        %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 8], f32>
        ...
        %dx = mt.apply_layers_grad @Block[0, 4] %dh : !mt.tensor<[B, S, 8], f32>
        ...
      }
    }
    ```
    After (`batch=2 seq=4`), appended to the module:
    ```mlir
    stream.step @Tiny recompute = full checkpoints = device attributes {
        batch = 2 : i64, device_budget = 0 : i64, device_peak = 0 : i64,
        micro_batches = 1 : i64, prefetch_depth = 1 : i64, seq = 4 : i64} {
      stream.load_model_weights
      stream.stage [0, 2)
      stream.layers @Block[0, 4] forward op_index = 2 {
        stream.save to = device
        stream.compute forward
      }
      stream.stage [3, 10)
      stream.layers @Block[0, 4] backward op_index = 10 {
        stream.restore from = device
        stream.compute backward
        stream.grad_return stream = d2h
      }
      stream.stage [11, 15)
      stream.return_model_grads
    }
    ```
  }];
  let options = [
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "Sequences per micro-batch (B), required">,
    Option<"seq", "seq", "int64_t", /*default=*/"0",
           "Tokens per sequence (S), required">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "Micro-batches per step (M)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "Device storage of tensors: fp32 or bf16 (docs/streaming.md, "
           "\"Byte rule\"); recorded on the step when not fp32">
  ];
  let dependentDialects = ["::mtc::stream::StreamDialect"];
}

def MtcInsertRecompute : Pass<"mtc-insert-recompute", "::mlir::ModuleOp"> {
  let summary = "Records what each layer keeps for its backward";
  let description = [{
    Sets the step's `recompute` policy and, on every `stream.layers` loop,
    `checkpoint_bytes`: what one instance keeps per micro-batch (its input,
    plus with `none` or `selective` every extra result of its forward). The
    layer functions already implement the policy: mtc-autodiff `save=input`
    recomputes the layer in its backward (`full`), `save=all` makes the
    forward return what the backward reads (`none`), `save=selective` makes
    it return the results of its matmul, attention and moe ops, from which
    the backward recomputes the cheap ops (`selective`). The pass checks
    that the requested policy is the one the module was differentiated with
    and fails otherwise; `auto` takes the module's. (`mtc compile
    --recompute auto` differentiates the model several ways and keeps the
    plan that fits and costs least: docs/streaming.md.) With `auto` and a
    `budget`, a module that keeps all intermediates whose device
    checkpoints alone exceed the budget is an error that names the cure.

    `checkpoint-every=k` (k > 1, with `full` only) sets the step's
    `checkpoint_every`: segment checkpointing keeps the input of only every
    k-th instance of each layer loop (the first of each segment of k); the
    backward of a segment recomputes the forward of its first k - 1
    instances from it (docs/streaming.md, "Segment checkpointing"). Errors:
    k < 1, k larger than the longest layer loop, k > 1 with another policy.

    `selective-layers=S` (with `selective`, the layers differentiated with
    `full-backward=true`) sets the step's `selective_layers` when S is below
    the stack's instances: mixed recomputation, where the first S instances
    keep their selective checkpoints and the others their input alone,
    running `@backward_full` (docs/streaming.md, "Mixed recomputation").
    Errors: another policy, S past the stack, a layer without
    `@backward_full`.

    Before (layers differentiated with `save=all`: the forward also returns
    `%h`, 256 bytes at `[2, 4]` like the input):
    ```mlir
    stream.step @Tiny recompute = none checkpoints = device attributes {...} {
      stream.load_model_weights
      stream.layers @Block[0, 4] forward op_index = 0 {
        stream.save to = device
        stream.compute forward
      }
      ...
    }
    ```
    After:
    ```mlir
    stream.step @Tiny recompute = none checkpoints = device attributes {...} {
      stream.load_model_weights
      stream.layers @Block[0, 4] forward op_index = 0 attributes {checkpoint_bytes = 512 : i64} {
        stream.save to = device
        stream.compute forward
      }
      ...
    }
    ```
  }];
  let options = [
    Option<"recompute", "recompute", "::mtc::RecomputePolicy",
           /*default=*/"::mtc::RecomputePolicy::Auto",
           "What a layer keeps for its backward; auto: what the module was "
           "differentiated for", "::mtc::recomputeOptionValues()">,
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "Device memory (bytes or 64MiB, 1.5GiB, ...); empty: none">,
    Option<"checkpointEvery", "checkpoint-every", "int64_t",
           /*default=*/"1",
           "Segment checkpointing (recompute full only): keep the input of "
           "every k-th layer instance; the backward of a segment recomputes "
           "the forward of its first k - 1 instances">,
    Option<"selectiveLayers", "selective-layers", "int64_t",
           /*default=*/"-1",
           "Mixed recomputation (recompute selective only): the first S "
           "layer instances keep selective checkpoints, the others only "
           "their input (their backward is @backward_full); -1: all">
  ];
}

def MtcInsertPrefetch : Pass<"mtc-insert-prefetch", "::mlir::ModuleOp"> {
  let summary = "Double-buffers weights: prefetch ahead, wait before compute";
  let description = [{
    Sets the step's `prefetch_depth` (the number of weight slots) and puts in
    every `stream.layers` body a `stream.prefetch ahead = depth - 1` on the
    `h2d` stream (first, after an `optimizer_update`) and a
    `stream.wait_weights` right before `stream.compute`, sharing one event
    name per loop (`<layer>.<direction>.weights`). `ahead` counts instances
    in the loop's direction, continuing into the next loop of that
    direction.

    Before:
    ```mlir
    stream.layers @Block[0, 4] forward op_index = 2 {
      stream.save to = device
      stream.compute forward
    }
    ```
    After (`depth=2`; the step's `prefetch_depth` becomes 2):
    ```mlir
    stream.layers @Block[0, 4] forward op_index = 2 {
      stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
      stream.save to = device
      stream.wait_weights event = "Block.forward.weights"
      stream.compute forward
    }
    ```
  }];
  let options = [
    Option<"depth", "depth", "int64_t", /*default=*/"2",
           "Weight slots (>= 1): the copy of instance i + depth - 1 overlaps "
           "the compute of instance i; at least the step's checkpoint_every "
           "(a segment's instances stay resident from their recomputed "
           "forward to their backward)">
  ];
}

def MtcPlaceOptimizer : Pass<"mtc-place-optimizer", "::mlir::ModuleOp"> {
  let summary = "Places the deferred exact AdamW update before each first load";
  let description = [{
    Puts `stream.optimizer_update ahead = prefetch_depth - 1` at the start of
    every forward `stream.layers` body, before its prefetch: the previous
    step's AdamW update of instance i (computed on host threads once the
    global gradient norm is known) runs just before instance i's weights are
    first copied in this step, overlapping device work; the first `ahead`
    instances of a loop are updated before the loop. Model-level parameters
    are updated before `stream.load_model_weights`. Updates still pending
    are flushed before a checkpoint is written and at the end of training,
    so the result is that of a synchronous optimizer step.

    Before (`prefetch_depth = 2`):
    ```mlir
    stream.layers @Block[0, 4] forward op_index = 2 {
      stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
      stream.save to = device
      ...
    }
    ```
    After:
    ```mlir
    stream.layers @Block[0, 4] forward op_index = 2 {
      stream.optimizer_update ahead = 1
      stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
      stream.save to = device
      ...
    }
    ```
  }];
}

def MtcInsertOffload : Pass<"mtc-insert-offload", "::mlir::ModuleOp"> {
  let summary = "Keeps layer checkpoints on the device or in host memory";
  let description = [{
    Sets where `stream.save` keeps, and `stream.restore` finds, every layer
    instance's checkpoints: `device` (all of them in the `checkpoints`
    buffer) or `host` (`checkpoints.host`, through two device staging slots).
    `auto` chooses `device` when the memory plan with device checkpoints
    fits the budget (or no budget is given), else `host`, and marks the step
    `checkpoints_auto`. Run after mtc-insert-prefetch: the plan depends on
    the number of weight slots.

    Before:
    ```mlir
    stream.step @Tiny recompute = full checkpoints = device attributes {...} {
      ...
      stream.layers @Block[0, 4] forward op_index = 2 attributes {...} {
        ...
        stream.save to = device
        ...
      }
      ...
      stream.layers @Block[0, 4] backward op_index = 10 attributes {...} {
        ...
        stream.restore from = device
        ...
      }
    }
    ```
    After (`checkpoints=auto budget=...` where the device plan does not
    fit):
    ```mlir
    stream.step @Tiny recompute = full checkpoints = host attributes {
        ..., checkpoints_auto, ...} {
      ...
        stream.save to = host
      ...
        stream.restore from = host
      ...
    }
    ```
  }];
  let options = [
    Option<"checkpoints", "checkpoints", "::mtc::CheckpointPlacement",
           /*default=*/"::mtc::CheckpointPlacement::Auto",
           "Where layer checkpoints live", "::mtc::checkpointsOptionValues()">,
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "Device memory (bytes or 64MiB, 1.5GiB, ...); empty: none">
  ];
}

def MtcPlanMemory : Pass<"mtc-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Sizes the step's buffers, assigns arena offsets, checks the budget";
  let description = [{
    Replaces the step's `stream.buffer` ops with the plan of
    docs/streaming.md ("Device buffers"): `model.weights`, `model.grads`,
    `weights.0` .. `weights.<depth-1>`, `grads.0`, `grads.1`, `activations`
    (+ `activations.host`), `checkpoints` (+ `checkpoints.host` in host
    memory), `stage` (+ `stage.host`: with host activations the model-level
    values that cross a layer loop wait in host memory and the device keeps
    one micro-batch's stage), `workspace`, each device buffer at the next
    multiple of 256 bytes; sets
    `device_peak` (the end of the last device buffer) and `device_budget`.
    Fails when the budget is smaller than one layer instance's weights, or
    when the peak exceeds it, or when the host memory the plan needs (the
    training state at 16 B/param plus every host buffer) exceeds
    `host-budget`; that error names what is short, by how much, and the
    options that would fit. With `optimizer-placement=immediate` the plan
    adds `grads.host`, a host ring of two slots of the largest gradient
    group, and the state counts 12 B/param (value, m, v); otherwise
    `grad-dtype=bf16` counts 14 B/param (value, m, v and a bf16 gradient),
    and a host-budget error with fp32 gradients names `--grad-dtype bf16`
    when that would fit:

        needs 412 MiB of device memory, budget is 256 MiB; smallest feasible
        budget with these options is 301 MiB

    (sizes: see `formatByteSize`; the needed and feasible sizes are rounded
    up). The smallest feasible budget is the peak with the most frugal
    choice the options leave open: host checkpoints when the step's
    checkpoints were chosen automatically.

    Before (`micro_batches = 2`, `prefetch_depth = 2`, device checkpoints):
    ```mlir
    stream.step @Tiny recompute = full checkpoints = device attributes {
        ..., device_budget = 0 : i64, device_peak = 0 : i64, ...} {
      stream.load_model_weights
      ...
    }
    ```
    After (`budget=64KiB`):
    ```mlir
    stream.step @Tiny recompute = full checkpoints = device attributes {
        ..., device_budget = 65536 : i64, device_peak = 15872 : i64, ...} {
      stream.buffer @model.weights kind = model_weights space = device bytes = 512 offset = 0
      stream.buffer @model.grads kind = model_grads space = device bytes = 512 offset = 512
      stream.buffer @weights.0 kind = weights space = device bytes = 256 offset = 1024
      stream.buffer @weights.1 kind = weights space = device bytes = 256 offset = 1280
      stream.buffer @grads.0 kind = grads space = device bytes = 256 offset = 1536
      stream.buffer @grads.1 kind = grads space = device bytes = 256 offset = 1792
      stream.buffer @activations kind = activations space = device bytes = 1024 offset = 2048
      stream.buffer @checkpoints kind = checkpoints space = device bytes = 2048 offset = 3072
      stream.buffer @stage kind = stage space = device bytes = 9728 offset = 5120
      stream.buffer @workspace kind = workspace space = device bytes = 1024 offset = 14848
      stream.load_model_weights
      ...
    }
    ```
  }];
  let options = [
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "Device memory (bytes or 64MiB, 1.5GiB, ...); empty: the step's "
           "device_budget (0: none)">,
    Option<"hostBudget", "host-budget", "std::string", /*default=*/"\"\"",
           "Host memory for the training state (16 B/param) and the plan's "
           "host buffers (bytes or 64MiB, 2048GiB, ...); empty: none">,
    Option<"optimizerPlacement", "optimizer-placement", "std::string",
           /*default=*/"\"deferred\"",
           "deferred: AdamW after the step's backward (gradients in a "
           "model-sized host buffer, 16 B/param); immediate: as soon as a "
           "layer instance's gradient is final (a `grads.host` ring, "
           "12 B/param)">,
    Option<"gradDType", "grad-dtype", "std::string", /*default=*/"\"fp32\"",
           "How the deferred placement keeps its model-sized gradient "
           "buffer in host memory: fp32 (16 B/param) or bf16 (14 B/param: "
           "`--grad-dtype bf16`); no effect with the immediate placement">
  ];
}

#endif // MTC_COMPILER_TRANSFORMS_PASSES_TD
