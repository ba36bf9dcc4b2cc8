// RUN: mtc-opt %s -split-input-file --mtc-place-optimizer | FileCheck %s

// mtc-place-optimizer puts the deferred AdamW update of the instance
// prefetch_depth - 1 ahead first in every forward loop body, before the
// prefetch that copies those weights; backward loops get none. The pass reads
// only the step: the model is a stub.
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

// CHECK-LABEL: stream.step @Tiny
// CHECK:         stream.layers @Block[0, 4] forward op_index = 0 {
// CHECK-NEXT:      stream.optimizer_update ahead = 1
// CHECK-NEXT:      stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
// CHECK:         stream.layers @Block[0, 4] backward op_index = 2 {
// CHECK-NOT:       stream.optimizer_update
// CHECK:         stream.return_model_grads

// -----

// One weight slot (no prefetch): the update of the current instance.
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

// CHECK-LABEL: stream.step @Tiny
// CHECK:         stream.layers @Block[0, 4] forward op_index = 0 {
// CHECK-NEXT:      stream.optimizer_update ahead = 0
// CHECK-NEXT:      stream.save to = device
