// mtc-insert-recompute records the policy and each loop's checkpoint bytes,
// and checks the policy against how the module was differentiated.
// tiny-llama at [4, 64]: the input is 4*64*256*4 = 262144 bytes; with
// save=all the forward also returns 12 intermediates (4.7 MiB in all).
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" --mtc-insert-recompute="recompute=full" | FileCheck %s --check-prefix=FULL
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad --recompute none | mtc-opt --mtc-build-step="batch=4 seq=64" --mtc-insert-recompute | FileCheck %s --check-prefix=NONE
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad --recompute none | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-insert-recompute="recompute=full" 2>&1 | FileCheck %s --check-prefix=MISMATCH-FULL
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-insert-recompute="recompute=none" 2>&1 | FileCheck %s --check-prefix=MISMATCH-NONE
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad --recompute none | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-insert-recompute="budget=1MiB" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-insert-recompute="recompute=some" 2>&1 | FileCheck %s --check-prefix=BAD
// With save=selective the forward keeps q, k, v, the attention output (with
// its log-sum-exp), wo, gate and up: 256*4*(256+128+128+256+256+688+688)
// + 256*8*4 = 2727936 bytes with the input.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad --recompute selective | mtc-opt --mtc-build-step="batch=4 seq=64" --mtc-insert-recompute | FileCheck %s --check-prefix=SELECTIVE
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad --recompute selective | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-insert-recompute="recompute=none" 2>&1 | FileCheck %s --check-prefix=MISMATCH-SEL-NONE
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad --recompute selective | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-insert-recompute="recompute=full" 2>&1 | FileCheck %s --check-prefix=MISMATCH-SEL-FULL
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-insert-recompute="recompute=selective" 2>&1 | FileCheck %s --check-prefix=MISMATCH-SEL

// FULL: stream.step @TinyLlama recompute = full
// FULL: stream.layers @Block[0, 4] forward op_index = 2 attributes {checkpoint_bytes = 262144 : i64}
// FULL: stream.layers @Block[0, 4] backward op_index = 10 attributes {checkpoint_bytes = 262144 : i64}

// NONE: stream.step @TinyLlama recompute = none
// NONE: stream.layers @Block[0, 4] forward op_index = 2 attributes {checkpoint_bytes = 4923392 : i64}

// MISMATCH-FULL: error: 'stream.step' op recompute=full, but the forward of layer @Block keeps intermediates for its backward: the module was differentiated with mtc-autodiff save=all (recompute none)
// MISMATCH-NONE: error: 'stream.step' op recompute=none, but the backward of layer @Block recomputes its forward: the module was differentiated with mtc-autodiff save=input (recompute full)
// BUDGET: error: 'stream.step' op keeping every intermediate needs 18.8 MiB of checkpoints, more than the budget of 1 MiB; differentiate with mtc-autodiff save=input (recompute full)
// BAD: for the --recompute option: 'some' is not one of auto, full, none, selective

// SELECTIVE: stream.step @TinyLlama recompute = selective
// SELECTIVE: stream.layers @Block[0, 4] forward op_index = 2 attributes {checkpoint_bytes = 2727936 : i64}
// MISMATCH-SEL-NONE: error: 'stream.step' op recompute=none, but layer @Block keeps only some intermediates: the module was differentiated with mtc-autodiff save=selective (recompute selective)
// MISMATCH-SEL-FULL: error: 'stream.step' op recompute=full, but the forward of layer @Block keeps intermediates for its backward: the module was differentiated with mtc-autodiff save=selective (recompute selective)
// MISMATCH-SEL: error: 'stream.step' op recompute=selective, but the module was differentiated with mtc-autodiff save=input (recompute full); differentiate with mtc-autodiff save=selective
