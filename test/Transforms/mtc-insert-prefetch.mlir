// mtc-insert-prefetch: weight slots, a prefetch ahead and a wait before compute.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=2 seq=16" --mtc-insert-prefetch="depth=3" | FileCheck %s
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=2 seq=16" --mtc-insert-prefetch | FileCheck %s --check-prefix=DEFAULT
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=2 seq=16" | not mtc-opt --mtc-insert-prefetch="depth=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=2 seq=16" --mtc-insert-prefetch | not mtc-opt --mtc-insert-prefetch 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | not mtc-opt --mtc-insert-prefetch 2>&1 | FileCheck %s --check-prefix=NOSTEP

// CHECK:      stream.step @TinyLlama recompute = full checkpoints = device attributes {{{.*}}prefetch_depth = 3 : i64
// CHECK:      stream.layers @Block[0, 4] forward op_index = 2 {
// CHECK-NEXT:   stream.prefetch ahead = 2 stream = h2d event = "Block.forward.weights"
// CHECK-NEXT:   stream.save to = device
// CHECK-NEXT:   stream.wait_weights event = "Block.forward.weights"
// CHECK-NEXT:   stream.compute forward
// CHECK-NEXT: }
// CHECK:      stream.layers @Block[0, 4] backward op_index = 10 {
// CHECK-NEXT:   stream.prefetch ahead = 2 stream = h2d event = "Block.backward.weights"
// CHECK-NEXT:   stream.restore from = device
// CHECK-NEXT:   stream.wait_weights event = "Block.backward.weights"
// CHECK-NEXT:   stream.compute backward
// CHECK-NEXT:   stream.grad_return stream = d2h
// CHECK-NEXT: }

// DEFAULT: prefetch_depth = 2 : i64
// DEFAULT: stream.prefetch ahead = 1 stream = h2d
// ZERO: error: mtc-insert-prefetch: depth must be >= 1, got 0
// TWICE: error: 'stream.layers' op already has a prefetch or wait_weights
// NOSTEP: error: mtc-insert-prefetch: the module has no stream.step (run mtc-build-step first)
