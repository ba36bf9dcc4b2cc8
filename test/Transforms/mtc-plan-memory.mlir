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

// CHECK:      stream.step @TinyLlama attributes {batch = 4 : i64, checkpoints = "device", device_budget = 67108864 : i64, device_peak = 27484416 : i64, micro_batches = 2 : i64, prefetch_depth = 2 : i64, recompute = "full", seq = 64 : i64} {
// CHECK-NEXT:   stream.buffer @model.weights {bytes = 525312 : i64, kind = "model_weights", offset = 0 : i64, space = "device"}
// CHECK-NEXT:   stream.buffer @model.grads {bytes = 525312 : i64, kind = "model_grads", offset = 525312 : i64, space = "device"}
// CHECK-NEXT:   stream.buffer @weights.0 {bytes = 2902016 : i64, kind = "weights", offset = 1050624 : i64, space = "device"}
// CHECK-NEXT:   stream.buffer @weights.1 {bytes = 2902016 : i64, kind = "weights", offset = 3952640 : i64, space = "device"}
// CHECK-NEXT:   stream.buffer @grads.0 {bytes = 2902016 : i64, kind = "grads", offset = 6854656 : i64, space = "device"}
// CHECK-NEXT:   stream.buffer @grads.1 {bytes = 2902016 : i64, kind = "grads", offset = 9756672 : i64, space = "device"}
// CHECK-NEXT:   stream.buffer @activations {bytes = 1048576 : i64, kind = "activations", offset = 12658688 : i64, space = "device"}
// CHECK-NEXT:   stream.buffer @checkpoints {bytes = 2097152 : i64, kind = "checkpoints", offset = 13707264 : i64, space = "device"}
// CHECK-NEXT:   stream.buffer @stage {bytes = 4200704 : i64, kind = "stage", offset = 15804416 : i64, space = "device"}
// CHECK-NEXT:   stream.buffer @workspace {bytes = 7479296 : i64, kind = "workspace", offset = 20005120 : i64, space = "device"}
// CHECK-NEXT:   stream.load_model_weights

// HOST:      stream.buffer @activations {bytes = 1048576 : i64, kind = "activations", offset = 12658688 : i64, space = "device"}
// HOST-NEXT: stream.buffer @activations.host {bytes = 524288 : i64, kind = "activations", space = "host"}
// HOST-NEXT: stream.buffer @checkpoints {bytes = 524288 : i64, kind = "checkpoints", offset = 13707264 : i64, space = "device"}
// HOST-NEXT: stream.buffer @checkpoints.host {bytes = 2097152 : i64, kind = "checkpoints", space = "host"}
// HOST-NEXT: stream.buffer @stage {bytes = 4200704 : i64, kind = "stage", offset = 14231552 : i64, space = "device"}

// OVER: error: needs 26.3 MiB of device memory, budget is 20 MiB; smallest feasible budget with these options is 26.3 MiB
// OVER-AUTO: error: needs 24.8 MiB of device memory, budget is 20 MiB; smallest feasible budget with these options is 24.8 MiB
// LAYER: error: device budget of 976.6 KiB is smaller than the weights of one instance of layer Block (2.8 MiB); the model cannot stream through it; smallest feasible budget with these options is {{[0-9.]+ [KMG]iB}}
