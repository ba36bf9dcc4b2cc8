// mtc-streaming-pipeline: the six streaming passes in the order the compiler
// runs them, with their options in one place. The result equals the passes
// run one by one (test/Transforms/mtc-plan-memory.mlir).
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-streaming-pipeline="batch=4 seq=64 micro-batches=2 checkpoints=device budget=64MiB" | FileCheck %s
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64 micro-batches=2" --mtc-insert-recompute --mtc-insert-prefetch --mtc-place-optimizer --mtc-insert-offload="checkpoints=device" --mtc-plan-memory="budget=64MiB" | FileCheck %s
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | not mtc-opt --mtc-streaming-pipeline="batch=4 seq=64 budget=lots" 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK: stream.step @TinyLlama recompute = full checkpoints = device attributes {batch = 4 : i64, device_budget = 67108864 : i64, device_peak = 27484416 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, seq = 64 : i64} {
// CHECK: stream.buffer @workspace kind = workspace space = device bytes = 7479296 offset = 20005120
// CHECK: stream.layers @Block[0, 4] forward
// CHECK-NEXT: stream.optimizer_update ahead = 1
// CHECK: stream.layers @Block[0, 4] backward

// BAD: error: budget: invalid size 'lots'
