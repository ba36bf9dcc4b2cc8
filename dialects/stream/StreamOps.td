//===- StreamOps.td - The stream dialect -------------------*- tablegen -*-===//
//
// Part of mtc. The training step as a program over layers, buffers and
// streams (docs/streaming.md). Commands carry their parameters as attributes;
// the runtime executes the same program from the bundle's "step" section.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_DIALECTS_STREAM_STREAMOPS_TD
#define MTC_DIALECTS_STREAM_STREAMOPS_TD

include "StreamBase.td"
include "mlir/IR/SymbolInterfaces.td"

class Stream_Op<string mnemonic, list<Trait> traits = []>
    : Op<Stream_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// The step
//===----------------------------------------------------------------------===//

def Stream_StepOp : Stream_Op<"step", [SymbolTable, NoTerminator, SingleBlock,
    NoRegionArguments, HasParent<"::mlir::ModuleOp">]> {
  let summary = "one training step of a model: buffers and a command program";
  let description = [{
    Module-level. `model` names the `mt.model` (in the same module) whose
    `@forward_backward` the step runs. One micro-batch is `[batch, seq]`
    tokens; a step runs `micro_batches` of them layer-major (every layer
    instance's weights are loaded once and applied to all micro-batches).
    `prefetch_depth` is the number of weight slots, `recompute` what a layer
    keeps for its backward (`full`: its input; `none`: every intermediate the
    backward reads; `selective`: the results of its matmul, attention and moe
    ops, the cheap ops in between being recomputed; never `auto`),
    `checkpoints` where those are kept (`device` or `host`, never `auto`;
    `checkpoints_auto` records that mtc-insert-offload chose it).
    `device_budget` (0: none given) and `device_peak` (0: not planned yet) are
    bytes. `precision` (optional, `"fp32"` when absent, or `"bf16"`) is how
    tensors are stored on the device (docs/streaming.md, "Byte rule").
    `checkpoint_every` (optional, 1 when absent; only with `recompute =
    full`) is segment checkpointing: only every k-th instance of a layer loop
    keeps its input, and the backward of a segment of k instances recomputes
    the forward of its first k - 1 from that checkpoint (docs/streaming.md,
    "Segment checkpointing"). `selective_layers` (optional; only with
    `recompute = selective`) mixes the policies per layer instance: the
    first S instances of the layer stack (counted over the forward
    `stream.layers` loops in program order) keep their selective
    checkpoints, the others keep only their input and run the layer's
    `@backward_full`, which recomputes the whole forward (docs/streaming.md,
    "Mixed recomputation"). The body holds the `stream.buffer` declarations (a symbol table:
    names are unique) and the commands `stream.load_model_weights`,
    `stream.stage`, `stream.layers` and `stream.return_model_grads`, in
    program order.

    ```mlir
    stream.step @Tiny recompute = full checkpoints = device attributes {
        batch = 4 : i64, seq = 64 : i64, micro_batches = 1 : i64,
        prefetch_depth = 2 : i64, device_budget = 0 : i64,
        device_peak = 0 : i64} {
      stream.load_model_weights
      stream.stage [0, 2)
      stream.layers @Block[0, 2] forward op_index = 2 { ... }
      ...
      stream.return_model_grads
    }
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$model,
                       I64Attr:$batch, I64Attr:$seq, I64Attr:$micro_batches,
                       I64Attr:$prefetch_depth,
                       Stream_RecomputePolicyAttr:$recompute,
                       Stream_CheckpointPlacementAttr:$checkpoints,
                       UnitAttr:$checkpoints_auto,
                       I64Attr:$device_budget, I64Attr:$device_peak,
                       OptionalAttr<StrAttr>:$precision,
                       OptionalAttr<I64Attr>:$checkpoint_every,
                       OptionalAttr<I64Attr>:$selective_layers);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $model `recompute` `=` custom<EnumKeyword>($recompute)
    `checkpoints` `=` custom<EnumKeyword>($checkpoints)
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

def Stream_BufferOp : Stream_Op<"buffer", [Symbol, HasParent<"StepOp">]> {
  let summary = "a buffer of the step: kind, memory space, bytes, offset";
  let description = [{
    `kind` is one of `model_weights`, `model_grads`, `weights`, `grads`,
    `activations`, `checkpoints`, `stage`, `workspace`; `space` is `device`
    (a region of the device arena) or `host` (pinned host memory, only for
    offloaded checkpoints and the boundary activations that wait there). `offset` is the byte offset in the device arena
    (a multiple of 256), assigned by mtc-plan-memory; host buffers have none.

    ```mlir
    stream.buffer @weights.0 kind = weights space = device bytes = 2883584
        offset = 262144
    stream.buffer @checkpoints.host kind = checkpoints space = host
        bytes = 1048576
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Stream_BufferKindAttr:$kind,
                       Stream_MemorySpaceAttr:$space, I64Attr:$bytes,
                       OptionalAttr<I64Attr>:$offset);
  let assemblyFormat = [{
    $sym_name `kind` `=` custom<EnumKeyword>($kind)
    `space` `=` custom<EnumKeyword>($space) `bytes` `=` $bytes
    (`offset` `=` $offset^)? attr-dict
  }];
  let hasVerifier = 1;
}

def Stream_LoadModelWeightsOp : Stream_Op<"load_model_weights",
    [HasParent<"StepOp">]> {
  let summary = "copies the model-level parameters to the device";
  let description = [{
    Copies every model-level parameter (embedding, final norm, LM head, ...)
    into `model.weights` and zeroes `model.grads`. Pending optimizer updates
    of those parameters run on the host first.

    ```mlir
    stream.load_model_weights
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def Stream_ReturnModelGradsOp : Stream_Op<"return_model_grads",
    [HasParent<"StepOp">]> {
  let summary = "copies the model-level gradients back to the host";
  let description = [{
    Copies `model.grads` (summed over the micro-batches) to the host
    gradients; ends the step.

    ```mlir
    stream.return_model_grads
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def Stream_StageOp : Stream_Op<"stage", [HasParent<"StepOp">]> {
  let summary = "runs ops [begin, end) of @forward_backward per micro-batch";
  let description = [{
    Runs ops `begin` to `end - 1` (indices into the model's
    `@forward_backward`, `func.return` not counted, the numbering of the
    bundle) once for every micro-batch, with values in `stage`.

    ```mlir
    stream.stage [0, 2)
    ```
  }];
  let arguments = (ins I64Attr:$begin, I64Attr:$end);
  let assemblyFormat = "` ` `[` $begin `,` $end `)` attr-dict";
  let hasVerifier = 1;
}

def Stream_LayersOp : Stream_Op<"layers", [NoTerminator, SingleBlock,
    NoRegionArguments, HasParent<"StepOp">]> {
  let summary = "a loop over layer instances [first, first + count)";
  let description = [{
    Runs the body once per instance of layer `layer`, ascending in the
    `forward` direction and descending in the `backward` direction; the
    compute of one instance covers every micro-batch. `op_index` is the index
    in `@forward_backward` of the `mt.apply_layers` (forward) or
    `mt.apply_layers_grad` (backward) op the loop implements.
    `checkpoint_bytes` (set by mtc-insert-recompute) is what one instance keeps
    for its backward per micro-batch.

    ```mlir
    stream.layers @Block[0, 4] backward op_index = 8 {
      stream.prefetch ahead = 1 stream = h2d event = "Block.backward.weights"
      stream.restore from = device
      stream.wait_weights event = "Block.backward.weights"
      stream.compute backward
      stream.grad_return stream = d2h
    }
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$layer, I64Attr:$first,
                       I64Attr:$count, Stream_DirectionAttr:$direction,
                       I64Attr:$op_index,
                       OptionalAttr<I64Attr>:$checkpoint_bytes);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $layer `[` $first `,` $count `]` custom<EnumKeyword>($direction)
    `op_index` `=` $op_index
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    bool isForward() { return getDirection() == Direction::Forward; }
  }];
}

//===----------------------------------------------------------------------===//
// Commands of a layers body (one layer instance)
//===----------------------------------------------------------------------===//

class Stream_BodyOp<string mnemonic, list<Trait> traits = []>
    : Stream_Op<mnemonic, !listconcat(traits, [HasParent<"LayersOp">])> {
  let hasVerifier = 1;
}

def Stream_OptimizerUpdateOp : Stream_BodyOp<"optimizer_update"> {
  let summary = "the deferred AdamW update of the instance `ahead` later";
  let description = [{
    Forward loops only. Runs (on host threads, overlapping device work) the
    previous step's AdamW update of the instance `ahead` positions after the
    current one, just before its weights are first copied in this step.
    The first `ahead` instances of a loop are updated before the loop starts.

    ```mlir
    stream.optimizer_update ahead = 1
    ```
  }];
  let arguments = (ins I64Attr:$ahead);
  let assemblyFormat = "`ahead` `=` $ahead attr-dict";
}

def Stream_PrefetchOp : Stream_BodyOp<"prefetch"> {
  let summary = "copies the weights of the instance `ahead` later to a slot";
  let description = [{
    Queues on `stream` (always `h2d`) the copy of the weights of the instance
    `ahead` positions after the current one (in the loop's direction) into
    a free weight slot, recording `event` when it completes. The first
    `ahead + 1` instances are queued before the loop starts. `ahead` is
    `prefetch_depth - 1`.

    ```mlir
    stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
    ```
  }];
  let arguments = (ins I64Attr:$ahead, Stream_StreamNameAttr:$stream,
                       StrAttr:$event);
  let assemblyFormat = [{
    `ahead` `=` $ahead `stream` `=` custom<EnumKeyword>($stream)
    `event` `=` $event attr-dict
  }];
}

def Stream_WaitWeightsOp : Stream_BodyOp<"wait_weights"> {
  let summary = "the compute stream waits for the current instance's weights";
  let description = [{
    Makes the compute stream wait for `event` of the current instance's
    weight copy.

    ```mlir
    stream.wait_weights event = "Block.forward.weights"
    ```
  }];
  let arguments = (ins StrAttr:$event);
  let assemblyFormat = "`event` `=` $event attr-dict";
}

def Stream_SaveOp : Stream_BodyOp<"save"> {
  let summary = "keeps the instance's input (and saved values) for backward";
  let description = [{
    Forward loops only. Keeps what the instance's backward needs, for every
    micro-batch: its input (and with `recompute = none` or `selective` the
    extra results of its forward), in `checkpoints` (`to = device`) or
    through the staging slots into `checkpoints.host` (`to = host`).

    ```mlir
    stream.save to = device
    ```
  }];
  let arguments = (ins Stream_MemorySpaceAttr:$to);
  let assemblyFormat = "`to` `=` custom<EnumKeyword>($to) attr-dict";
}

def Stream_RestoreOp : Stream_BodyOp<"restore"> {
  let summary = "brings back what save kept for the instance";
  let description = [{
    Backward loops only. Makes the instance's checkpoints available on the
    device: in place (`from = device`) or copied from `checkpoints.host`
    into a staging slot (`from = host`).

    ```mlir
    stream.restore from = host
    ```
  }];
  let arguments = (ins Stream_MemorySpaceAttr:$from);
  let assemblyFormat = "`from` `=` custom<EnumKeyword>($from) attr-dict";
}

def Stream_ComputeOp : Stream_BodyOp<"compute"> {
  let summary = "runs the layer's forward or backward on every micro-batch";
  let description = [{
    Runs the layer template's function `fn` (`forward` in forward loops,
    `backward` in backward loops) for the current instance on each
    micro-batch, with its temporaries in `workspace`. A backward accumulates
    the instance's parameter gradients in the current grads slot.

    ```mlir
    stream.compute forward
    ```
  }];
  let arguments = (ins Stream_DirectionAttr:$fn);
  let assemblyFormat = "custom<EnumKeyword>($fn) attr-dict";
}

def Stream_GradReturnOp : Stream_BodyOp<"grad_return"> {
  let summary = "copies the instance's gradients to the host";
  let description = [{
    Backward loops only. Queues on `stream` (always `d2h`) the copy of the current
    grads slot to the instance's host gradients; the two grads slots
    alternate so the next instance computes while this one is copied.

    ```mlir
    stream.grad_return stream = d2h
    ```
  }];
  let arguments = (ins Stream_StreamNameAttr:$stream);
  let assemblyFormat = "`stream` `=` custom<EnumKeyword>($stream) attr-dict";
}

#endif // MTC_DIALECTS_STREAM_STREAMOPS_TD
