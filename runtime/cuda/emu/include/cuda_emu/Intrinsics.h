//===- Intrinsics.h - CUDA's execution model: the kernel side ---*- C++ -*-===//
//
// Part of mtc. What a kernel sees of the emulator: its coordinates
// (threadIdx, blockIdx, blockDim, gridDim), block barriers, warp collectives
// (shuffles, votes, reductions, matches), atomics and fences. The
// synchronising calls suspend the calling fiber (Runtime.h) and are
// implemented in runtime/cuda/emu/Emulator.cpp, which checks their semantics:
//
// - __syncthreads releases when every non-exited thread of the block waits
//   at the same __syncthreads (same file and line); threads waiting at
//   different ones, or a barrier that can never be reached, is an error
//   naming the kernel, block, threads and source lines.
// - A warp collective completes when every non-exited lane named in its mask
//   has arrived at the same kind of collective with the same mask (and
//   width); the last to arrive computes every lane's result. A lane outside
//   the mask calling it, a shuffle reading a lane that does not take part,
//   or lanes that never arrive, is an error.
//
// Each synchronising call takes a defaulted trailing Site argument (file,
// line and function of the call, filled in at the call site) for the
// messages; kernel code never passes it.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_CUDA_EMU_INTRINSICS_H
#define MTC_CUDA_EMU_INTRINSICS_H

#include "cuda_emu/Runtime.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mtc::emu::detail {

template <typename T> inline uint64_t toBits(T v) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8,
                "warp collectives exchange trivially copyable values of at "
                "most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T> inline T fromBits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}
template <typename T>
inline T shuffle(WarpOpKind kind, unsigned mask, T var, int operand, int width,
                 Site site) {
  WarpOp op{kind, mask, operand, width, sizeof(T), toBits(var), site};
  return fromBits<T>(warpCollective(op).value);
}
inline uint64_t vote(WarpOpKind kind, unsigned mask, uint64_t value,
                     Site site) {
  return warpCollective(WarpOp{kind, mask, 0, 32, 8, value, site}).value;
}

} // namespace mtc::emu::detail

//===----------------------------------------------------------------------===//
// Built-in variables
//===----------------------------------------------------------------------===//

#define threadIdx (::mtc::emu::detail::current().index)
#define blockIdx (::mtc::emu::detail::current().block->index)
#define blockDim (::mtc::emu::detail::current().block->dim)
#define gridDim (::mtc::emu::detail::current().block->grid)
constexpr int warpSize = 32;

//===----------------------------------------------------------------------===//
// Block barriers
//===----------------------------------------------------------------------===//

inline void __syncthreads(mtc::emu::detail::Site site = MTC_EMU_HERE) {
  mtc::emu::detail::syncThreads(mtc::emu::detail::BarrierKind::Plain, 0, site);
}
inline int __syncthreads_count(int pred,
                               mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return mtc::emu::detail::syncThreads(mtc::emu::detail::BarrierKind::Count,
                                       pred, site);
}
inline int __syncthreads_and(int pred,
                             mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return mtc::emu::detail::syncThreads(mtc::emu::detail::BarrierKind::And, pred,
                                       site);
}
inline int __syncthreads_or(int pred,
                            mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return mtc::emu::detail::syncThreads(mtc::emu::detail::BarrierKind::Or, pred,
                                       site);
}

//===----------------------------------------------------------------------===//
// Warp collectives
//===----------------------------------------------------------------------===//

template <typename T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize,
                     mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return mtc::emu::detail::shuffle(mtc::emu::detail::WarpOpKind::ShflIdx, mask,
                                   var, srcLane, width, site);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta,
                        int width = warpSize,
                        mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return mtc::emu::detail::shuffle(mtc::emu::detail::WarpOpKind::ShflUp, mask,
                                   var, static_cast<int>(delta), width, site);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta,
                          int width = warpSize,
                          mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return mtc::emu::detail::shuffle(mtc::emu::detail::WarpOpKind::ShflDown, mask,
                                   var, static_cast<int>(delta), width, site);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask,
                         int width = warpSize,
                         mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return mtc::emu::detail::shuffle(mtc::emu::detail::WarpOpKind::ShflXor, mask,
                                   var, laneMask, width, site);
}

