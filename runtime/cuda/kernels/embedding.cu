//===- embedding.cu - Embedding lookup and its deterministic gradient -----===//
//
// Part of mtc. The CUDA counterparts of cpu::embedding and
// cpu::embeddingGradAcc (runtime/cpu/Loss.cpp). T = float for _f32, bf16 for
// _bf16. ids are int32, n >= 0, V >= 1, D >= 1.
//
// Forward
//
//   embedding_f32 / embedding_bf16(const int *ids, const T *table, T *y,
//                                  int n, int V, int D, int *badIndex)
//     table [V, D], y [n, D]: y[r, :] = table[ids[r], :].
//     badIndex: one int in device memory that the caller sets to INT_MAX
//     (0x7fffffff) before the launch. A row whose id is outside [0, V) is
//     never read: the row of y is written with zeros and *badIndex gets the
//     smallest such position (atomicMin: integers, so deterministic). After
//     the launch, *badIndex != INT_MAX means the lookup failed (the CPU
//     backend reports the same position and writes nothing).
//   grid (n); block (any, 1..1024; 128 is a good choice); no dynamic smem.
//   Rows move as 16-byte words when table, y and D * sizeof(T) allow it,
//   else element by element.
//
// Gradient: dtable[V, D] += the dy rows scattered by id, deterministic and
// bit-identical to the CPU in fp32: every dtable element is owned by one
// thread, which adds its dy terms in position order (the CPU's order) to the
// old value. No float atomics. Four kernels (a stable LSD radix sort of the
// positions by id, 8 bits per pass, then one block per distinct id):
//
//   passes = the number of 8-bit digits of V (1 for V < 256, 2 for V < 65536,
//            3 for V < 2^24, else 4); the key of position p is ids[p], or V
//            (sorted last and skipped) when ids[p] is outside [0, V).
//   blocks = ceil(n / 1024)
//   for pass k = 0 .. passes-1 (shift = 8k):
//     embedding_grad_hist(ids, keysIn, n, V, shift, hist)
//         grid (blocks), block (256)
//     embedding_grad_scan(hist, 256 * blocks)
//         grid (1), block (1024)
//     embedding_grad_scatter(ids, keysIn, posIn, n, V, shift, hist,
//                            keysOut, posOut)
//         grid (blocks), block (256)
//     pass 0 takes keysIn = posIn = nullptr (keys from ids, positions 0..n-1);
//     later passes read the previous pass's output (ping-pong buffers).
//   embedding_grad_sum_f32 / _bf16 / _bf16_f32(keys, pos, dy, dtable, n, V, D)
//         keys, pos: the last pass's output; dy [n, D] (T, or bf16 for
//         _bf16_f32), dtable [V, D] (T, or f32 for _bf16_f32)
//         grid (n, ceil(D / blockDim.x)), block (any, 1..1024; 128)
//
//   Scratch (int32 words, device memory):
//     embeddingGradScratchInts(n) = 4 * n + 256 * ceil(n / 1024)
//       keys A [n], pos A [n], keys B [n], pos B [n], hist [256 * blocks].
//   All kernels work for n == 0 (launch nothing then) and any V < 2^31 - 1.
//
// Within a radix block (1024 positions, 256 threads, four rounds of 256 in
// position order) a position's rank among equal digits is its rank in its
// warp (__match_any_sync) plus the same digit's count in earlier warps of
// the round plus its count in earlier rounds: a stable order that depends
// only on the data. hist is digit-major ([digit][block]), so its exclusive
// scan is each (digit, block)'s first output slot.
//
//===----------------------------------------------------------------------===//
#include "common.cuh"

