// RUN: split-file %s %t
// RUN: mtc-opt %t/structure.mlir -split-input-file --verify-diagnostics --mtc-insert-prefetch
// RUN: mtc-opt %t/depth.mlir --verify-diagnostics --mtc-insert-prefetch="depth=0"

// Every error of mtc-insert-prefetch.

//--- structure.mlir

// expected-error @below {{mtc-insert-prefetch: the module has no stream.step (run mtc-build-step first)}}
module {
}

// -----

// expected-error @below {{mtc-insert-prefetch: the module has more than one stream.step}}
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

// Prefetched already (the pass ran before).
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
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 2 : i64, seq = 4 : i64, micro_batches = 1 : i64, prefetch_depth = 2 : i64, device_budget = 0 : i64, device_peak = 0 : i64} {
    stream.load_model_weights
    // expected-error @below {{'stream.layers' op already has a prefetch or wait_weights}}
    stream.layers @Block[0, 4] forward op_index = 0 {
      stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
      stream.save to = device
      stream.wait_weights event = "Block.forward.weights"
      stream.compute forward
    }
    stream.stage [1, 2)
    stream.layers @Block[0, 4] backward op_index = 2 {
      stream.prefetch ahead = 1 stream = h2d event = "Block.backward.weights"
      stream.restore from = device
      stream.wait_weights event = "Block.backward.weights"
      stream.compute backward
      stream.grad_return stream = d2h
    }
    stream.return_model_grads
  }
}

//--- depth.mlir

// expected-error @below {{mtc-insert-prefetch: depth must be >= 1, got 0}}
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
