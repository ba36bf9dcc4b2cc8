// RUN: split-file %s %t
// RUN: mtc-opt %t/structure.mlir -split-input-file --verify-diagnostics --mtc-plan-memory
// RUN: mtc-opt %t/bad-budget.mlir --verify-diagnostics --mtc-plan-memory="budget=lots"
// RUN: not mtc-opt %t/bad-budget.mlir --mtc-plan-memory="grad-dtype=fp8" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not mtc-opt %t/bad-budget.mlir --mtc-plan-memory="host-budget=4000" 2>&1 | FileCheck %s --check-prefix=HOST16
// RUN: mtc-opt %t/bad-budget.mlir --mtc-plan-memory="host-budget=4000 grad-dtype=bf16" | FileCheck %s --check-prefix=HOST14

// grad-dtype: bf16 host gradients count 14 B/param of state instead of 16;
// bad-budget.mlir's 256 parameters need 4096 bytes of state with fp32
// gradients and 3584 with bf16 ones, and a 4000-byte host budget names the
// latter among the options that fit.
// DTYPE: error: 'stream.step' op grad-dtype must be fp32 or bf16, got 'fp8'
// HOST16: error: needs 4 KiB of host memory (training state 4 KiB (16 B/param)), host budget is 3.9 KiB: short by 96 B; options that fit: --grad-dtype bf16 (the deferred optimizer's gradients as bf16 in host memory, 14 B/param; 3.5 KiB), --clip 0
// HOST14: stream.step @Tiny
// HOST14: stream.buffer @workspace

// Every error of mtc-plan-memory. An infeasible budget names the smallest
// feasible one. With device checkpoints the plan needs 4864 bytes, with host
// checkpoints 4352 (see mtc-plan-memory.mlir for the buffers).

//--- structure.mlir

// expected-error @below {{mtc-plan-memory: the module has no stream.step (run mtc-build-step first)}}
module {
}

// -----

// expected-error @below {{mtc-plan-memory: the module has more than one stream.step}}
module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 0.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
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
}

// -----

module {
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
  }
  // expected-error @below {{'stream.step' op model @Tiny has no forward_backward function; run mtc-autodiff first}}
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
}

// -----

module {
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
  // expected-error @below {{'stream.step' op layer @Block has no backward function; run mtc-autodiff first}}
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
}

// -----

// Device checkpoints asked for: the smallest budget is this plan's peak.
module {
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
  // expected-error @below {{needs 4.8 KiB of device memory, budget is 3.9 KiB; smallest feasible budget with these options is 4.8 KiB}}
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 2 : i64, device_budget = 4000 : i64, device_peak = 0 : i64} {
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
}

// -----

// Checkpoints placed automatically: the smallest budget is the smaller of the
// device and host checkpoint plans.
module {
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
  // expected-error @below {{needs 4.3 KiB of device memory, budget is 3.9 KiB; smallest feasible budget with these options is 4.3 KiB}}
  stream.step @Tiny recompute = full checkpoints = host attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 2 : i64, device_budget = 4000 : i64, device_peak = 0 : i64, checkpoints_auto} {
    stream.load_model_weights
    stream.layers @Block[0, 4] forward op_index = 0 attributes {checkpoint_bytes = 256 : i64} {
      stream.optimizer_update ahead = 1
      stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
      stream.save to = host
      stream.wait_weights event = "Block.forward.weights"
      stream.compute forward
    }
    stream.stage [1, 2)
    stream.layers @Block[0, 4] backward op_index = 2 attributes {checkpoint_bytes = 256 : i64} {
      stream.prefetch ahead = 1 stream = h2d event = "Block.backward.weights"
      stream.restore from = host
      stream.wait_weights event = "Block.backward.weights"
      stream.compute backward
      stream.grad_return stream = d2h
    }
    stream.return_model_grads
  }
}

// -----

module {
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
  // expected-error @below {{device budget of 100 B is smaller than the weights of one instance of layer Block (256 B); the model cannot stream through it; smallest feasible budget with these options is 4.8 KiB}}
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 2 : i64, device_budget = 100 : i64, device_peak = 0 : i64} {
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
}

//--- bad-budget.mlir

// expected-error @below {{budget: invalid size 'lots' (expected bytes or a number with KiB, MiB, GiB or TiB, e.g. 64MiB, 1.5GiB)}}
module {
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
}
