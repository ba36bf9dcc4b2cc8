// mtc-insert-offload: checkpoints on the device or in host memory.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" --mtc-insert-offload="checkpoints=host" | FileCheck %s --check-prefix=HOST
// auto: the device plan (about 22.7 MiB at M = 1) fits 64 MiB, not 20 MiB.
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" --mtc-insert-prefetch --mtc-insert-offload="budget=64MiB" | FileCheck %s --check-prefix=FITS
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" --mtc-insert-prefetch --mtc-insert-offload="budget=20MiB" | FileCheck %s --check-prefix=HOST
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-insert-offload="checkpoints=disk" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: mtc compile %examples/tiny-llama.mt --emit=mlir-grad | mtc-opt --mtc-build-step="batch=4 seq=64" | not mtc-opt --mtc-insert-offload="budget=lots" 2>&1 | FileCheck %s --check-prefix=BADSIZE

// HOST: stream.step @TinyLlama recompute = {{.*}} checkpoints = host
// HOST: stream.save to = host
// HOST: stream.restore from = host

// FITS: stream.step @TinyLlama recompute = {{.*}} checkpoints = device attributes {{{.*}}checkpoints_auto
// FITS: stream.save to = device
// FITS: stream.restore from = device

// BAD: for the --checkpoints option: 'disk' is not one of device, host, auto
// BADSIZE: error: budget: invalid size 'lots' (expected bytes or a number with KiB, MiB, GiB or TiB, e.g. 64MiB, 1.5GiB)
