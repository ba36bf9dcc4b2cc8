// RUN: mtc-opt %s -split-input-file --mtc-build-step="batch=2 seq=4 micro-batches=2" | FileCheck %s

// mtc-build-step cuts @forward_backward at its layer ops: a stage for each run
// of other ops (op indices as in the bundle: func.return not counted), a loop
// for each layer op with its op_index. Forward loops save and compute;
// backward loops restore, compute and return gradients. The step starts with
// one weight slot, device checkpoints, no budget and no plan; the layers'
// backward functions say the recompute policy (mt.save = "input": full).

// Ops 0-1 | apply_layers (2) | ops 3-9 | apply_layers_grad (10) | ops 11-14.
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

// CHECK-LABEL: stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, device_budget = 0 : i64, device_peak = 0 : i64, micro_batches = 2 : i64, prefetch_depth = 1 : i64, seq = 4 : i64} {
// CHECK-NEXT:    stream.load_model_weights
// CHECK-NEXT:    stream.stage [0, 2)
// CHECK-NEXT:    stream.layers @Block[0, 4] forward op_index = 2 {
// CHECK-NEXT:      stream.save to = device
// CHECK-NEXT:      stream.compute forward
// CHECK-NEXT:    }
// CHECK-NEXT:    stream.stage [3, 10)
// CHECK-NEXT:    stream.layers @Block[0, 4] backward op_index = 10 {
// CHECK-NEXT:      stream.restore from = device
// CHECK-NEXT:      stream.compute backward
// CHECK-NEXT:      stream.grad_return stream = d2h
// CHECK-NEXT:    }
// CHECK-NEXT:    stream.stage [11, 15)
// CHECK-NEXT:    stream.return_model_grads
// CHECK-NEXT:  }

// -----