namespace {

using namespace mtc_cuda;

constexpr int kRadixThreads = 256;
constexpr int kRadixItems = 1024; ///< positions per radix block
constexpr int kRadixWarps = kRadixThreads / kWarpSize;
constexpr int kDigits = 256;

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

__device__ __forceinline__ bool aligned16(const void *p) {
  return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

template <typename T>
__device__ __forceinline__ void embeddingRow(const int *ids, const T *table,
                                             T *y, int n, int V, int D,
                                             int *badIndex) {
  const int r = blockIdx.x;
  if (r >= n)
    return;
  const int id = ids[r];
  T *dst = y + static_cast<long long>(r) * D;
  const bool valid = id >= 0 && id < V;
  if (!valid && threadIdx.x == 0)
    atomicMin(badIndex, r);
  const T *src = table + static_cast<long long>(valid ? id : 0) * D;
  // Rows start on 16 bytes when the bases do and a row is a multiple of 16.
  const bool wide = aligned16(table) && aligned16(y) &&
                    (static_cast<long long>(D) * sizeof(T)) % 16 == 0;
  if (wide) {
    const int words = static_cast<int>(D * sizeof(T) / 16);
    const uint4 *s = reinterpret_cast<const uint4 *>(src);
    uint4 *d = reinterpret_cast<uint4 *>(dst);
    for (int j = threadIdx.x; j < words; j += blockDim.x)
      d[j] = valid ? s[j] : make_uint4(0, 0, 0, 0);
    return;
  }
  for (int j = threadIdx.x; j < D; j += blockDim.x)
    dst[j] = valid ? src[j] : fromFloat<T>(0.0f);
}

//===----------------------------------------------------------------------===//
// Gradient: radix sort of positions by id
//===----------------------------------------------------------------------===//

/// The sort key of position \p p (pass 0) or the previous pass's key.
__device__ __forceinline__ int sortKey(const int *ids, const int *keysIn, int p,
                                       int V) {
  if (keysIn)
    return keysIn[p];
  const int id = ids[p];
  return id >= 0 && id < V ? id : V;
}

/// Stable ranks of one radix block's positions by digit. Calls
/// visit(p, digit, rank) for every position p of the block (rank: among
/// the block's positions with that digit, in position order) and returns,
/// in counts[0..256), the block's count per digit. Every thread of the
/// block (256) must call it. counts and warpCounts are shared memory.
template <typename Visit>
__device__ __forceinline__ void
rankBlock(const int *ids, const int *keysIn, int n, int V, int shift,
          int *counts, int (*warpCounts)[kDigits], Visit visit) {
  const int tid = threadIdx.x, lane = tid % kWarpSize, warp = tid / kWarpSize;
  const int base = blockIdx.x * kRadixItems;
  counts[tid] = 0;
  for (int round = 0; round < kRadixItems / kRadixThreads; ++round) {
    for (int w = 0; w < kRadixWarps; ++w)
      warpCounts[w][tid] = 0;
    __syncthreads();
    const int p = base + round * kRadixThreads + tid;
    // Positions past n take digit kDigits: they match only each other.
    const int digit =
        p < n ? (sortKey(ids, keysIn, p, V) >> shift) & (kDigits - 1) : kDigits;
    const unsigned same = __match_any_sync(kFullMask, digit);
    const int inWarp = __popc(same & ((1u << lane) - 1));
    if (digit < kDigits && inWarp == 0)
      warpCounts[warp][digit] = __popc(same);
    __syncthreads();
    if (digit < kDigits) {
      int rank = counts[digit] + inWarp;
      for (int w = 0; w < warp; ++w)
        rank += warpCounts[w][digit];
      visit(p, digit, rank);
    }
    __syncthreads(); // every rank read counts[] before it moves on
    int add = 0;
    for (int w = 0; w < kRadixWarps; ++w)
      add += warpCounts[w][tid];
    counts[tid] += add;
    // The next round's clearing of warpCounts waits for the barrier at
    // its top only after this thread's own reads: each thread clears and
    // reads column tid alone.
  }
  __syncthreads();
}

struct IgnoreRank {
  __device__ __forceinline__ void operator()(int, int, int) const {}
};

/// Writes each position's key and position to its sorted slot.
struct ScatterRank {
  const int *ids, *keysIn, *posIn, *offsets;
  int *keysOut, *posOut;
  int V, blocks;
  __device__ __forceinline__ void operator()(int p, int digit, int rank) const {
    const int slot = offsets[digit * blocks + blockIdx.x] + rank;
    keysOut[slot] = sortKey(ids, keysIn, p, V);
    posOut[slot] = posIn ? posIn[p] : p;
  }
};

/// The exclusive prefix sum of \p v over the block (blockDim.x a multiple of
/// 32) and, in *total, the block's sum. \p scratch: 32 ints of shared memory.
__device__ __forceinline__ int blockExclusiveScan(int v, int *scratch,
                                                  int *total) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  int inclusive = v;
#pragma unroll
  for (int offset = 1; offset < kWarpSize; offset <<= 1) {
    const int up = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset)
      inclusive += up;
  }
  __syncthreads();
  if (lane == kWarpSize - 1)
    scratch[warp] = inclusive;
  __syncthreads();
  int before = 0, all = 0;
  for (int w = 0; w < warps; ++w) {
    if (w < warp)
      before += scratch[w];
    all += scratch[w];
  }
  *total = all;
  return before + inclusive - v;
}

