// RUN: mtc-opt %s --mtc-streaming-pipeline="batch=2 seq=4 micro-batches=2 checkpoints=device budget=64KiB" | FileCheck %s
// RUN: mtc-opt %s --mtc-build-step="batch=2 seq=4 micro-batches=2" --mtc-insert-recompute --mtc-insert-prefetch --mtc-place-optimizer --mtc-insert-offload="checkpoints=device" --mtc-plan-memory="budget=64KiB" | FileCheck %s
// The options reach the passes: a bad size is the first pass's error, a bad
// policy or placement the option parser's.
// RUN: not mtc-opt %s --mtc-streaming-pipeline="batch=2 seq=4 budget=lots" 2>&1 | FileCheck %s --check-prefix=BAD-BUDGET
// RUN: not mtc-opt %s --mtc-streaming-pipeline="batch=2 seq=4 recompute=some" 2>&1 | FileCheck %s --check-prefix=BAD-RECOMPUTE
// RUN: not mtc-opt %s --mtc-streaming-pipeline="batch=2 seq=4 checkpoints=disk" 2>&1 | FileCheck %s --check-prefix=BAD-CHECKPOINTS

// mtc-streaming-pipeline: the six streaming passes in the order the compiler
// runs them, with their options in one place; the result equals the passes
// run one by one. (test/examples/tiny-llama-streaming.test runs the
// frontend's output for a real model through it.)
mt.model @Tiny {
  mt.param @emb : !mt.tensor<[16, 8], f32> init normal [0.02]
  mt.layer @Block x 4 {
    mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %h = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %s = mt.silu %h : !mt.tensor<[B, S, 8], f32>
      %y = mt.add %x, %s : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
    func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "input"} {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %h = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %dh = mt.unary_grad silu %h, %dy param = 0.0 : !mt.tensor<[B, S, 8], f32>
      %wt = mt.transpose %w perm = [1, 0] : !mt.tensor<[8, 8], f32> -> !mt.tensor<[8, 8], f32>
      %dxh = mt.matmul %dh, %wt : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %dx = mt.add %dy, %dxh : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %dw = mt.weight_grad %x, %dh : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[8, 8], f32>
      mt.param_grad @w, %dw : !mt.tensor<[8, 8], f32>
      return %dx : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %e = mt.param_ref @emb : !mt.tensor<[16, 8], f32>
    %x = mt.embedding %t, %e : !mt.tensor<[B, S], i32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 8], f32>
    %et = mt.transpose %e perm = [1, 0] : !mt.tensor<[16, 8], f32> -> !mt.tensor<[8, 16], f32>
    %l = mt.matmul %h, %et : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 16], f32> -> !mt.tensor<[B, S, 16], f32>
    %loss = mt.cross_entropy %l, %u ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    return %loss : !mt.tensor<[], f32>
  }
  func.func @forward_backward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %e = mt.param_ref @emb : !mt.tensor<[16, 8], f32>
    %x = mt.embedding %t, %e : !mt.tensor<[B, S], i32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 8], f32>
    %et = mt.transpose %e perm = [1, 0] : !mt.tensor<[16, 8], f32> -> !mt.tensor<[8, 16], f32>
    %l = mt.matmul %h, %et : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 16], f32> -> !mt.tensor<[B, S, 16], f32>
    %loss = mt.cross_entropy %l, %u ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    %one = mt.constant 1.0 : !mt.tensor<[], f32>
    %dl = mt.cross_entropy_grad %l, %u, %one ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32>, !mt.tensor<[], f32> -> !mt.tensor<[B, S, 16], f32>
    %dh = mt.matmul %dl, %e : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %det = mt.weight_grad %h, %dl : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 16], f32> -> !mt.tensor<[8, 16], f32>
    %dx = mt.apply_layers_grad @Block[0, 4] %dh : !mt.tensor<[B, S, 8], f32>
    %de1 = mt.embedding_grad %t, %dx : !mt.tensor<[B, S], i32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[16, 8], f32>
    %de2 = mt.transpose %det perm = [1, 0] : !mt.tensor<[8, 16], f32> -> !mt.tensor<[16, 8], f32>
    %de = mt.add %de1, %de2 : !mt.tensor<[16, 8], f32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[16, 8], f32>
    mt.param_grad @emb, %de : !mt.tensor<[16, 8], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// CHECK-LABEL: stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, device_budget = 65536 : i64, device_peak = 15872 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, seq = 4 : i64} {
// CHECK-NEXT:    stream.buffer @model.weights kind = model_weights space = device bytes = 512 offset = 0
// CHECK:         stream.buffer @workspace kind = workspace space = device bytes = 1024 offset = 14848
// CHECK-NEXT:    stream.load_model_weights
// CHECK-NEXT:    stream.stage [0, 2)
// CHECK-NEXT:    stream.layers @Block[0, 4] forward op_index = 2 attributes {checkpoint_bytes = 256 : i64} {
// CHECK-NEXT:      stream.optimizer_update ahead = 1
// CHECK-NEXT:      stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
// CHECK-NEXT:      stream.save to = device
// CHECK-NEXT:      stream.wait_weights event = "Block.forward.weights"
// CHECK-NEXT:      stream.compute forward
// CHECK-NEXT:    }
// CHECK-NEXT:    stream.stage [3, 10)
// CHECK-NEXT:    stream.layers @Block[0, 4] backward op_index = 10 attributes {checkpoint_bytes = 256 : i64} {
// CHECK-NEXT:      stream.prefetch ahead = 1 stream = h2d event = "Block.backward.weights"
// CHECK-NEXT:      stream.restore from = device
// CHECK-NEXT:      stream.wait_weights event = "Block.backward.weights"
// CHECK-NEXT:      stream.compute backward
// CHECK-NEXT:      stream.grad_return stream = d2h
// CHECK-NEXT:    }
// CHECK-NEXT:    stream.stage [11, 15)
// CHECK-NEXT:    stream.return_model_grads
// CHECK-NEXT:  }

// BAD-BUDGET: error: budget: invalid size 'lots'
// BAD-RECOMPUTE: for the --recompute option: 'some' is not one of auto, full, none, selective
// BAD-CHECKPOINTS: for the --checkpoints option: 'disk' is not one of device, host, auto
