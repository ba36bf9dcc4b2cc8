//===- Embedding.cpp - Embedding lookup and its gradient on the GPU -------===//
//
// Part of mtc. The host side of embedding.cu; the kernels' banner has the
// launch rules this file follows.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/ops/Embedding.h"

#include <climits>

namespace mtc::cuda::ops {

namespace {

constexpr unsigned kRowThreads = 128;   ///< embedding_f32/_bf16, grad_sum
constexpr unsigned kRadixThreads = 256; ///< hist, scatter (fixed)
constexpr unsigned kScanThreads = 1024; ///< scan
constexpr int64_t kRadixItems = 1024;   ///< positions per radix block

/// An error unless every size fits the kernels' int arguments.
Status checkSizes(const char *op, int64_t n, int64_t V, int64_t D) {
  if (n < 0 || V < 1 || D < 1)
    return Status::error(std::string(op) +
                         ": bad sizes n=" + std::to_string(n) +
                         " V=" + std::to_string(V) + " D=" + std::to_string(D));
  // V itself is the sort key of an invalid id in the gradient.
  if (n > INT_MAX || V >= INT_MAX || D > INT_MAX)
    return Status::error(std::string(op) + ": n=" + std::to_string(n) +
                         " V=" + std::to_string(V) + " D=" + std::to_string(D) +
                         " exceed the kernels' 32-bit sizes");
  return Status::success();
}

} // namespace

int64_t embeddingGradScratchBytes(int64_t n) {
  int64_t blocks = (n + kRadixItems - 1) / kRadixItems;
  return 4 * (4 * n + 256 * blocks);
}

Status embedding(const Launch &L, DevPtr ids, DevPtr table, DevPtr y, int64_t n,
                 int64_t V, int64_t D, DevPtr badIndex, DType dtype) {
  if (Status s = checkSizes("embedding", n, V, D); !s)
    return s;
  if (n >= kEmbeddingNoBadIndex)
    return Status::error("embedding: " + std::to_string(n) +
                         " positions reach the 'no bad index' value");
  if (!badIndex) {
    Expected<DevPtr> p = L.scratch(4);
    if (!p)
      return Status::error("embedding: " + p.message());
    badIndex = *p;
  }
  // 0x7f7f7f7f: above every position, so the kernel's atomicMin works as
  // with INT_MAX, and a byte memset needs no host memory to copy from.
  if (Status s =
          cudaCheck(*L.api, L.api->cuMemsetD8Async(badIndex, 0x7f, 4, L.stream),
                    "embedding: cuMemsetD8Async of badIndex");
      !s)
    return s;
  if (n == 0)
    return Status::success();
  int ni = static_cast<int>(n), vi = static_cast<int>(V),
      di = static_cast<int>(D);
  return L.kernel("embedding.cu",
                  std::string("embedding_") + dtypeSuffix(dtype),
                  {static_cast<unsigned>(n)}, {kRowThreads}, 0,
                  {&ids, &table, &y, &ni, &vi, &di, &badIndex});
}

Status embeddingGradAcc(const Launch &L, DevPtr ids, DevPtr dy, DevPtr dtable,
                        int64_t n, int64_t V, int64_t D, DType dyType,
                        DType tableType) {
  if (Status s = checkSizes("embeddingGradAcc", n, V, D); !s)
    return s;
  const char *sum = nullptr;
  if (dyType == DType::F32 && tableType == DType::F32)
    sum = "embedding_grad_sum_f32";
  else if (dyType == DType::BF16 && tableType == DType::BF16)
    sum = "embedding_grad_sum_bf16";
  else if (dyType == DType::BF16 && tableType == DType::F32)
    sum = "embedding_grad_sum_bf16_f32";
  else
    return Status::error(
        "embeddingGradAcc: f32 gradients into a bf16 table are not supported");
  if (n == 0)
    return Status::success();
  Expected<DevPtr> scratch = L.scratch(embeddingGradScratchBytes(n));
  if (!scratch)
    return Status::error("embeddingGradAcc: " + scratch.message());
  // Scratch: keys A, pos A, keys B, pos B ([n] each), hist [256 * blocks].
  const DevPtr words = *scratch;
  DevPtr keys[2] = {words, words + 8 * n};
  DevPtr pos[2] = {words + 4 * n, words + 12 * n};
  DevPtr hist = words + 16 * n;
  int ni = static_cast<int>(n), vi = static_cast<int>(V),
      di = static_cast<int>(D);
  const unsigned blocks =
      static_cast<unsigned>((n + kRadixItems - 1) / kRadixItems);
  int histCount = static_cast<int>(256 * blocks);
  // One 8-bit digit per pass, as many as V's keys (ids and the key V) need.
  int passes = 1;
  while (passes < 4 && (V >> (8 * passes)) != 0)
    ++passes;
  DevPtr none = 0;
  for (int k = 0; k < passes; ++k) {
    int shift = 8 * k;
    DevPtr *keysIn = k == 0 ? &none : &keys[(k + 1) % 2];
    DevPtr *posIn = k == 0 ? &none : &pos[(k + 1) % 2];
    if (Status s = L.kernel("embedding.cu", "embedding_grad_hist", {blocks},
                            {kRadixThreads}, 0,
                            {&ids, keysIn, &ni, &vi, &shift, &hist});
        !s)
      return s;
    if (Status s = L.kernel("embedding.cu", "embedding_grad_scan", {1},
                            {kScanThreads}, 0, {&hist, &histCount});
        !s)
      return s;
    if (Status s = L.kernel("embedding.cu", "embedding_grad_scatter", {blocks},
                            {kRadixThreads}, 0,
                            {&ids, keysIn, posIn, &ni, &vi, &shift, &hist,
                             &keys[k % 2], &pos[k % 2]});
        !s)
      return s;
  }
  const int last = (passes - 1) % 2;
  const unsigned colBlocks =
      static_cast<unsigned>((D + kRowThreads - 1) / kRowThreads);
  return L.kernel("embedding.cu", sum, {static_cast<unsigned>(n), colBlocks},
                  {kRowThreads}, 0,
                  {&keys[last], &pos[last], &dy, &dtable, &ni, &vi, &di});
}

} // namespace mtc::cuda::ops
