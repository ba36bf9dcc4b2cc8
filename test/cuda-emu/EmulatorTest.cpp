//===- EmulatorTest.cpp - The CUDA emulator's execution model -------------===//
//
// Part of mtc. Kernels written inline (cuda_emu.h included first) and run by
// runtime/cuda/emu: coordinates, barriers and their schedules, shared memory
// per block, every warp collective against a reference written from the CUDA
// Programming Guide and the PTX ISA, atomics under contention, and each
// misuse the emulator reports. Built twice: with ASan + UBSan over the
// assembly fibers, and without sanitizers over swapcontext.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "cuda_emu.h"
#include "runtime/cuda/emu/Emulator.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

// Every dynamic shared array of this file is `unsigned` (cuda_emu.h).
#define dynWords MTC_EMU_DYNAMIC_SHARED

using mtc::Status;
namespace emu = mtc::emu;

namespace {

/// Fails the test unless `s` is an error whose message contains every part.
void expectError(const Status &s, const std::vector<std::string> &parts) {
  ASSERT_FALSE(s.ok()) << "the launch succeeded";
  for (const std::string &p : parts)
    EXPECT_NE(s.message().find(p), std::string::npos)
        << "missing \"" << p << "\" in: " << s.message();
}

emu::LaunchConfig config(dim3 grid, dim3 block, size_t smem = 0) {
  emu::LaunchConfig cfg;
  cfg.grid = grid;
  cfg.block = block;
  cfg.dynamicShared = smem;
  return cfg;
}

const emu::Schedule kSchedules[] = {
    emu::Schedule::Forward, emu::Schedule::Reverse, emu::Schedule::Random};

} // namespace

#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    ASSERT_TRUE(s_.ok()) << s_.message();                                      \
  } while (0)

// The kernels are ordinary external functions, so that the emulator finds
// their names in the dynamic symbol table for its messages.

//===----------------------------------------------------------------------===//
// Coordinates
//===----------------------------------------------------------------------===//

__global__ void writeCoordinates(unsigned *out) {
  unsigned block =
      blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned thread =
      threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned *o =
      out + 12 * (block * blockDim.x * blockDim.y * blockDim.z + thread);
  unsigned v[12] = {threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x,
                    blockIdx.y,  blockIdx.z,  blockDim.x,  blockDim.y,
                    blockDim.z,  gridDim.x,   gridDim.y,   gridDim.z};
  for (int i = 0; i < 12; ++i)
    o[i] = v[i];
}

TEST(CudaEmulatorTest, Coordinates) {
  dim3 grid(3, 2, 2), block(5, 3, 2);
  std::vector<unsigned> out(12 * 12 * 30, 0xdead);
  ASSERT_OK(emu::launch(writeCoordinates, grid, block, 0, out.data()));
  size_t i = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 2; ++tz)
          for (unsigned ty = 0; ty < 3; ++ty)
            for (unsigned tx = 0; tx < 5; ++tx, i += 12) {
              std::vector<unsigned> got(out.begin() + i, out.begin() + i + 12);
              std::vector<unsigned> want = {tx, ty, tz, bx, by, bz,
                                            5,  3,  2,  3,  2,  2};
              ASSERT_EQ(got, want) << "record " << i / 12;
            }
}

//===----------------------------------------------------------------------===//
// __syncthreads
//===----------------------------------------------------------------------===//

/// Every phase passes each thread's value to its left neighbour through
/// shared memory; the second barrier keeps a phase's writes from overwriting
/// values the previous phase has not read yet.
__global__ void rotate(int *out, int phases, int secondBarrier) {
  __shared__ int s[256];
  const int t = threadIdx.x, n = blockDim.x;
  int v = t + 1000 * static_cast<int>(blockIdx.x);
  for (int p = 0; p < phases; ++p) {
    s[t] = v;
    __syncthreads();
    v = s[(t + 1) % n] + 1;
    if (secondBarrier)
      __syncthreads();
  }
  out[blockIdx.x * n + t] = v;
}

