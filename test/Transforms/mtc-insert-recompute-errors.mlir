// RUN: split-file %s %t
// RUN: mtc-opt %t/structure.mlir -split-input-file --verify-diagnostics --mtc-insert-recompute
// RUN: mtc-opt %t/bad-budget.mlir --verify-diagnostics --mtc-insert-recompute="budget=lots"
// RUN: mtc-opt %t/full.mlir -split-input-file --verify-diagnostics --mtc-insert-recompute="recompute=full"
// RUN: mtc-opt %t/none.mlir -split-input-file --verify-diagnostics --mtc-insert-recompute="recompute=none"
// RUN: mtc-opt %t/selective.mlir -split-input-file --verify-diagnostics --mtc-insert-recompute="recompute=selective"
// RUN: mtc-opt %t/budget.mlir --verify-diagnostics --mtc-insert-recompute="budget=1KiB"
// An unknown policy is the option parser's error, which lists the policies.
// RUN: not mtc-opt %t/budget.mlir --mtc-insert-recompute="recompute=some" 2>&1 | FileCheck %s
// CHECK: for the --recompute option: 'some' is not one of auto, full, none, selective

// Every error of mtc-insert-recompute. A policy asked for must be the one the
// layers were differentiated with (their backward's mt.save, or what their
// functions show).

//--- structure.mlir

// expected-error @below {{mtc-insert-recompute: the module has no stream.step (run mtc-build-step first)}}
module {
}

// -----

// expected-error @below {{mtc-insert-recompute: the module has more than one stream.step}}
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

//--- full.mlir

module {
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
  // expected-error @below {{recompute=full, but the forward of layer @Block keeps intermediates for its backward: the module was differentiated with mtc-autodiff save=all (recompute none)}}
  stream.step @KeepAll recompute = none checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 1 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
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
  // expected-error @below {{recompute=full, but the forward of layer @Block keeps intermediates for its backward: the module was differentiated with mtc-autodiff save=selective (recompute selective)}}
  stream.step @Selective recompute = selective checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 1 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
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

//--- none.mlir

module {
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
  // expected-error @below {{recompute=none, but layer @Block keeps only some intermediates: the module was differentiated with mtc-autodiff save=selective (recompute selective)}}
  stream.step @Selective recompute = selective checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 1 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
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
    func.func @forward_backward(%x: !mt.tensor<[B, S, 8], f32>, %dy: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[], f32> {
      %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 8], f32>
      %loss = mt.constant 0.0 : !mt.tensor<[], f32>
      %dx = mt.apply_layers_grad @Block[0, 4] %dy : !mt.tensor<[B, S, 8], f32>
      return %loss : !mt.tensor<[], f32>
    }
  }
  // expected-error @below {{recompute=none, but the backward of layer @Block recomputes its forward: the module was differentiated with mtc-autodiff save=input (recompute full)}}
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

//--- selective.mlir

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
  // expected-error @below {{recompute=selective, but the module was differentiated with mtc-autodiff save=input (recompute full); differentiate with mtc-autodiff save=selective}}
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
  // expected-error @below {{recompute=selective, but the module was differentiated with mtc-autodiff save=all (recompute none); differentiate with mtc-autodiff save=selective}}
  stream.step @KeepAll recompute = none checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 1 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
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

//--- budget.mlir

// auto keeps every intermediate when the module was differentiated so, unless
// the device checkpoints alone exceed the budget: 4 instances x 512 bytes.
module {
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
  // expected-error @below {{keeping every intermediate needs 2 KiB of checkpoints, more than the budget of 1 KiB; differentiate with mtc-autodiff save=input (recompute full)}}
  stream.step @KeepAll recompute = none checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 1 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
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
