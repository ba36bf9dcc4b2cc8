// mtc-plan-memory: buffers, offsets (multiples of 256), the peak, the budget.
// tiny-llama at [4, 64], M = 2, two weight slots, device checkpoints:
// model params 525312 B; a Block instance 2902016 B; activations
// 2 * 2 * 262144; checkpoints 4 * 2 * 262144.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64 micro-batches=2" --mtc-insert-recompute --mtc-insert-prefetch --mtc-place-optimizer --mtc-insert-offload="checkpoints=device" --mtc-plan-memory="budget=64MiB" | FileCheck %s
// Host checkpoints with M = 2: the boundary activations wait in host memory
// too (activations.host, M * 262144); the device keeps two input and two
// output activation slots (4 * 262144) and two checkpoint staging slots.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64 micro-batches=2" --mtc-insert-prefetch --mtc-insert-offload="checkpoints=host" --mtc-plan-memory | FileCheck %s --check-prefix=HOST
// Over budget: the smallest feasible budget with device checkpoints (fixed)
// is the peak; with checkpoints=auto it is the host-checkpoint peak.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64 micro-batches=2" --mtc-insert-prefetch --mtc-insert-offload="checkpoints=device" | not mtc-opt --mtc-plan-memory="budget=20MiB" 2>&1 | FileCheck %s --check-prefix=OVER
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64 micro-batches=2" --mtc-insert-prefetch --mtc-insert-offload="budget=20MiB" | not mtc-opt --mtc-plan-memory="budget=20MiB" 2>&1 | FileCheck %s --check-prefix=OVER-AUTO
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-plan-memory="budget=1000000" 2>&1 | FileCheck %s --check-prefix=LAYER

// CHECK:      stream.step @TinyLlama recompute = full checkpoints = device attributes {batch = 4 : i64, device_budget = 67108864 : i64, device_peak = 27484416 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, seq = 64 : i64} {
// CHECK-NEXT:   stream.buffer @model.weights kind = model_weights space = device bytes = 525312 offset = 0
// CHECK-NEXT:   stream.buffer @model.grads kind = model_grads space = device bytes = 525312 offset = 525312
// CHECK-NEXT:   stream.buffer @weights.0 kind = weights space = device bytes = 2902016 offset = 1050624
// CHECK-NEXT:   stream.buffer @weights.1 kind = weights space = device bytes = 2902016 offset = 3952640
// CHECK-NEXT:   stream.buffer @grads.0 kind = grads space = device bytes = 2902016 offset = 6854656
// CHECK-NEXT:   stream.buffer @grads.1 kind = grads space = device bytes = 2902016 offset = 9756672
// CHECK-NEXT:   stream.buffer @activations kind = activations space = device bytes = 1048576 offset = 12658688
// CHECK-NEXT:   stream.buffer @checkpoints kind = checkpoints space = device bytes = 2097152 offset = 13707264
// CHECK-NEXT:   stream.buffer @stage kind = stage space = device bytes = 4200704 offset = 15804416
// CHECK-NEXT:   stream.buffer @workspace kind = workspace space = device bytes = 7479296 offset = 20005120
// CHECK-NEXT:   stream.load_model_weights

// HOST:      stream.buffer @activations kind = activations space = device bytes = 1048576 offset = 12658688
// HOST-NEXT: stream.buffer @activations.host kind = activations space = host bytes = 524288
// HOST-NEXT: stream.buffer @checkpoints kind = checkpoints space = device bytes = 524288 offset = 13707264
// HOST-NEXT: stream.buffer @checkpoints.host kind = checkpoints space = host bytes = 2097152
// HOST-NEXT: stream.buffer @stage kind = stage space = device bytes = 4200704 offset = 14231552

// OVER: error: needs 26.3 MiB of device memory, budget is 20 MiB; smallest feasible budget with these options is 26.3 MiB
// OVER-AUTO: error: needs 24.8 MiB of device memory, budget is 20 MiB; smallest feasible budget with these options is 24.8 MiB
// LAYER: error: device budget of 976.6 KiB is smaller than the weights of one instance of layer Block (2.8 MiB); the model cannot stream through it; smallest feasible budget with these options is {{[0-9.]+ [KMG]iB}}