std::vector<int> rotateExpected(int blocks, int n, int phases) {
  std::vector<int> want;
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < n; ++t)
      want.push_back((t + phases) % n + 1000 * b + phases);
  return want;
}

TEST(CudaEmulatorTest, BarrierPhasesInEverySchedule) {
  for (emu::Schedule schedule : kSchedules) {
    for (int workers : {1, 3}) {
      std::vector<int> out(6 * 96);
      emu::LaunchConfig cfg = config(6, 96);
      cfg.schedule = schedule;
      cfg.seed = 7;
      cfg.workers = workers;
      ASSERT_OK(emu::launch(cfg, rotate, out.data(), 5, 1));
      EXPECT_EQ(out, rotateExpected(6, 96, 5))
          << "schedule " << static_cast<int>(schedule) << ", workers "
          << workers;
    }
  }
}

/// Reads the right neighbour's slot, then overwrites its own: without the
/// second barrier a neighbour that runs first has overwritten it already.
__global__ void readThenOverwrite(int *out, int secondBarrier) {
  __shared__ int s[256];
  const int t = threadIdx.x, n = blockDim.x;
  s[t] = t;
  __syncthreads();
  const int v = t + 1 < n ? s[t + 1] : -1;
  if (secondBarrier)
    __syncthreads();
  s[t] = 1000 + t;
  out[t] = v;
}

TEST(CudaEmulatorTest, ReverseScheduleExposesAMissingBarrier) {
  std::vector<int> want(64);
  for (int t = 0; t < 64; ++t)
    want[t] = t + 1 < 64 ? t + 1 : -1;
  for (int secondBarrier : {1, 0}) {
    for (emu::Schedule schedule : kSchedules) {
      std::vector<int> out(64);
      emu::LaunchConfig cfg = config(1, 64);
      cfg.schedule = schedule;
      ASSERT_OK(emu::launch(cfg, readThenOverwrite, out.data(), secondBarrier));
      // Thread 0 first happens to work; the last thread first does not.
      if (secondBarrier || schedule == emu::Schedule::Forward) {
        EXPECT_EQ(out, want) << static_cast<int>(schedule);
      } else if (schedule == emu::Schedule::Reverse) {
        EXPECT_NE(out, want);
      }
    }
  }
}

__global__ void barrierReductions(int *out) {
  const int t = threadIdx.x;
  out[0 + 4 * t] = __syncthreads_count(t % 3 == 0);
  out[1 + 4 * t] = __syncthreads_and(t < 1000);
  out[2 + 4 * t] = __syncthreads_and(t != 17);
  out[3 + 4 * t] = __syncthreads_or(t == 17);
}

TEST(CudaEmulatorTest, SyncthreadsCountAndOr) {
  std::vector<int> out(4 * 100);
  ASSERT_OK(emu::launch(barrierReductions, 1, 100, 0, out.data()));
  for (int t = 0; t < 100; ++t) {
    EXPECT_EQ(out[4 * t], 34);
    EXPECT_EQ(out[4 * t + 1], 1);
    EXPECT_EQ(out[4 * t + 2], 0);
    EXPECT_EQ(out[4 * t + 3], 1);
  }
}