// A forward that also returns what its backward reads (mt.save = "all"):
// recompute none. No stage before the first layer op: empty ranges are not
// emitted.
mt.model @KeepAll {
  mt.layer @Block x 4 {
    mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> (!mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32>) {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %h = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %s = mt.silu %h : !mt.tensor<[B, S, 8], f32>
      %y = mt.add %x, %s : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y, %h : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32>
    }
    func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>, %h: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "all"} {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
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

// CHECK-LABEL: stream.step @KeepAll recompute = none checkpoints = device
// CHECK-NEXT:    stream.load_model_weights
// CHECK-NEXT:    stream.layers @Block[0, 4] forward op_index = 0 {
// CHECK:         stream.stage [1, 2)
// CHECK-NEXT:    stream.layers @Block[0, 4] backward op_index = 2 {
// CHECK:         }
// CHECK-NEXT:    stream.return_model_grads

// -----

// mt.save = "selective": recompute selective.
mt.model @Selective {
  mt.layer @Block x 4 {
    mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> (!mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32>) {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %h = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %s = mt.silu %h : !mt.tensor<[B, S, 8], f32>
      %y = mt.add %x, %s : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y, %h : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32>
    }
    func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>, %h: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "selective"} {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
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

// CHECK-LABEL: stream.step @Selective recompute = selective checkpoints = device

// -----

// Layer ops in a row (two layer kinds alternating, as in Gemma 2): one loop
// each, no stage between them; the backward loops run in reverse.
mt.model @Alternating {
  mt.layer @Local x 2 {
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %y = mt.silu %x : !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
    func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "input"} {
      %dx = mt.unary_grad silu %x, %dy param = 0.0 : !mt.tensor<[B, S, 8], f32>
      return %dx : !mt.tensor<[B, S, 8], f32>
    }
  }
  mt.layer @Global x 2 {
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %y = mt.silu %x : !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
    func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "input"} {
      %dx = mt.unary_grad silu %x, %dy param = 0.0 : !mt.tensor<[B, S, 8], f32>
      return %dx : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[], f32> {
    %h0 = mt.apply_layers @Local[0, 1] %x : !mt.tensor<[B, S, 8], f32>
    %h1 = mt.apply_layers @Global[0, 1] %h0 : !mt.tensor<[B, S, 8], f32>
    %h2 = mt.apply_layers @Local[1, 1] %h1 : !mt.tensor<[B, S, 8], f32>
    %h3 = mt.apply_layers @Global[1, 1] %h2 : !mt.tensor<[B, S, 8], f32>
    %loss = mt.constant 0.0 : !mt.tensor<[], f32>
    return %loss : !mt.tensor<[], f32>
  }
  func.func @forward_backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[], f32> {
    %h0 = mt.apply_layers @Local[0, 1] %x : !mt.tensor<[B, S, 8], f32>
    %h1 = mt.apply_layers @Global[0, 1] %h0 : !mt.tensor<[B, S, 8], f32>
    %h2 = mt.apply_layers @Local[1, 1] %h1 : !mt.tensor<[B, S, 8], f32>
    %h3 = mt.apply_layers @Global[1, 1] %h2 : !mt.tensor<[B, S, 8], f32>
    %loss = mt.constant 0.0 : !mt.tensor<[], f32>
    %d3 = mt.apply_layers_grad @Global[1, 1] %dy : !mt.tensor<[B, S, 8], f32>
    %d2 = mt.apply_layers_grad @Local[1, 1] %d3 : !mt.tensor<[B, S, 8], f32>
    %d1 = mt.apply_layers_grad @Global[0, 1] %d2 : !mt.tensor<[B, S, 8], f32>
    %d0 = mt.apply_layers_grad @Local[0, 1] %d1 : !mt.tensor<[B, S, 8], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// CHECK-LABEL: stream.step @Alternating
// CHECK-NEXT:    stream.load_model_weights
// CHECK-NEXT:    stream.layers @Local[0, 1] forward op_index = 0 {
// CHECK-NOT:     stream.stage
// CHECK:         stream.layers @Global[0, 1] forward op_index = 1 {
// CHECK-NOT:     stream.stage
// CHECK:         stream.layers @Local[1, 1] forward op_index = 2 {
// CHECK-NOT:     stream.stage
// CHECK:         stream.layers @Global[1, 1] forward op_index = 3 {
// CHECK:         stream.stage [4, 5)
// CHECK-NEXT:    stream.layers @Global[1, 1] backward op_index = 5 {
// CHECK-NOT:     stream.stage
// CHECK:         stream.layers @Local[1, 1] backward op_index = 6 {
// CHECK-NOT:     stream.stage
// CHECK:         stream.layers @Global[0, 1] backward op_index = 7 {
// CHECK-NOT:     stream.stage
// CHECK:         stream.layers @Local[0, 1] backward op_index = 8 {
// CHECK:         stream.return_model_grads

// -----

// Each model-level parameter's gradient is accumulated in the stage that
// computes it: the head's param_grad moves up to just after its weight_grad
// (op 11), before the backward loop, so that the head's gradient never waits
// across the loop (in host memory with a host stage). Without the move the
// loop would be op 11 and the last stage [12, 15).
mt.model @Untied {
  mt.param @emb : !mt.tensor<[16, 8], f32> init normal [0.02]
  mt.param @head : !mt.tensor<[8, 16], f32> init normal [0.02]
  mt.layer @Block x 2 {
    mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %y = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
    func.func @backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "input"} {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %wt = mt.transpose %w perm = [1, 0] : !mt.tensor<[8, 8], f32> -> !mt.tensor<[8, 8], f32>
      %dx = mt.matmul %dy, %wt : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %dw = mt.weight_grad %x, %dy : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[8, 8], f32>
      mt.param_grad @w, %dw : !mt.tensor<[8, 8], f32>
      return %dx : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %e = mt.param_ref @emb : !mt.tensor<[16, 8], f32>
    %x = mt.embedding %t, %e : !mt.tensor<[B, S], i32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %h = mt.apply_layers @Block[0, 2] %x : !mt.tensor<[B, S, 8], f32>
    %w = mt.param_ref @head : !mt.tensor<[8, 16], f32>
    %l = mt.matmul %h, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 16], f32> -> !mt.tensor<[B, S, 16], f32>
    %loss = mt.cross_entropy %l, %u ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    return %loss : !mt.tensor<[], f32>
  }
  func.func @forward_backward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %e = mt.param_ref @emb : !mt.tensor<[16, 8], f32>
    %x = mt.embedding %t, %e : !mt.tensor<[B, S], i32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %h = mt.apply_layers @Block[0, 2] %x : !mt.tensor<[B, S, 8], f32>
    %w = mt.param_ref @head : !mt.tensor<[8, 16], f32>
    %l = mt.matmul %h, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 16], f32> -> !mt.tensor<[B, S, 16], f32>
    %loss = mt.cross_entropy %l, %u ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    %one = mt.constant 1.0 : !mt.tensor<[], f32>
    %dl = mt.cross_entropy_grad %l, %u, %one ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32>, !mt.tensor<[], f32> -> !mt.tensor<[B, S, 16], f32>
    %wt = mt.transpose %w perm = [1, 0] : !mt.tensor<[8, 16], f32> -> !mt.tensor<[16, 8], f32>
    %dh = mt.matmul %dl, %wt : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %dw = mt.weight_grad %h, %dl : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 16], f32> -> !mt.tensor<[8, 16], f32>
    %dx = mt.apply_layers_grad @Block[0, 2] %dh : !mt.tensor<[B, S, 8], f32>
    %de = mt.embedding_grad %t, %dx : !mt.tensor<[B, S], i32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[16, 8], f32>
    mt.param_grad @emb, %de : !mt.tensor<[16, 8], f32>
    mt.param_grad @head, %dw : !mt.tensor<[8, 16], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// CHECK-LABEL: mt.model @Untied
// CHECK:      func.func @forward_backward
// CHECK:      %[[DW:.*]] = mt.weight_grad
// CHECK-NEXT: mt.param_grad @head, %[[DW]]
// CHECK-NEXT: mt.apply_layers_grad @Block[0, 2]
// CHECK-LABEL: stream.step @Untied
// CHECK:      stream.stage [3, 12)
// CHECK-NEXT: stream.layers @Block[0, 2] backward op_index = 12 {
// CHECK:      stream.stage [13, 15)
