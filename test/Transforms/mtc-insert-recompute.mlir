// RUN: mtc-opt %s -split-input-file --mtc-insert-recompute | FileCheck %s

// mtc-insert-recompute sets the step's recompute policy (auto: the one the
// layers were differentiated with, their backward's mt.save) and on every
// loop checkpoint_bytes, what one instance keeps for its backward per
// micro-batch. At [2, 4] an activation [B, S, 8] f32 is 2 * 4 * 8 * 4 = 256
// bytes.

// mt.save = "input": the input only.
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
stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 1 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
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
// CHECK:         stream.layers @Block[0, 4] forward op_index = 0 attributes {checkpoint_bytes = 256 : i64} {
// CHECK:         stream.layers @Block[0, 4] backward op_index = 2 attributes {checkpoint_bytes = 256 : i64} {

// -----

// mt.save = "all": the input and %h, which the forward also returns (512
// bytes). The step's policy becomes the module's.
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
stream.step @KeepAll recompute = full checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 1 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
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

// CHECK-LABEL: stream.step @KeepAll recompute = none
// CHECK:         stream.layers @Block[0, 4] forward op_index = 0 attributes {checkpoint_bytes = 512 : i64} {
// CHECK:         stream.layers @Block[0, 4] backward op_index = 2 attributes {checkpoint_bytes = 512 : i64} {

// -----

// mt.save = "selective": the input and the matmul result %h.
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
stream.step @Selective recompute = selective checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 2 : i64, prefetch_depth = 1 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
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

// CHECK-LABEL: stream.step @Selective recompute = selective
// CHECK:         stream.layers @Block[0, 4] forward op_index = 0 attributes {checkpoint_bytes = 512 : i64} {