inline void __syncwarp(unsigned mask = 0xffffffffu,
                       mtc::emu::detail::Site site = MTC_EMU_HERE) {
  mtc::emu::detail::vote(mtc::emu::detail::WarpOpKind::Sync, mask, 0, site);
}
inline unsigned __ballot_sync(unsigned mask, int pred,
                              mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return static_cast<unsigned>(mtc::emu::detail::vote(
      mtc::emu::detail::WarpOpKind::Ballot, mask, pred != 0, site));
}
inline int __any_sync(unsigned mask, int pred,
                      mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return static_cast<int>(mtc::emu::detail::vote(
      mtc::emu::detail::WarpOpKind::Any, mask, pred != 0, site));
}
inline int __all_sync(unsigned mask, int pred,
                      mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return static_cast<int>(mtc::emu::detail::vote(
      mtc::emu::detail::WarpOpKind::All, mask, pred != 0, site));
}
/// The lanes of the warp that have not exited. (A GPU reports the lanes
/// executing this instruction together, which the emulator cannot know; use
/// explicit masks.)
inline unsigned __activemask(mtc::emu::detail::Site site = MTC_EMU_HERE) {
  return mtc::emu::detail::activeMask(site);
}

#define MTC_EMU_REDUCE(NAME, T, KIND)                                          \
  inline T NAME(unsigned mask, T value,                                        \
                mtc::emu::detail::Site site = MTC_EMU_HERE) {                  \
    return static_cast<T>(mtc::emu::detail::vote(                              \
        mtc::emu::detail::WarpOpKind::KIND, mask,                              \
        static_cast<uint64_t>(static_cast<unsigned>(value)), site));           \
  }
MTC_EMU_REDUCE(__reduce_add_sync, unsigned, ReduceAdd)
MTC_EMU_REDUCE(__reduce_add_sync, int, ReduceAdd)
MTC_EMU_REDUCE(__reduce_min_sync, unsigned, ReduceMinU)
MTC_EMU_REDUCE(__reduce_min_sync, int, ReduceMinS)
MTC_EMU_REDUCE(__reduce_max_sync, unsigned, ReduceMaxU)
MTC_EMU_REDUCE(__reduce_max_sync, int, ReduceMaxS)
MTC_EMU_REDUCE(__reduce_and_sync, unsigned, ReduceAnd)
MTC_EMU_REDUCE(__reduce_or_sync, unsigned, ReduceOr)
MTC_EMU_REDUCE(__reduce_xor_sync, unsigned, ReduceXor)
#undef MTC_EMU_REDUCE

template <typename T>
inline unsigned __match_any_sync(unsigned mask, T value,
                                 mtc::emu::detail::Site site = MTC_EMU_HERE) {
  using namespace mtc::emu::detail;
  WarpOp op{WarpOpKind::MatchAny, mask, 0, 32, sizeof(T), toBits(value), site};
  return static_cast<unsigned>(warpCollective(op).value);
}
template <typename T>
inline unsigned __match_all_sync(unsigned mask, T value, int *pred,
                                 mtc::emu::detail::Site site = MTC_EMU_HERE) {
  using namespace mtc::emu::detail;
  WarpOp op{WarpOpKind::MatchAll, mask, 0, 32, sizeof(T), toBits(value), site};
  WarpResult r = warpCollective(op);
  *pred = r.pred;
  return static_cast<unsigned>(r.value);
}

//===----------------------------------------------------------------------===//
// Atomics (relaxed, like CUDA's) and fences
//===----------------------------------------------------------------------===//

