// RUN: mtc-opt %s --mtc-insert-offload="checkpoints=host" | FileCheck %s --check-prefix=HOST
// RUN: mtc-opt %s --mtc-insert-offload="checkpoints=device" | FileCheck %s --check-prefix=DEVICE
// RUN: mtc-opt %s --mtc-insert-offload | FileCheck %s --check-prefix=AUTO-DEVICE
// RUN: mtc-opt %s --mtc-insert-offload="budget=8KiB" | FileCheck %s --check-prefix=AUTO-DEVICE
// RUN: mtc-opt %s --mtc-insert-offload="budget=4500" | FileCheck %s --check-prefix=AUTO-HOST

// mtc-insert-offload says where the step keeps its layer checkpoints: the
// step's checkpoints, every save's to and every restore's from. auto keeps
// them on the device when the plan with device checkpoints fits the budget
// (or there is none), else in host memory, and marks the step
// checkpoints_auto. Here that plan needs 4864 bytes (two weight and two grads
// slots of 256, activations 512, checkpoints 4 x 256, stage 1088 rounded up
// to 1280, workspace 1024: see mtc-plan-memory).
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
stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 2 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
  stream.load_model_weights
  stream.layers @Block[0, 4] forward op_index = 0 attributes {checkpoint_bytes = 256 : i64} {
    stream.optimizer_update ahead = 1
    stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
    stream.save to = device
    stream.wait_weights event = "Block.forward.weights"
    stream.compute forward
  }
  stream.stage [1, 2)
  stream.layers @Block[0, 4] backward op_index = 2 attributes {checkpoint_bytes = 256 : i64} {
    stream.prefetch ahead = 1 stream = h2d event = "Block.backward.weights"
    stream.restore from = device
    stream.wait_weights event = "Block.backward.weights"
    stream.compute backward
    stream.grad_return stream = d2h
  }
  stream.return_model_grads
}

// HOST-LABEL: stream.step @Tiny recompute = full checkpoints = host attributes {batch = 2 : i64, device_budget = 0 : i64
// HOST:         stream.save to = host
// HOST:         stream.restore from = host

// DEVICE-LABEL: stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, device_budget = 0 : i64
// DEVICE:         stream.save to = device
// DEVICE:         stream.restore from = device

// AUTO-DEVICE-LABEL: stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, checkpoints_auto,
// AUTO-DEVICE:         stream.save to = device
// AUTO-DEVICE:         stream.restore from = device

// AUTO-HOST-LABEL: stream.step @Tiny recompute = full checkpoints = host attributes {batch = 2 : i64, checkpoints_auto,
// AUTO-HOST:         stream.save to = host
// AUTO-HOST:         stream.restore from = host
