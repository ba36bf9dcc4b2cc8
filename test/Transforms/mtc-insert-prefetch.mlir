// RUN: mtc-opt %s -split-input-file --mtc-insert-prefetch="depth=3" | FileCheck %s
// RUN: mtc-opt %s -split-input-file --mtc-insert-prefetch | FileCheck %s --check-prefix=DEFAULT

// mtc-insert-prefetch sets prefetch_depth (the weight slots) and puts in every
// loop body a prefetch of the instance depth - 1 ahead on the h2d stream,
// first (after an optimizer_update), and a wait for the current instance's
// weights right before its compute, both naming <layer>.<direction>.weights.
// The pass reads only the step: the model is a stub.
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

// CHECK-LABEL: stream.step @Tiny recompute = full checkpoints = device attributes {{{.*}}prefetch_depth = 3 : i64
// CHECK-NEXT:    stream.load_model_weights
// CHECK-NEXT:    stream.layers @Block[0, 4] forward op_index = 0 {
// CHECK-NEXT:      stream.prefetch ahead = 2 stream = h2d event = "Block.forward.weights"
// CHECK-NEXT:      stream.save to = device
// CHECK-NEXT:      stream.wait_weights event = "Block.forward.weights"
// CHECK-NEXT:      stream.compute forward
// CHECK-NEXT:    }
// CHECK-NEXT:    stream.stage [1, 2)
// CHECK-NEXT:    stream.layers @Block[0, 4] backward op_index = 2 {
// CHECK-NEXT:      stream.prefetch ahead = 2 stream = h2d event = "Block.backward.weights"
// CHECK-NEXT:      stream.restore from = device
// CHECK-NEXT:      stream.wait_weights event = "Block.backward.weights"
// CHECK-NEXT:      stream.compute backward
// CHECK-NEXT:      stream.grad_return stream = d2h
// CHECK-NEXT:    }

// The default is two slots: one instance ahead.
// DEFAULT-LABEL: stream.step @Tiny
// DEFAULT-SAME:    prefetch_depth = 2 : i64
// DEFAULT:         stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"

// -----

// After mtc-place-optimizer the update stays first: it must run before the
// copy of the weights it updates.
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
    stream.optimizer_update ahead = 0
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

// CHECK-LABEL: stream.step @Tiny
// CHECK:         stream.layers @Block[0, 4] forward op_index = 0 {
// CHECK-NEXT:      stream.optimizer_update ahead = 0
// CHECK-NEXT:      stream.prefetch ahead = 2 stream = h2d event = "Block.forward.weights"
// CHECK-NEXT:      stream.save to = device
// CHECK-NEXT:      stream.wait_weights event = "Block.forward.weights"
// CHECK-NEXT:      stream.compute forward