/// Threads that have exited do not hold a barrier up (counting semantics).
__global__ void earlyExit(int *out) {
  __shared__ int s[64];
  if (threadIdx.x >= 40)
    return;
  s[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = s[39 - threadIdx.x];
}

TEST(CudaEmulatorTest, ExitedThreadsDoNotBlockABarrier) {
  std::vector<int> out(64, -1);
  ASSERT_OK(emu::launch(earlyExit, 1, 64, 0, out.data()));
  for (int t = 0; t < 40; ++t)
    EXPECT_EQ(out[t], 39 - t);
  EXPECT_EQ(out[40], -1);
}

//===----------------------------------------------------------------------===//
// Shared memory
//===----------------------------------------------------------------------===//

__global__ void staticSharedPerBlock(int *out) {
  __shared__ int value;
  if (threadIdx.x == 0)
    value = static_cast<int>(blockIdx.x);
  __syncthreads();
  for (int i = 0; i < 4; ++i) // let concurrent blocks interleave
    __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = value;
}

TEST(CudaEmulatorTest, StaticSharedMemoryIsPerBlock) {
  for (int workers : {1, 4}) {
    std::vector<int> out(64 * 32, -1);
    emu::LaunchConfig cfg = config(64, 32);
    cfg.workers = workers;
    ASSERT_OK(emu::launch(cfg, staticSharedPerBlock, out.data()));
    for (int b = 0; b < 64; ++b)
      for (int t = 0; t < 32; ++t)
        ASSERT_EQ(out[b * 32 + t], b) << "workers " << workers;
  }
}

/// Reads dynamic shared memory before writing it, then dirties it.
__global__ void readDynamicBeforeWrite(unsigned *out, int words) {
  extern __shared__ unsigned dynWords[];
  for (int i = threadIdx.x; i < words; i += blockDim.x)
    out[blockIdx.x * words + i] = dynWords[i];
  __syncthreads();
  for (int i = threadIdx.x; i < words; i += blockDim.x)
    dynWords[i] = blockIdx.x + 1;
}

TEST(CudaEmulatorTest, DynamicSharedMemoryIsPoisonedBeforeEveryBlock) {
  const int words = 37;
  for (int workers : {1, 2}) {
    std::vector<unsigned> out(8 * words, 0);
    emu::LaunchConfig cfg = config(8, 32, words * sizeof(unsigned));
    cfg.workers = workers;
    ASSERT_OK(emu::launch(cfg, readDynamicBeforeWrite, out.data(), words));
    for (unsigned v : out)
      ASSERT_EQ(v, 0xffffffffu); // NaN as a float, bf16 or fp16
  }
  float asFloat;
  unsigned poison = 0xffffffffu;
  std::memcpy(&asFloat, &poison, sizeof asFloat);
  EXPECT_TRUE(std::isnan(asFloat));
}

__global__ void dynamicSharedAlignment(unsigned long long *out) {
  extern __shared__ unsigned dynWords[];
  out[0] = reinterpret_cast<unsigned long long>(&dynWords[0]);
}

TEST(CudaEmulatorTest, DynamicSharedMemoryLimit) {
  unsigned long long address = 1;
  ASSERT_OK(emu::launch(dynamicSharedAlignment, 1, 1, 48 * 1024, &address));
  EXPECT_EQ(address % 128, 0u);
  expectError(
      emu::launch(dynamicSharedAlignment, 1, 1, 48 * 1024 + 4, &address),
      {"49156 bytes of dynamic shared memory exceed the limit of "
       "49152",
       "cudaFuncAttributeMaxDynamicSharedMemorySize"});
  emu::LaunchConfig cfg = config(1, 1, 100 * 1024);
  cfg.maxDynamicShared = emu::kMaxDynamicSharedOptIn;
  ASSERT_OK(emu::launch(cfg, dynamicSharedAlignment, &address));
  cfg.maxDynamicShared = emu::kMaxDynamicSharedOptIn + 1;
  expectError(emu::launch(cfg, dynamicSharedAlignment, &address),
              {"exceeds the GPU's 232448"});
}

//===----------------------------------------------------------------------===//
// Shuffles against a reference
//===----------------------------------------------------------------------===//

enum ShuffleOp { Idx, Up, Down, Xor };

struct ShuffleCase {
  ShuffleOp op;
  int width;
  unsigned maskLow, maskHigh; ///< the mask of lanes 0-15 and of lanes 16-31
};

/// Lanes named by neither mask exit at once; the others shuffle an 8-byte
/// value with their own operand.
__global__ void shuffleKernel(ShuffleCase c, const int *operand,
                              long long *out) {
  const int t = threadIdx.x, lane = t % 32;
  const unsigned mask = lane < 16 ? c.maskLow : c.maskHigh;
  if (!(mask >> lane & 1u))
    return;
  const long long v = 1000003LL * (t + 1);
  long long r = 0;
  switch (c.op) {
  case Idx:
    r = __shfl_sync(mask, v, operand[t], c.width);
    break;
  case Up:
    r = __shfl_up_sync(mask, v, static_cast<unsigned>(operand[t]), c.width);
    break;
  case Down:
    r = __shfl_down_sync(mask, v, static_cast<unsigned>(operand[t]), c.width);
    break;
  case Xor:
    r = __shfl_xor_sync(mask, v, operand[t], c.width);
    break;
  }
  out[t] = r;
}

/// The source lane as the CUDA Programming Guide describes each shuffle
/// (lane's own value when the source lies outside its group of `width`).
int shuffleSource(ShuffleOp op, int lane, int b, int width) {
  const int group = lane / width * width;
  switch (op) {
  case Idx:
    return group + b % width;
  case Up:
    return lane - b >= group ? lane - b : lane;
  case Down:
    return lane + b < group + width ? lane + b : lane;
  case Xor:
    return (lane ^ b) < group + width ? lane ^ b : lane;
  }
  return lane;
}

TEST(CudaEmulatorTest, ShufflesMatchTheReference) {
  std::mt19937 rng(3);
  int checked = 0;
  for (ShuffleOp op : {Idx, Up, Down, Xor}) {
    for (int width : {1, 2, 4, 8, 16, 32}) {
      // Full warps, and two independent half-warp groups (widths <= 16).
      std::vector<std::pair<unsigned, unsigned>> masks = {
          {0xffffffffu, 0xffffffffu}};
      if (width <= 16)
        masks.push_back({0x0000ffffu, 0xffff0000u});
      for (auto [low, high] : masks) {
        for (int uniform = 0; uniform < 2; ++uniform) {
          const int threads = 64;
          std::vector<int> operand(threads);
          int shared = static_cast<int>(rng() % 32);
          for (int &o : operand) {
            int b = uniform ? shared : static_cast<int>(rng() % 32);
            // Split masks: an xor must stay within the 16-lane half.
            o = (low != high && op == Xor) ? b % 16 : b;
          }
          std::vector<long long> out(threads, -1);
          ShuffleCase c{op, width, low, high};
          ASSERT_OK(emu::launch(shuffleKernel, 1, threads, 0, c, operand.data(),
                                out.data()));
          for (int t = 0; t < threads; ++t) {
            int lane = t % 32, warpBase = t - lane;
            int src =
                warpBase + shuffleSource(op, lane, operand[t] & 31, width);
            ASSERT_EQ(out[t], 1000003LL * (src + 1))
                << "op " << op << " width " << width << " thread " << t
                << " operand " << operand[t];
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 4 * (6 + 5) * 2 * 64);
}

template <typename T> __global__ void xorShuffleTyped(const T *in, T *out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, in[threadIdx.x], 5);
}

template <typename T> void checkTypedShuffle(std::vector<T> in) {
  std::vector<T> out(32);
  ASSERT_OK(emu::launch(xorShuffleTyped<T>, 1, 32, 0, in.data(), out.data()));
  for (int l = 0; l < 32; ++l)
    EXPECT_EQ(std::memcmp(&out[l], &in[l ^ 5], sizeof(T)), 0) << l;
}

TEST(CudaEmulatorTest, ShufflesCarryEveryType) {
  std::vector<float> f;
  std::vector<double> d;
  std::vector<__nv_bfloat16> b;
  std::vector<__half> h;
  std::vector<unsigned char> c;
  for (int l = 0; l < 32; ++l) {
    f.push_back(1.5f * l - 7);
    d.push_back(1e300 / (l + 1));
    b.push_back(__float2bfloat16(0.1f * l));
    h.push_back(__float2half(-0.3f * l));
    c.push_back(static_cast<unsigned char>(200 + l));
  }
  checkTypedShuffle(f);
  checkTypedShuffle(d);
  checkTypedShuffle(b);
  checkTypedShuffle(h);
  checkTypedShuffle(c);
}

//===----------------------------------------------------------------------===//
// Votes, reductions, matches
//===----------------------------------------------------------------------===//

__global__ void votes(unsigned *out) {
  const int t = threadIdx.x, lane = t % 32;
  unsigned *o = out + 8 * t;
  o[0] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  o[1] = static_cast<unsigned>(__any_sync(0xffffffffu, lane == 31));
  o[2] = static_cast<unsigned>(__all_sync(0xffffffffu, lane < 40));
  o[3] = static_cast<unsigned>(__all_sync(0xffffffffu, lane != 3));
  // Two groups with their own masks.
  const unsigned mask = lane % 2 ? 0xaaaaaaaau : 0x55555555u;
  o[4] = __ballot_sync(mask, lane < 8);
  o[5] = __activemask();
  __syncwarp();
  o[6] = __reduce_add_sync(0xffffffffu, static_cast<unsigned>(lane + 1));
  o[7] = static_cast<unsigned>(
      __reduce_min_sync(0xffffffffu, lane == 5 ? -9 : lane));
}

TEST(CudaEmulatorTest, VotesInFullAndPartialWarps) {
  // 40 threads: warp 1 has 8 lanes; the full masks name 24 absent lanes.
  std::vector<unsigned> out(8 * 40);
  ASSERT_OK(emu::launch(votes, 1, 40, 0, out.data()));
  for (int t = 0; t < 40; ++t) {
    const int lanes = t < 32 ? 32 : 8, lane = t % 32;
    unsigned ballot = 0, present = lanes == 32 ? 0xffffffffu : 0xffu;
    for (int l = 0; l < lanes; l += 3)
      ballot |= 1u << l;
    const unsigned *o = &out[8 * t];
    EXPECT_EQ(o[0], ballot) << t;
    EXPECT_EQ(o[1], lanes == 32 ? 1u : 0u) << t;
    EXPECT_EQ(o[2], 1u) << t;
    EXPECT_EQ(o[3], 0u) << t;
    EXPECT_EQ(o[4], (lane % 2 ? 0xaau : 0x55u)) << t;
    EXPECT_EQ(o[5], present) << t;
    EXPECT_EQ(o[6], static_cast<unsigned>(lanes * (lanes + 1) / 2)) << t;
    EXPECT_EQ(static_cast<int>(o[7]), -9) << t;
  }
}

__global__ void reductionsAndMatches(const int *in, unsigned *out) {
  const int t = threadIdx.x;
  const int v = in[t];
  unsigned *o = out + 8 * t;
  o[0] = __reduce_add_sync(0xffffffffu, static_cast<unsigned>(v));
  o[1] = static_cast<unsigned>(__reduce_min_sync(0xffffffffu, v));
  o[2] = static_cast<unsigned>(__reduce_max_sync(0xffffffffu, v));
  o[3] = __reduce_min_sync(0xffffffffu, static_cast<unsigned>(v));
  o[4] = __reduce_max_sync(0xffffffffu, static_cast<unsigned>(v));
  o[5] = __reduce_and_sync(0xffffffffu, static_cast<unsigned>(v)) ^
         __reduce_or_sync(0xffffffffu, static_cast<unsigned>(v)) ^
         __reduce_xor_sync(0xffffffffu, static_cast<unsigned>(v));
  o[6] = __match_any_sync(0xffffffffu, v % 4);
  int pred = -1;
  o[7] = __match_all_sync(0xffffffffu, v % 4, &pred) | (pred ? 1u << 31 : 0);
}

TEST(CudaEmulatorTest, ReductionsAndMatchesMatchTheReference) {
  std::vector<int> in(32);
  std::mt19937 rng(11);
  for (int &v : in)
    v = static_cast<int>(rng() % 2001) - 1000;
  std::vector<unsigned> out(8 * 32);
  ASSERT_OK(emu::launch(reductionsAndMatches, 1, 32, 0, in.data(), out.data()));
  unsigned sum = 0, andAll = ~0u, orAll = 0, xorAll = 0;
  int minS = in[0], maxS = in[0];
  unsigned minU = ~0u, maxU = 0;
  for (int v : in) {
    unsigned u = static_cast<unsigned>(v);
    sum += u;
    andAll &= u;
    orAll |= u;
    xorAll ^= u;
    minS = std::min(minS, v);
    maxS = std::max(maxS, v);
    minU = std::min(minU, u);
    maxU = std::max(maxU, u);
  }
  for (int t = 0; t < 32; ++t) {
    const unsigned *o = &out[8 * t];
    EXPECT_EQ(o[0], sum);
    EXPECT_EQ(static_cast<int>(o[1]), minS);
    EXPECT_EQ(static_cast<int>(o[2]), maxS);
    EXPECT_EQ(o[3], minU);
    EXPECT_EQ(o[4], maxU);
    EXPECT_EQ(o[5], andAll ^ orAll ^ xorAll);
    unsigned same = 0;
    for (int l = 0; l < 32; ++l)
      same |= unsigned(in[l] % 4 == in[t] % 4) << l;
    EXPECT_EQ(o[6], same) << t;
    EXPECT_EQ(o[7], 0u) << t; // not all equal: 0, pred 0
  }
}

/// A collective completes when the lanes its mask names that are still
/// running have arrived; exiting lanes release it.
__global__ void ballotWhileLanesExit(unsigned *out) {
  if (threadIdx.x % 32 >= 29)
    return;
  out[threadIdx.x] = __ballot_sync(0xffffffffu, 1);
}

TEST(CudaEmulatorTest, ExitingLanesCompleteACollective) {
  for (emu::Schedule schedule : kSchedules) {
    std::vector<unsigned> out(64, 7);
    emu::LaunchConfig cfg = config(1, 64);
    cfg.schedule = schedule;
    ASSERT_OK(emu::launch(cfg, ballotWhileLanesExit, out.data()));
    for (int t = 0; t < 64; ++t)
      EXPECT_EQ(out[t], t % 32 >= 29 ? 7u : 0x1fffffffu) << t;
  }
}

//===----------------------------------------------------------------------===//
// Atomics
//===----------------------------------------------------------------------===//

__global__ void atomicsUnderContention(int *count, float *sum, int *maximum,
                                       unsigned long long *bits) {
  const int id = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  for (int i = 0; i < 3; ++i) {
    atomicAdd(count, 1);
    atomicAdd(sum, 0.5f);
    atomicMax(maximum, (id * 7919) % 10007);
    atomicOr(bits, 1ull << (id % 64));
    __syncthreads();
  }
}

/// A spin lock taken by every thread in turn: a failed atomicCAS lets the
/// other threads run, so the holder gets to release it.
__global__ void spinLock(int *lock, int *counter) {
  for (int i = 0; i < 2; ++i) {
    while (atomicCAS(lock, 0, 1) != 0) {
    }
    __threadfence();
    int c = *counter;
    __nanosleep(100); // the others try (and yield) meanwhile
    *counter = c + 1;
    __threadfence();
    atomicExch(lock, 0);
  }
}

TEST(CudaEmulatorTest, AtomicsUnderContention) {
  for (int workers : {1, 4}) {
    int count = 0, maximum = -1, lock = 0, counter = 0;
    float sum = 0;
    unsigned long long bits = 0;
    emu::LaunchConfig cfg = config(16, 96);
    cfg.workers = workers;
    ASSERT_OK(emu::launch(cfg, atomicsUnderContention, &count, &sum, &maximum,
                          &bits));
    int want = -1;
    for (int id = 0; id < 16 * 96; ++id)
      want = std::max(want, (id * 7919) % 10007);
    EXPECT_EQ(count, 3 * 16 * 96);
    EXPECT_EQ(sum, 0.5f * 3 * 16 * 96); // small integers: exact in float
    EXPECT_EQ(maximum, want);
    EXPECT_EQ(bits, ~0ull);
    ASSERT_OK(emu::launch(cfg, spinLock, &lock, &counter));
    EXPECT_EQ(counter, 2 * 16 * 96);
    EXPECT_EQ(lock, 0);
  }
}

//===----------------------------------------------------------------------===//
// Misuse: errors naming the kernel, block, threads and source lines
//===----------------------------------------------------------------------===//

constexpr int kDivergentLineA = __LINE__ + 4;
constexpr int kDivergentLineB = __LINE__ + 6;
__global__ void divergentBarrier(int *out) {
  if (blockIdx.x == 1 && threadIdx.x < 16) {
    __syncthreads();
  } else {
    out[threadIdx.x] = 1;
    __syncthreads();
  }
}

TEST(CudaEmulatorTest, DivergentBarrierIsAnError) {
  std::vector<int> out(32);
  Status s = emu::launch(divergentBarrier, 3, 32, 0, out.data());
  std::string file = "EmulatorTest.cpp:";
  expectError(s, {"kernel 'divergentBarrier(int*)' block (1,0,0): divergent "
                  "__syncthreads: threads 0-15 wait at __syncthreads (" +
                  file + std::to_string(kDivergentLineA) +
                  "), threads 16-31 wait at __syncthreads (" + file +
                  std::to_string(kDivergentLineB) + ")"});
}

__global__ void divergentRows(int *out) {
  if (threadIdx.y == 0)
    __syncthreads();
  else
    __syncthreads_or(1);
}

TEST(CudaEmulatorTest, DivergentBarrierNamesThreadsOfA2DBlock) {
  int out = 0;
  expectError(emu::launch(divergentRows, 1, dim3(16, 2), 0, &out),
              {"threads (0,0,0)-(15,0,0) wait at __syncthreads",
               "threads (0,1,0)-(15,1,0) wait at __syncthreads_or"});
}

constexpr int kUnreachedBarrierLine = __LINE__ + 4;
constexpr int kUnreachedShuffleLine = __LINE__ + 5;
__global__ void barrierAgainstShuffle(float *out) {
  if (threadIdx.x < 16)
    __syncthreads();
  else
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 1.0f, 0);
}

TEST(CudaEmulatorTest, BarrierNotReachedIsAnError) {
  std::vector<float> out(32);
  emu::LaunchConfig cfg = config(1, 32);
  cfg.name = "mixed";
  expectError(
      emu::launch(cfg, barrierAgainstShuffle, out.data()),
      {"kernel 'mixed' block (0,0,0): __shfl_sync at EmulatorTest.cpp:" +
       std::to_string(kUnreachedShuffleLine) +
       " (mask 0xffffffff) cannot complete: threads 16-31 wait there, "
       "but threads 0-15, which the mask names, wait at __syncthreads "
       "(EmulatorTest.cpp:" +
       std::to_string(kUnreachedBarrierLine) + ")"});
}

__global__ void mismatchedCollectives(unsigned *out) {
  if (threadIdx.x < 16)
    out[threadIdx.x] = __ballot_sync(0xffffffffu, 1);
  else
    out[threadIdx.x] = static_cast<unsigned>(__any_sync(0xffffffffu, 1));
}

TEST(CudaEmulatorTest, DifferentCollectivesOfOneMaskAreAnError) {
  std::vector<unsigned> out(32);
  expectError(emu::launch(mismatchedCollectives, 1, 32, 0, out.data()),
              {"__ballot_sync at EmulatorTest.cpp:", "cannot complete",
               "threads 16-31, which the mask names, wait at __any_sync"});
}

__global__ void shuffleFromExitedLane(float *out) {
  if (threadIdx.x == 5)
    return;
  out[threadIdx.x] = __shfl_sync(0xffffffffu, 2.0f, 5);
}

__global__ void shuffleBeyondPartialWarp(float *out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 2.0f, 16);
}

__global__ void shuffleOutsideOwnMask(float *out) {
  out[threadIdx.x] = __shfl_xor_sync(0xfffffffeu, 2.0f, 1);
}

__global__ void shuffleBadWidth(float *out) {
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 2.0f, 1, 12);
}

TEST(CudaEmulatorTest, ShuffleMisuseIsAnError) {
  std::vector<float> out(64);
  expectError(emu::launch(shuffleFromExitedLane, 1, 32, 0, out.data()),
              {"thread 0 (lane 0) calls __shfl_sync at EmulatorTest.cpp:",
               "and reads lane 5, which has exited"});
  // 40 threads: warp 1 has lanes 0-7, whose partners 16-23 do not exist.
  expectError(emu::launch(shuffleBeyondPartialWarp, 1, 40, 0, out.data()),
              {"thread 32 (lane 0) calls __shfl_xor_sync",
               "reads lane 16, which does not exist"});
  expectError(emu::launch(shuffleOutsideOwnMask, 1, 32, 0, out.data()),
              {"thread 0 calls __shfl_xor_sync at EmulatorTest.cpp:",
               "with mask 0xfffffffe, which does not name its own lane 0"});
  expectError(emu::launch(shuffleBadWidth, 1, 32, 0, out.data()),
              {"with width 12 (must be a power of two up to 32)"});
}

__global__ void trapsInBlockTwo(int *out) {
  if (blockIdx.x == 2 && threadIdx.x == 3)
    __trap();
  out[0] = 1;
}

TEST(CudaEmulatorTest, TrapIsAnError) {
  int out = 0;
  expectError(emu::launch(trapsInBlockTwo, 4, 8, 0, &out),
              {"kernel 'trapsInBlockTwo(int*)' block (2,0,0): thread 3 "
               "called __trap() at EmulatorTest.cpp:"});
}

__global__ void emptyKernel() {}

TEST(CudaEmulatorTest, InvalidLaunchesAreErrors) {
  expectError(emu::launch(emptyKernel, dim3(2, 0, 1), 32, 0),
              {"kernel 'emptyKernel()': grid (2,0,1) has no blocks"});
  expectError(emu::launch(emptyKernel, 1, 1025, 0),
              {"block (1025,1,1) has 1025 threads; CUDA allows at most 1024"});
  expectError(emu::launch(emptyKernel, 1, dim3(512, 4, 1), 0),
              {"block (512,4,1) has 2048 threads"});
  expectError(emu::launch(emptyKernel, 1, dim3(1, 1, 65), 0),
              {"block (1,1,65)"});
  expectError(emu::launch(emptyKernel, 1, dim3(0, 1, 1), 0),
              {"block (0,1,1) has no threads"});
  expectError(emu::launch(emptyKernel, dim3(1, 65536, 1), 1, 0),
              {"exceeds CUDA's limits"});
  ASSERT_OK(emu::launch(emptyKernel, 1, dim3(32, 32, 1), 0));
}

__global__ void launchesFromAKernel(int *ok) {
  Status s = emu::launch(emptyKernel, 1, 1, 0);
  *ok = s.ok() ? 1
               : (s.message().find("dynamic parallelism") != std::string::npos
                      ? 2
                      : 3);
}

TEST(CudaEmulatorTest, LaunchFromAKernelIsAnError) {
  int ok = 0;
  ASSERT_OK(emu::launch(launchesFromAKernel, 1, 1, 0, &ok));
  EXPECT_EQ(ok, 2);
}

TEST(CudaEmulatorTest, KernelCodeOutsideALaunchAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)threadIdx.x, "threadIdx.*used outside a kernel launch");
  EXPECT_DEATH(__syncthreads(), "__syncthreads used outside a kernel launch");
}

TEST(CudaEmulatorTest, AnErrorLeavesTheEmulatorUsable) {
  std::vector<int> out(32);
  EXPECT_FALSE(emu::launch(divergentBarrier, 3, 32, 0, out.data()).ok());
  std::vector<int> rotated(2 * 64);
  ASSERT_OK(emu::launch(rotate, 2, 64, 0, rotated.data(), 3, 1));
  EXPECT_EQ(rotated, rotateExpected(2, 64, 3));
}
