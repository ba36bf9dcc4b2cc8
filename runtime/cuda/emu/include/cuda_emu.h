//===- cuda_emu.h - CUDA C kernels compiled as host C++ ---------*- C++ -*-===//
//
// Part of mtc. Force-included (or included first) into a CUDA C kernel source
// so that the *same text* NVRTC compiles for the GPU compiles with clang++ or
// g++ for the CPU emulator (runtime/cuda/emu/Emulator.h launches it). It
// provides:
//
//   keywords     __global__, __device__, __host__, __forceinline__,
//                __shared__, __constant__, __align__(n), __launch_bounds__
//   variables    threadIdx, blockIdx, blockDim, gridDim, warpSize
//   types        dim3, uint3, float4 & co. (CUDA's alignments),
//                __nv_bfloat16(2), __half(2) with bit-exact conversions
//   intrinsics   __syncthreads(_count/_and/_or), __syncwarp, __shfl*_sync,
//                __ballot/any/all_sync, __reduce_*_sync, __match_*_sync,
//                atomics, fences, __ldg & co., __expf & co., min/max, bit ops
//
// Shared memory. `__shared__` is `thread_local`: the fibers of a block all
// run on one OS thread, so a block's threads share the variable and blocks
// running at the same time on other OS threads do not. Such static shared
// arrays are bounds-checked by UBSan when indexed directly, but they are not
// poisoned between blocks (their addresses are not known to the emulator).
// Dynamic shared memory (`extern __shared__ T name[];`) is an exactly sized
// heap allocation per launch, filled with 0xff bytes before every block (NaN
// in f32, bf16 and f16) and bounds-checked by AddressSanitizer. The build
// maps each such name to MTC_EMU_DYNAMIC_SHARED (mtc_cuda_emu_kernels() in
// runtime/cuda/emu/CMakeLists.txt scans the source for them).
//
// Portable path. What a CPU cannot run -- inline PTX (asm), mma.sync, cp.async,
// ldmatrix -- must sit behind `#ifndef MTC_CUDA_PORTABLE`, with the portable
// code of the same tile algorithm in the `#else` branch. This header defines
// MTC_CUDA_PORTABLE; NVRTC compiles the tensor-core path (and the portable
// one too, when asked with -DMTC_CUDA_PORTABLE). See docs/cuda-emulator.md.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_CUDA_EMU_H
#define MTC_CUDA_EMU_H

// Standard headers first: the keyword macros below must not reach them.
#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "cuda_emu/Float16.h"
#include "cuda_emu/Intrinsics.h"
#include "cuda_emu/Math.h"
#include "cuda_emu/Vector.h"

/// Kernels test this to choose the portable path over inline PTX and tensor
/// cores (see above).
#define MTC_CUDA_PORTABLE 1
/// Defined only in the emulator. Kernels should not branch on it (that would
/// test code the GPU never runs); test MTC_CUDA_PORTABLE instead.
#define MTC_CUDA_EMU 1

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ thread_local
#define __constant__
#define __managed__
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

/// What a dynamic shared memory array's name is mapped to (by the build, with
/// `#define name MTC_EMU_DYNAMIC_SHARED` before the kernel text). The
/// declaration `extern __shared__ float4 smem[];` then reads
/// `extern thread_local float4 (*mtc_emu_dynamic_shared)[];`: a pointer,
/// defined by the emulator, to the running block's buffer. Hence every
/// dynamic shared array of a source file must have the same element type
/// (CUDA's idiom: one `unsigned char` array, cast), and be declared in a
/// function at global namespace scope (inside a namespace the declaration
/// would name that namespace's own, undefined, variable).
#define MTC_EMU_DYNAMIC_SHARED (*mtc_emu_dynamic_shared)

#endif // MTC_CUDA_EMU_H