namespace mtc::emu::detail {
template <typename T> inline T atomicLoad(T *p) {
  T v;
  __atomic_load(p, &v, __ATOMIC_RELAXED);
  return v;
}
/// Applies old -> f(old) atomically with a compare-exchange loop; returns old.
template <typename T, typename F> inline T atomicUpdate(T *p, F f) {
  T old = atomicLoad(p);
  T desired;
  do {
    desired = f(old);
  } while (!__atomic_compare_exchange(p, &old, &desired, false,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
} // namespace mtc::emu::detail

#define MTC_EMU_ATOMIC_INT(T)                                                  \
  inline T atomicAdd(T *p, T v) {                                              \
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);                         \
  }                                                                            \
  inline T atomicSub(T *p, T v) {                                              \
    return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED);                         \
  }                                                                            \
  inline T atomicExch(T *p, T v) {                                             \
    return __atomic_exchange_n(p, v, __ATOMIC_RELAXED);                        \
  }                                                                            \
  inline T atomicAnd(T *p, T v) {                                              \
    return __atomic_fetch_and(p, v, __ATOMIC_RELAXED);                         \
  }                                                                            \
  inline T atomicOr(T *p, T v) {                                               \
    return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);                          \
  }                                                                            \
  inline T atomicXor(T *p, T v) {                                              \
    return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED);                         \
  }                                                                            \
  inline T atomicMin(T *p, T v) {                                              \
    return mtc::emu::detail::atomicUpdate(p,                                   \
                                          [v](T o) { return o < v ? o : v; }); \
  }                                                                            \
  inline T atomicMax(T *p, T v) {                                              \
    return mtc::emu::detail::atomicUpdate(p,                                   \
                                          [v](T o) { return o > v ? o : v; }); \
  }                                                                            \
  inline T atomicCAS(T *p, T compare, T v,                                     \
                     mtc::emu::detail::Site site = MTC_EMU_HERE) {             \
    T old = compare;                                                           \
    if (!__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED,      \
                                     __ATOMIC_RELAXED))                        \
      mtc::emu::detail::yield(site); /* a spinning thread lets others run */   \
    return old;                                                                \
  }
MTC_EMU_ATOMIC_INT(int)
MTC_EMU_ATOMIC_INT(unsigned int)
MTC_EMU_ATOMIC_INT(unsigned long long)
MTC_EMU_ATOMIC_INT(long long)
#undef MTC_EMU_ATOMIC_INT

inline unsigned short atomicCAS(unsigned short *p, unsigned short compare,
                                unsigned short v,
                                mtc::emu::detail::Site site = MTC_EMU_HERE) {
  unsigned short old = compare;
  if (!__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED,
                                   __ATOMIC_RELAXED))
    mtc::emu::detail::yield(site);
  return old;
}
inline float atomicAdd(float *p, float v) {
  return mtc::emu::detail::atomicUpdate(p, [v](float o) { return o + v; });
}
inline double atomicAdd(double *p, double v) {
  return mtc::emu::detail::atomicUpdate(p, [v](double o) { return o + v; });
}
inline float atomicExch(float *p, float v) {
  float old;
  __atomic_exchange(p, &v, &old, __ATOMIC_RELAXED);
  return old;
}
/// ((old >= limit) ? 0 : old + 1), as CUDA defines it.
inline unsigned atomicInc(unsigned *p, unsigned limit) {
  return mtc::emu::detail::atomicUpdate(
      p, [limit](unsigned o) { return o >= limit ? 0u : o + 1; });
}
/// ((old == 0 || old > limit) ? limit : old - 1), as CUDA defines it.
inline unsigned atomicDec(unsigned *p, unsigned limit) {
  return mtc::emu::detail::atomicUpdate(
      p, [limit](unsigned o) { return (o == 0 || o > limit) ? limit : o - 1; });
}
// The _block and _system scoped variants have the same effect here.
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

inline void __nanosleep(unsigned, mtc::emu::detail::Site site = MTC_EMU_HERE) {
  mtc::emu::detail::yield(site);
}
[[noreturn]] inline void __trap(mtc::emu::detail::Site site = MTC_EMU_HERE) {
  mtc::emu::detail::trap(site);
}

#endif // MTC_CUDA_EMU_INTRINSICS_H
