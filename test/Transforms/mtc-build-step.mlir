// mtc-build-step cuts @forward_backward at its layer ops.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64 micro-batches=2" | FileCheck %s
// Gemma-2 style: four apply_layers in a row, no empty stages between them.
// RUN: mtc compile %examples/gemma2-small.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=1 seq=8" | FileCheck %s --check-prefix=GEMMA
// Errors: no forward_backward (not differentiated), missing dims, a second step.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir | not mtc-opt --mtc-build-step="batch=4 seq=64" 2>&1 | FileCheck %s --check-prefix=NOFB
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | not mtc-opt --mtc-build-step 2>&1 | FileCheck %s --check-prefix=NODIMS
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-build-step="batch=4 seq=64" 2>&1 | FileCheck %s --check-prefix=TWICE

// CHECK:      stream.step @TinyLlama recompute = full checkpoints = device attributes {batch = 4 : i64, device_budget = 0 : i64, device_peak = 0 : i64, micro_batches = 2 : i64, prefetch_depth = 1 : i64, seq = 64 : i64} {
// CHECK-NEXT:   stream.load_model_weights
// CHECK-NEXT:   stream.stage [0, 2)
// CHECK-NEXT:   stream.layers @Block[0, 4] forward op_index = 2 {
// CHECK-NEXT:     stream.save to = device
// CHECK-NEXT:     stream.compute forward
// CHECK-NEXT:   }
// CHECK-NEXT:   stream.stage [3, 10)
// CHECK-NEXT:   stream.layers @Block[0, 4] backward op_index = 10 {
// CHECK-NEXT:     stream.restore from = device
// CHECK-NEXT:     stream.compute backward
// CHECK-NEXT:     stream.grad_return stream = d2h
// CHECK-NEXT:   }
// CHECK-NEXT:   stream.stage [11, 15)
// CHECK-NEXT:   stream.return_model_grads
// CHECK-NEXT: }

// GEMMA:      stream.load_model_weights
// GEMMA-NEXT: stream.stage [0, 4)
// GEMMA-NEXT: stream.layers @Local[0, 1] forward op_index = 4 {
// GEMMA:      stream.layers @Global[0, 1] forward op_index = 5 {
// GEMMA:      stream.layers @Local[1, 1] forward op_index = 6 {
// GEMMA:      stream.layers @Global[1, 1] forward op_index = 7 {
// GEMMA:      }
// GEMMA-NEXT: stream.stage [8,
// GEMMA:      stream.layers @Global[1, 1] backward
// GEMMA:      stream.layers @Local[1, 1] backward
// GEMMA:      stream.layers @Global[0, 1] backward
// GEMMA:      stream.layers @Local[0, 1] backward
// GEMMA:      stream.return_model_grads

// NOFB: error: model @TinyLlama has no forward_backward function (run mtc-autodiff first)
// NODIMS: error: mtc-build-step: batch, seq and micro-batches must be >= 1 (got batch=0, seq=0, micro-batches=1)
// TWICE: error: mtc-build-step: the module already has a stream.step
