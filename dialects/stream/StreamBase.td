//===- StreamBase.td - The stream dialect and its enums ----*- tablegen -*-===//
//
// Part of mtc. The dialect (docs/streaming.md) and the vocabularies of its
// commands as enum attributes. In an op's custom form an enum is its keyword
// (`stream.save to = host`); in the generic form it is `#stream<space host>`.
// The bundle writer records each as its keyword (the bundle's strings).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_DIALECTS_STREAM_STREAMBASE_TD
#define MTC_DIALECTS_STREAM_STREAMBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Stream_Dialect : Dialect {
  let name = "stream";
  let cppNamespace = "::mtc::stream";
  let summary = "The training step as a program over layers, buffers and streams";
  let description = [{
    A `stream.step` describes one training step of an `mt.model` (after
    mtc-autodiff) for concrete micro-batch shapes and a device-memory budget:
    the device buffers with their sizes and arena offsets (`stream.buffer`),
    and a program of commands. The program is the model's
    `@forward_backward` cut at its `mt.apply_layers` / `mt.apply_layers_grad`
    ops: model-level stages (`stream.stage`, ranges of op indices of that
    function, run once per micro-batch) and loops over layer instances
    (`stream.layers`), whose bodies say how each instance's weights, inputs
    and gradients move between host and device.

    The scheduling passes build it step by step: `mtc-build-step` (structure),
    `mtc-insert-recompute` (what a layer keeps for its backward),
    `mtc-insert-prefetch` (weight slots and the copies ahead),
    `mtc-place-optimizer` (the deferred AdamW update), `mtc-insert-offload`
    (checkpoints on the device or in host memory) and `mtc-plan-memory`
    (buffers and offsets, checked against the budget). The bundle writer
    serialises the result into the bundle's `step` section.

    ```mlir
    stream.step @Tiny recompute = full checkpoints = device attributes {
        batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64,
        prefetch_depth = 2 : i64, device_budget = 67108864 : i64,
        device_peak = 8388608 : i64} {
      stream.buffer @weights.0 weights device bytes = 1048576 offset = 0
      stream.load_model_weights
      stream.stage [0, 2)
      stream.layers @Block[0, 4] forward op_index = 2 {
        stream.optimizer_update ahead = 1
        stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
        stream.save to = device
        stream.wait_weights event = "Block.forward.weights"
        stream.compute forward
      }
      stream.stage [3, 8)
      stream.layers @Block[0, 4] backward op_index = 8 {
        stream.prefetch ahead = 1 stream = h2d event = "Block.backward.weights"
        stream.restore from = device
        stream.wait_weights event = "Block.backward.weights"
        stream.compute backward
        stream.grad_return stream = d2h
      }
      stream.stage [9, 13)
      stream.return_model_grads
    }
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Stream_Direction : I32Enum<"Direction",
    "layer loop direction", [
  I32EnumCase<"Forward", 0, "forward">,
  I32EnumCase<"Backward", 1, "backward">
]> {
  let cppNamespace = "::mtc::stream";
  let description = [{
    The direction of a `stream.layers` loop (ascending instances, or
    descending) and the layer function its `stream.compute` runs.
  }];
}
def Stream_DirectionAttr
    : EnumAttr<Stream_Dialect, Stream_Direction, "direction">;

def Stream_StreamName : I32Enum<"StreamName",
    "stream", [
  I32EnumCase<"Compute", 0, "compute">,
  I32EnumCase<"H2D", 1, "h2d">,
  I32EnumCase<"D2H", 2, "d2h">,
  I32EnumCase<"Optimizer", 3, "optimizer">
]> {
  let cppNamespace = "::mtc::stream";
  let description = [{
    The runtime's streams: device compute, the two copy directions
    (host-to-device weights, device-to-host gradients) and the host threads
    of the optimizer. A copy command names the stream it is queued on.
  }];
}
def Stream_StreamNameAttr
    : EnumAttr<Stream_Dialect, Stream_StreamName, "stream">;

def Stream_BufferKind : I32Enum<"BufferKind", "buffer kind", [
  I32EnumCase<"ModelWeights", 0, "model_weights">,
  I32EnumCase<"ModelGrads", 1, "model_grads">,
  I32EnumCase<"Weights", 2, "weights">,
  I32EnumCase<"Grads", 3, "grads">,
  I32EnumCase<"Activations", 4, "activations">,
  I32EnumCase<"Checkpoints", 5, "checkpoints">,
  I32EnumCase<"Stage", 6, "stage">,
  I32EnumCase<"Workspace", 7, "workspace">
]> {
  let cppNamespace = "::mtc::stream";
}
def Stream_BufferKindAttr
    : EnumAttr<Stream_Dialect, Stream_BufferKind, "buffer_kind">;

def Stream_MemorySpace : I32Enum<"MemorySpace",
    "memory space", [
  I32EnumCase<"Device", 0, "device">,
  I32EnumCase<"Host", 1, "host">
]> {
  let cppNamespace = "::mtc::stream";
}
def Stream_MemorySpaceAttr
    : EnumAttr<Stream_Dialect, Stream_MemorySpace, "space">;

def Stream_RecomputePolicy : I32Enum<"RecomputePolicy",
    "recompute policy", [
  // Its input only; the backward recomputes the layer (mtc-autodiff
  // save=input).
  I32EnumCase<"Full", 0, "full">,
  // Every intermediate the backward reads (save=all).
  I32EnumCase<"None", 1, "none">,
  // The results of its matmul, attention and moe ops; the backward
  // recomputes the cheap ops between them (save=selective).
  I32EnumCase<"Selective", 2, "selective">,
  // Not a policy but a request: the compiler chooses (mtc-insert-recompute,
  // `mtc compile --recompute auto`). A stream.step never holds it.
  I32EnumCase<"Auto", 3, "auto">
]> {
  let cppNamespace = "::mtc::stream";
}
def Stream_RecomputePolicyAttr
    : EnumAttr<Stream_Dialect, Stream_RecomputePolicy, "recompute">;

def Stream_CheckpointPlacement : I32Enum<"CheckpointPlacement",
    "checkpoint placement", [
  I32EnumCase<"Device", 0, "device">,
  I32EnumCase<"Host", 1, "host">,
  // A request: the compiler chooses (mtc-insert-offload). A stream.step
  // never holds it; its `checkpoints_auto` records that the choice was made.
  I32EnumCase<"Auto", 2, "auto">
]> {
  let cppNamespace = "::mtc::stream";
}
def Stream_CheckpointPlacementAttr
    : EnumAttr<Stream_Dialect, Stream_CheckpointPlacement, "checkpoints">;

#endif // MTC_DIALECTS_STREAM_STREAMBASE_TD