//===----------------------------------------------------------------------===//
// Gradient: one block per distinct id
//===----------------------------------------------------------------------===//

template <typename G, typename A>
__device__ __forceinline__ void gradSum(const int *keys, const int *pos,
                                        const G *dy, A *dtable, int n, int V,
                                        int D) {
  const int k = blockIdx.x;
  if (k >= n)
    return;
  const int id = keys[k];
  // A run of equal keys is handled by the block of its first slot; the
  // invalid ids (key V) sort last and are skipped, as the CPU skips them.
  if (id >= V || (k > 0 && keys[k - 1] == id))
    return;
  const int c = blockIdx.y * blockDim.x + threadIdx.x;
  if (c >= D)
    return;
  A *dst = dtable + static_cast<long long>(id) * D + c;
  float acc = toFloat(*dst);
  for (int j = k; j < n && keys[j] == id; ++j)
    acc += toFloat(dy[static_cast<long long>(pos[j]) * D + c]);
  *dst = fromFloat<A>(acc);
}

} // namespace

extern "C" __global__ void embedding_f32(const int *ids, const float *table,
                                         float *y, int n, int V, int D,
                                         int *badIndex) {
  embeddingRow<float>(ids, table, y, n, V, D, badIndex);
}

extern "C" __global__ void embedding_bf16(const int *ids,
                                          const mtc_cuda::bf16 *table,
                                          mtc_cuda::bf16 *y, int n, int V,
                                          int D, int *badIndex) {
  embeddingRow<mtc_cuda::bf16>(ids, table, y, n, V, D, badIndex);
}

extern "C" __global__ void embedding_grad_hist(const int *ids,
                                               const int *keysIn, int n, int V,
                                               int shift, int *hist) {
  __shared__ int counts[kDigits];
  __shared__ int warpCounts[kRadixWarps][kDigits];
  rankBlock(ids, keysIn, n, V, shift, counts, warpCounts, IgnoreRank());
  hist[threadIdx.x * gridDim.x + blockIdx.x] = counts[threadIdx.x];
}

extern "C" __global__ void embedding_grad_scan(int *hist, int count) {
  __shared__ int scratch[32];
  // Each thread scans a contiguous chunk; the chunk sums are scanned across
  // the block. Integer sums: exact and order-free.
  const int per = (count + blockDim.x - 1) / blockDim.x;
  const int lo = min(count, static_cast<int>(threadIdx.x) * per),
            hi = min(count, lo + per);
  int sum = 0;
  for (int i = lo; i < hi; ++i)
    sum += hist[i];
  int total = 0;
  int run = blockExclusiveScan(sum, scratch, &total);
  for (int i = lo; i < hi; ++i) {
    const int v = hist[i];
    hist[i] = run;
    run += v;
  }
}

extern "C" __global__ void
embedding_grad_scatter(const int *ids, const int *keysIn, const int *posIn,
                       int n, int V, int shift, const int *offsets,
                       int *keysOut, int *posOut) {
  __shared__ int counts[kDigits];
  __shared__ int warpCounts[kRadixWarps][kDigits];
  ScatterRank scatter{ids,     keysIn, posIn, offsets,
                      keysOut, posOut, V,     static_cast<int>(gridDim.x)};
  rankBlock(ids, keysIn, n, V, shift, counts, warpCounts, scatter);
}

extern "C" __global__ void
embedding_grad_sum_f32(const int *keys, const int *pos, const float *dy,
                       float *dtable, int n, int V, int D) {
  gradSum<float, float>(keys, pos, dy, dtable, n, V, D);
}

extern "C" __global__ void embedding_grad_sum_bf16(const int *keys,
                                                   const int *pos,
                                                   const mtc_cuda::bf16 *dy,
                                                   mtc_cuda::bf16 *dtable,
                                                   int n, int V, int D) {
  gradSum<mtc_cuda::bf16, mtc_cuda::bf16>(keys, pos, dy, dtable, n, V, D);
}

extern "C" __global__ void embedding_grad_sum_bf16_f32(const int *keys,
                                                       const int *pos,
                                                       const mtc_cuda::bf16 *dy,
                                                       float *dtable, int n,
                                                       int V, int D) {
  gradSum<mtc_cuda::bf16, float>(keys, pos, dy, dtable, n, V, D);
}
