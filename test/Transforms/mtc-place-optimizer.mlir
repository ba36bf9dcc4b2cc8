// mtc-place-optimizer: the deferred AdamW update of instance i + ahead runs
// before its prefetch, in forward loops only.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=2 seq=16" --mtc-insert-prefetch="depth=2" --mtc-place-optimizer | FileCheck %s
// Without prefetch (one weight slot): ahead = 0, first in the body.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=2 seq=16" --mtc-place-optimizer | FileCheck %s --check-prefix=NOPREFETCH
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=2 seq=16" --mtc-place-optimizer | not mtc-opt --mtc-place-optimizer 2>&1 | FileCheck %s --check-prefix=TWICE

// CHECK:      stream.layers @Block[0, 4] forward op_index = 2 {
// CHECK-NEXT:   stream.optimizer_update ahead = 1
// CHECK-NEXT:   stream.prefetch ahead = 1
// CHECK:      stream.layers @Block[0, 4] backward op_index = 10 {
// CHECK-NOT:    stream.optimizer_update
// CHECK:      stream.return_model_grads

// NOPREFETCH:      forward op_index = 2 {
// NOPREFETCH-NEXT:   stream.optimizer_update ahead = 0
// NOPREFETCH-NEXT:   stream.save to = device
// TWICE: error: 'stream.layers' op already has an optimizer_update
