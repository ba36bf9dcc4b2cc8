//===- Runtime.h - The emulator's entry points for kernel code --*- C++ -*-===//
//
// Part of mtc. The interface between kernel code (the inline intrinsics of
// Intrinsics.h) and the emulator that runs it (runtime/cuda/emu/Emulator.cpp):
// the running thread's coordinates and the synchronising operations, which
// suspend the calling fiber. No CUDA keyword or built-in variable macros
// here, so that the emulator itself can include it.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_CUDA_EMU_RUNTIME_H
#define MTC_CUDA_EMU_RUNTIME_H

#include "cuda_emu/Vector.h"

#include <cstdint>

namespace mtc::emu::detail {

/// The source location of a synchronising call.
struct Site {
  const char *file;
  unsigned line;
  const char *function;
};

#define MTC_EMU_HERE                                                           \
  ::mtc::emu::detail::Site {                                                   \
    __builtin_FILE(), __builtin_LINE(), __builtin_FUNCTION()                   \
  }

/// The coordinates every thread of one block shares.
struct BlockCoords {
  uint3 index; ///< blockIdx
  dim3 dim;    ///< blockDim
  dim3 grid;   ///< gridDim
};

/// One emulated thread as kernel code sees it.
struct ThreadCoords {
  uint3 index; ///< threadIdx
  const BlockCoords *block;
};

/// The thread whose fiber runs on this OS thread; null outside a launch.
extern __thread ThreadCoords *currentThread;

/// Reports kernel-only code (threadIdx, __syncthreads, ...) called outside a
/// launch and aborts.
[[noreturn]] void outsideKernel(const char *what, Site site);

inline const ThreadCoords &current(Site site = MTC_EMU_HERE) {
  ThreadCoords *t = currentThread;
  if (!t)
    outsideKernel("threadIdx/blockIdx/blockDim/gridDim", site);
  return *t;
}

/// __syncthreads and its reducing variants.
enum class BarrierKind : unsigned char { Plain, Count, And, Or };
/// Waits at the block barrier; returns the count / and / or of `pred` over
/// the block (0 for Plain).
int syncThreads(BarrierKind kind, int pred, Site site);

/// The warp collectives. Shuffles carry up to 8 bytes of value.
enum class WarpOpKind : unsigned char {
  ShflIdx,
  ShflUp,
  ShflDown,
  ShflXor,
  Ballot,
  Any,
  All,
  Sync,
  ReduceAdd,
  ReduceMinU,
  ReduceMinS,
  ReduceMaxU,
  ReduceMaxS,
  ReduceAnd,
  ReduceOr,
  ReduceXor,
  MatchAny,
  MatchAll,
};

/// One lane's arrival at a warp collective.
struct WarpOp {
  WarpOpKind kind;
  unsigned mask;
  int operand;    ///< source lane, delta or lane mask (shuffles)
  int width;      ///< shuffle width (a power of two <= 32)
  unsigned size;  ///< bytes of `value` that matter (shuffles, matches)
  uint64_t value; ///< the lane's value or predicate
  Site site;
};

struct WarpResult {
  uint64_t value;
  int pred; ///< __match_all_sync's predicate
};

/// Waits until the collective completes and returns this lane's result.
WarpResult warpCollective(const WarpOp &op);

/// The lanes of the calling thread's warp that have not exited.
unsigned activeMask(Site site);

/// Lets the other threads of the block run (atomicCAS failure,
/// __nanosleep): a thread spinning on another thread's store progresses.
void yield(Site site);

/// __trap(): ends the launch with an error naming the thread.
[[noreturn]] void trap(Site site);

} // namespace mtc::emu::detail

#endif // MTC_CUDA_EMU_RUNTIME_H
