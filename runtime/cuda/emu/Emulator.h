//===- Emulator.h - Launching CUDA kernels on the CPU -----------*- C++ -*-===//
//
// Part of mtc. Runs a CUDA C kernel compiled as host C++ (with
// include/cuda_emu.h; this header itself brings only dim3 and the vector
// types into host code) under CUDA's execution model:
//
//   status = emu::launch(add_rmsnorm_f32, dim3(rows), dim3(128),
//                        D * sizeof(float), x, r, w, y, rows, D, eps);
//
// Blocks run one after another (or on `workers` OS threads: blocks are
// independent); the threads of a block are fibers (Fiber.h) switched at the
// synchronising intrinsics, so barriers, warp shuffles and votes have their
// CUDA semantics and their misuse is reported (see cuda_emu/Thread.h).
// Dynamic shared memory is allocated per launch with exactly the requested
// size and filled with 0xff bytes before each block.
//
// Errors are values: a launch that CUDA would refuse (no blocks, a block over
// 1024 threads, too much dynamic shared memory) or a kernel that breaks the
// execution model returns an error naming the kernel, block and thread.
// Memory errors inside a kernel are left to AddressSanitizer / UBSan (see
// test/cuda-emu): the emulator adds no bounds checks of its own.
//
// Thread-safe: launches from different OS threads run independently (each
// OS thread keeps its own fibers), as a CUDA stream per thread would.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_EMU_EMULATOR_H
#define MTC_RUNTIME_CUDA_EMU_EMULATOR_H

#include "cuda_emu/Vector.h"
#include "lib/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace mtc::emu {

/// The order in which the threads of a block start and resume after each
/// barrier. A kernel that is missing a __syncthreads typically reads what
/// another thread has not written yet in one of these orders.
enum class Schedule {
  Forward, ///< thread 0 first
  Reverse, ///< the last thread first
  Random,  ///< a permutation drawn from LaunchConfig::seed
};

/// The largest dynamic shared memory of a block on an sm_90 GPU (227 KiB,
/// after cudaFuncSetAttribute(MaxDynamicSharedMemorySize)).
constexpr size_t kMaxDynamicSharedOptIn = 232448;

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t dynamicShared = 0; ///< bytes
  /// The kernel's name in messages; null: the symbol name if the dynamic
  /// linker knows it, else its address.
  const char *name = nullptr;
  /// OS threads running blocks (1: the calling thread only).
  int workers = 1;
  Schedule schedule = Schedule::Forward;
  uint64_t seed = 0;
  /// The dynamic shared memory limit: CUDA's default 48 KiB, raised up to
  /// kMaxDynamicSharedOptIn as cudaFuncSetAttribute would.
  size_t maxDynamicShared = 48 * 1024;
  /// Bytes of stack per emulated thread (0: 128 KiB, 256 KiB under
  /// AddressSanitizer).
  size_t stackBytes = 0;
};

/// Runs body(arg) as every thread of every block of cfg.grid x cfg.block.
/// `kernel` identifies the kernel in messages (it is not called).
Status launchErased(const LaunchConfig &cfg, const void *kernel,
                    void (*body)(void *arg), void *arg);

/// Launches `kernel` with `args` converted to its parameter types (as a CUDA
/// launch copies them); every emulated thread gets its own copy.
template <typename... Params, typename... Args>
Status launch(LaunchConfig cfg, void (*kernel)(Params...), Args &&...args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "wrong number of kernel arguments");
  struct Payload {
    void (*kernel)(Params...);
    std::tuple<std::decay_t<Params>...> args;
  } payload{kernel, {std::forward<Args>(args)...}};
  auto body = [](void *p) {
    auto *pl = static_cast<Payload *>(p);
    std::apply(pl->kernel, pl->args);
  };
  return launchErased(cfg, reinterpret_cast<const void *>(kernel), body,
                      &payload);
}

/// The CUDA launch `kernel<<<grid, block, dynamicShared>>>(args...)`.
template <typename... Params, typename... Args>
Status launch(void (*kernel)(Params...), dim3 grid, dim3 block,
              size_t dynamicShared, Args &&...args) {
  LaunchConfig cfg;
  cfg.grid = grid;
  cfg.block = block;
  cfg.dynamicShared = dynamicShared;
  return launch(cfg, kernel, std::forward<Args>(args)...);
}

} // namespace mtc::emu

#endif // MTC_RUNTIME_CUDA_EMU_EMULATOR_H
