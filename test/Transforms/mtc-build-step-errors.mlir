// RUN: split-file %s %t
// RUN: mtc-opt %t/structure.mlir -split-input-file --verify-diagnostics --mtc-build-step="batch=2 seq=4"
// RUN: mtc-opt %t/dims.mlir --verify-diagnostics --mtc-build-step="batch=2 seq=4 micro-batches=0"

// Every error of mtc-build-step. The input is a differentiated model (as
// mtc-autodiff leaves it), one per module.

//--- structure.mlir

// expected-error @below {{mtc-build-step: expected exactly one mt.model}}
module {
}

// -----

// expected-error @below {{mtc-build-step: expected exactly one mt.model}}
module {
  mt.model @A {
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
  mt.model @B {
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
}

// -----

// expected-error @below {{mtc-build-step: the module already has a stream.step}}
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
}

// -----

// Not differentiated: no @forward_backward.
module {
  // expected-error @below {{model @Tiny has no forward_backward function (run mtc-autodiff first)}}
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
}

// -----

module {
  mt.model @Tiny {
    // expected-error @below {{layer @Block has no backward function (run mtc-autodiff first)}}
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
}

//--- dims.mlir

// expected-error @below {{mtc-build-step: batch, seq and micro-batches must be >= 1 (got batch=2, seq=4, micro-batches=0)}}
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
}
