// RUN: mtc-opt %s --mtc-insert-recompute=checkpoint-every=3 | FileCheck %s
// RUN: mtc-opt %s --mtc-insert-recompute=checkpoint-every=1 | FileCheck %s --check-prefix=ONE
// RUN: not mtc-opt %s --mtc-insert-recompute=checkpoint-every=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not mtc-opt %s --mtc-insert-recompute=checkpoint-every=5 2>&1 | FileCheck %s --check-prefix=LONG
// RUN: mtc-opt %s --mtc-insert-recompute=checkpoint-every=3 --mtc-insert-prefetch=depth=2 --mtc-place-optimizer --mtc-insert-offload=checkpoints=device --mtc-plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: mtc-opt %s --mtc-insert-recompute=checkpoint-every=4 --mtc-insert-prefetch=depth=2 --mtc-place-optimizer --mtc-insert-offload=checkpoints=host --mtc-plan-memory | FileCheck %s --check-prefix=HOST

// mtc-insert-recompute checkpoint-every=k: segment checkpointing. Only the
// first instance of every segment of k keeps its input; the step records k
// as checkpoint_every (absent for 1). Per instance the checkpoint is still
// the input: at [2, 4] an activation [B, S, 8] f32 is 2 * 4 * 8 * 4 = 256
// bytes.

mt.model @Tiny {
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
  func.func @forward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[], f32> {
    %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 8], f32>
    %loss = mt.constant 0.0 : !mt.tensor<[], f32>
    return %loss : !mt.tensor<[], f32>
  }
  func.func @forward_backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[], f32> {
    %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 8], f32>
    %loss = mt.constant 0.0 : !mt.tensor<[], f32>
    %dx = mt.apply_layers_grad @Block[0, 4] %dy : !mt.tensor<[B, S, 8], f32>
    return %loss : !mt.tensor<[], f32>
  }
}
stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 2 : i64, prefetch_depth = 1 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
  stream.load_model_weights
  stream.layers @Block[0, 4] forward op_index = 0 {
    stream.save to = device
    stream.compute forward
  }
  stream.stage [1, 2)
  stream.layers @Block[0, 4] backward op_index = 2 {
    stream.restore from = device
    stream.compute backward
    stream.grad_return stream = d2h
  }
  stream.return_model_grads
}

// CHECK-LABEL: stream.step @Tiny recompute = full
// CHECK-SAME:    checkpoint_every = 3 : i64
// CHECK:         stream.layers @Block[0, 4] forward op_index = 0 attributes {checkpoint_bytes = 256 : i64} {

// ONE-LABEL: stream.step @Tiny recompute = full
// ONE-NOT:     checkpoint_every

// ZERO: error: 'stream.step' op checkpoint-every must be >= 1 (1: every layer instance keeps its input), got 0
// LONG: error: 'stream.step' op checkpoint-every=5 exceeds the 4 instances of the longest layer loop (@Block): a segment is at most one loop

// The plan: segments [0, 3) and [3, 4) keep 2 checkpoints per micro-batch
// (2 x 2 x 256 = 1024 bytes instead of 4 x 2 x 256); three weight slots
// (a segment's instances stay resident from their recomputed forward to their
// backward), prefetching 2 ahead; the segment buffer holds the inputs of one
// segment's 3 instances for both micro-batches (3 x 2 x 256 = 1536 bytes).
// PLAN:      stream.step @Tiny recompute = full checkpoints = device
// PLAN-SAME:   checkpoint_every = 3 : i64
// PLAN-SAME:   prefetch_depth = 3 : i64
// PLAN:      stream.buffer @weights.2 kind = weights
// PLAN-NOT:  stream.buffer @weights.3
// PLAN:      stream.buffer @checkpoints kind = checkpoints space = device bytes = 1024
// PLAN-NEXT: stream.buffer @segment kind = activations space = device bytes = 1536
// PLAN:      stream.prefetch ahead = 2

// Host checkpoints, one segment of 4: one checkpoint per micro-batch in host
// memory (2 x 256), four weight slots, a segment buffer of 4 x 2 x 256.
// HOST:      prefetch_depth = 4 : i64
// HOST:      stream.buffer @weights.3 kind = weights
// HOST:      stream.buffer @checkpoints.host kind = checkpoints space = host bytes = 512
// HOST-NEXT: stream.buffer @segment kind = activations space = device bytes = 2048
