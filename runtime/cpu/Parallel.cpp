//===- Parallel.cpp - Thread count and parallelFor ------------------------===//
//
// Part of mtc.
//
// Algorithm
// - One global mtc::ThreadPool (lib/Support/ThreadPool.h) of threads()
//   threads, the caller included, whose idle workers spin before they sleep.
//   parallelFor(n, body) splits [0, n) into c = min(threads(), n) contiguous
//   chunks, chunk i = [n*i/c, n*(i+1)/c): the boundaries depend only on n and
//   threads(), never on timing. The pool's threads claim chunk indices, so
//   which thread runs a chunk varies but the chunks themselves do not; kernels
//   never combine results across chunks in a timing-dependent order, hence
//   determinism.
// - Re-entrancy and concurrency are the pool's: a parallelFor issued from
//   inside a body, or while the pool serves another caller, runs its chunks
//   inline, with the same boundaries.
// - The default thread count is MTC_NUM_THREADS if set (> 0), else the
//   hardware concurrency; setThreads(n <= 0) goes back to that default.
// - OpenBLAS is kept single-threaded: gemm (Gemm.cpp) splits large products
//   over this pool instead, so one set of threads serves every kernel.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include "lib/Support/ThreadPool.h"

#include <algorithm>
#include <cstdlib>

extern "C" void openblas_set_num_threads(int num_threads);

namespace mtc::cpu {
namespace {

int defaultThreads() {
  if (const char *env = std::getenv("MTC_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0)
      return n;
  }
  return 0; // the pool's default: the hardware concurrency
}

unsigned startPool() {
  openblas_set_num_threads(1);
  return static_cast<unsigned>(defaultThreads());
}

ThreadPool &pool() {
  static ThreadPool p(startPool(), ThreadPool::Wait::Spin);
  return p;
}

} // namespace

int threads() { return static_cast<int>(pool().numThreads()); }

void setThreads(int n) { pool().setNumThreads(n <= 0 ? defaultThreads() : n); }

void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  int64_t chunks = std::min<int64_t>(threads(), n);
  pool().parallelFor(chunks, [&](size_t c) {
    int64_t b = n * static_cast<int64_t>(c) / chunks;
    int64_t e = n * static_cast<int64_t>(c + 1) / chunks;
    if (b < e)
      body(b, e);
  });
}

} // namespace mtc::cpu
