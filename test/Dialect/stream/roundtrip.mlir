// Every op of the stream dialect, in its custom and its generic form.
// RUN: mtc-opt %s | mtc-opt | FileCheck %s
// RUN: mtc-opt %s --mlir-print-op-generic | mtc-opt | FileCheck %s
// RUN: mtc-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

module {
  mt.model @Tiny {
    mt.layer @Block x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [2.0e-02]
      func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
        return %x : !mt.tensor<[B, S, 8], f32>
      }
    }
    func.func @forward(%t: !mt.tensor<[B, S], i32>, %y: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
      %c = mt.constant 1.0 : !mt.tensor<[], f32>
      return %c : !mt.tensor<[], f32>
    }
  }
  stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, seq = 64 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, device_budget = 67108864 : i64, device_peak = 8388608 : i64, checkpoints_auto} {
    stream.buffer @weights.0 kind = weights space = device bytes = 1048576 offset = 0
    stream.buffer @checkpoints kind = checkpoints space = device bytes = 4096 offset = 1048576
    stream.buffer @checkpoints.host kind = checkpoints space = host bytes = 8192
    stream.load_model_weights
    stream.stage [0, 2)
    stream.layers @Block [0, 4] forward op_index = 2 attributes {checkpoint_bytes = 2048 : i64} {
      stream.optimizer_update ahead = 1
      stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
      stream.save to = host
      stream.wait_weights event = "Block.forward.weights"
      stream.compute forward
    }
    stream.stage [3, 8)
    stream.layers @Block [0, 4] backward op_index = 8 {
      stream.prefetch ahead = 1 stream = h2d event = "Block.backward.weights"
      stream.restore from = host
      stream.wait_weights event = "Block.backward.weights"
      stream.compute backward
      stream.grad_return stream = d2h
    }
    stream.stage [9, 13)
    stream.return_model_grads
  }
}

// CHECK:      stream.step @Tiny recompute = full checkpoints = device attributes {batch = 4 : i64, checkpoints_auto, device_budget = 67108864 : i64, device_peak = 8388608 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, seq = 64 : i64} {
// CHECK-NEXT:   stream.buffer @weights.0 kind = weights space = device bytes = 1048576 offset = 0
// CHECK-NEXT:   stream.buffer @checkpoints kind = checkpoints space = device bytes = 4096 offset = 1048576
// CHECK-NEXT:   stream.buffer @checkpoints.host kind = checkpoints space = host bytes = 8192{{$}}
// CHECK-NEXT:   stream.load_model_weights
// CHECK-NEXT:   stream.stage [0, 2)
// CHECK-NEXT:   stream.layers @Block[0, 4] forward op_index = 2 attributes {checkpoint_bytes = 2048 : i64} {
// CHECK-NEXT:     stream.optimizer_update ahead = 1
// CHECK-NEXT:     stream.prefetch ahead = 1 stream = h2d event = "Block.forward.weights"
// CHECK-NEXT:     stream.save to = host
// CHECK-NEXT:     stream.wait_weights event = "Block.forward.weights"
// CHECK-NEXT:     stream.compute forward
// CHECK-NEXT:   }
// CHECK-NEXT:   stream.stage [3, 8)
// CHECK-NEXT:   stream.layers @Block[0, 4] backward op_index = 8 {
// CHECK-NEXT:     stream.prefetch ahead = 1 stream = h2d event = "Block.backward.weights"
// CHECK-NEXT:     stream.restore from = host
// CHECK-NEXT:     stream.wait_weights event = "Block.backward.weights"
// CHECK-NEXT:     stream.compute backward
// CHECK-NEXT:     stream.grad_return stream = d2h
// CHECK-NEXT:   }
// CHECK-NEXT:   stream.stage [9, 13)
// CHECK-NEXT:   stream.return_model_grads
// CHECK-NEXT: }

// The generic form spells each enum as a dialect attribute.
// GENERIC: "stream.step"() <{{{.*}}checkpoints = #stream<checkpoints device>{{.*}}recompute = #stream<recompute full>
// GENERIC: "stream.buffer"() <{bytes = 1048576 : i64, kind = #stream<buffer_kind weights>, offset = 0 : i64, space = #stream<space device>
// GENERIC: "stream.layers"() <{{{.*}}direction = #stream<direction forward>
// GENERIC: "stream.prefetch"() <{{{.*}}stream = #stream<stream h2d>}>
// GENERIC: "stream.save"() <{to = #stream<space host>}>
// GENERIC: "stream.compute"() <{fn = #stream<direction forward>}>
// GENERIC: "stream.restore"() <{from = #stream<space host>}>
// GENERIC: "stream.grad_return"() <{stream = #stream<stream d2h>}>
