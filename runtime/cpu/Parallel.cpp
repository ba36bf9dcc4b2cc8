//===- Parallel.cpp - Thread count and parallelFor ------------------------===//
//
// Part of mtc.
//
// Algorithm
// - A small persistent pool of threads() - 1 workers; the calling thread takes
//   part too. parallelFor(n, body) splits [0, n) into c = min(threads(), n)
//   contiguous chunks, chunk i = [n*i/c, n*(i+1)/c): the boundaries depend only
//   on n and threads(), never on timing. Workers (and the caller) claim chunk
//   indices from an atomic counter, so which thread runs a chunk varies but the
//   chunks themselves do not; kernels never combine results across chunks in a
//   timing-dependent order, hence determinism.
// - Re-entrancy: a parallelFor issued from inside a body (a worker or the
//   caller while it runs chunks) runs inline, chunk by chunk with the same
//   boundaries, so nested calls never wait on the pool (no deadlock) and give
//   the same results.
// - Concurrency: several application threads may call parallelFor at once.
//   The pool serves one job at a time; a caller that finds it busy runs its
//   job inline (same chunks) instead of queueing behind it.
// - The default thread count is MTC_NUM_THREADS if set (> 0), else the
//   hardware concurrency; setThreads(n <= 0) goes back to that default.
// - OpenBLAS is kept single-threaded: gemm (Gemm.cpp) splits large products
//   over this pool instead, so one set of threads serves every kernel.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

extern "C" void openblas_set_num_threads(int num_threads);

namespace mtc::cpu {
namespace {

int defaultThreads() {
  if (const char *env = std::getenv("MTC_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0)
      return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

std::atomic<int> gThreads{0};
std::once_flag gInitOnce;

void initOnce() {
  std::call_once(gInitOnce, [] {
    int n = defaultThreads();
    int expected = 0;
    gThreads.compare_exchange_strong(expected, n);
    openblas_set_num_threads(1);
  });
}

/// True while the current thread executes a parallelFor body.
thread_local bool tInsideBody = false;

struct Job {
  const std::function<void(int64_t, int64_t)> *body = nullptr;
  int64_t n = 0;
  int64_t chunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
};

void runChunk(const Job &job, int64_t c) {
  int64_t b = job.n * c / job.chunks;
  int64_t e = job.n * (c + 1) / job.chunks;
  if (b < e)
    (*job.body)(b, e);
}

void runInline(int64_t n, int64_t chunks,
               const std::function<void(int64_t, int64_t)> &body) {
  bool saved = tInsideBody;
  tInsideBody = true;
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    if (b < e)
      body(b, e);
  }
  tInsideBody = saved;
}

/// Spin-then-sleep waiting. A worker that finished a job keeps polling for
/// the next one for a while before it blocks on the condition variable:
/// consecutive kernels follow each other within microseconds, and waking a
/// blocked thread costs tens of microseconds on a virtual machine (an IPI),
/// which is more than many of the kernels take. While spinning it first
/// executes `pause`, then yields the core to any other runnable thread.
constexpr auto kSpinPause = std::chrono::microseconds(50);
constexpr auto kSpinYield = std::chrono::milliseconds(2);

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Polls \p ready with pause, then sched_yield; returns true when it held,
/// false when the spin budget ran out.
template <typename Ready> bool spinUntil(Ready ready) {
  auto start = std::chrono::steady_clock::now();
  for (unsigned i = 0;; ++i) {
    if (ready())
      return true;
    if ((i & 255) == 255) {
      auto waited = std::chrono::steady_clock::now() - start;
      if (waited > kSpinYield)
        return false;
      if (waited > kSpinPause) {
        std::this_thread::yield();
        continue;
      }
    }
    cpuRelax();
  }
}

class Pool {
public:
  ~Pool() { resize(0); }

  /// Runs the job on the pool; the caller owns dispatchMutex.
  void run(Job &job, int workers) {
    if (static_cast<int>(threads_.size()) != workers)
      resize(workers);
    job_.store(&job);
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
      // Taking the mutex orders this notify after a sleeper's predicate
      // check (no lost wake-up).
      std::lock_guard<std::mutex> lock(mutex_);
      cv_.notify_all();
    }
    work(job);
    // The chunks other threads claimed: they take about as long as ours.
    auto finished = [&] { return job.done.load() == job.chunks; };
    if (!spinUntil(finished)) {
      std::unique_lock<std::mutex> lock(mutex_);
      doneCv_.wait(lock, finished);
    }
    // No worker may still hold the job when it goes out of scope: a worker
    // announces itself in active_ before it reads job_ (both seq_cst).
    job_.store(nullptr);
    while (active_.load() != 0)
      cpuRelax();
  }

  std::mutex dispatchMutex;

private:
  void work(Job &job) {
    bool saved = tInsideBody;
    tInsideBody = true;
    int64_t finished = 0;
    for (;;) {
      int64_t c = job.next.fetch_add(1);
      if (c >= job.chunks)
        break;
      runChunk(job, c);
      ++finished;
    }
    tInsideBody = saved;
    if (finished > 0 && job.done.fetch_add(finished) + finished == job.chunks) {
      std::lock_guard<std::mutex> lock(mutex_);
      doneCv_.notify_all();
    }
  }

  void workerLoop() {
    uint64_t seen = generation_.load();
    for (;;) {
      auto changed = [&] { return stop_.load() || generation_.load() != seen; };
      if (!spinUntil(changed)) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1);
        cv_.wait(lock, changed);
        sleepers_.fetch_sub(1);
      }
      if (stop_.load())
        return;
      seen = generation_.load();
      active_.fetch_add(1);
      if (Job *job = job_.load())
        work(*job);
      active_.fetch_sub(1);
    }
  }

  void resize(int workers) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_.store(true);
    }
    cv_.notify_all();
    for (auto &t : threads_)
      t.join();
    threads_.clear();
    stop_.store(false);
    for (int i = 0; i < workers; ++i)
      threads_.emplace_back([this] { workerLoop(); });
  }

  std::mutex mutex_;
  std::condition_variable cv_, doneCv_;
  std::atomic<Job *> job_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0}, sleepers_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

Pool &pool() {
  static Pool p;
  return p;
}

} // namespace

int threads() {
  initOnce();
  return gThreads.load(std::memory_order_relaxed);
}

void setThreads(int n) {
  initOnce();
  if (n <= 0)
    n = defaultThreads();
  gThreads.store(n);
}

void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  int t = threads();
  int64_t chunks = std::min<int64_t>(t, n);
  if (chunks <= 1) {
    bool saved = tInsideBody;
    tInsideBody = true;
    body(0, n);
    tInsideBody = saved;
    return;
  }
  if (tInsideBody) {
    runInline(n, chunks, body);
    return;
  }
  Pool &p = pool();
  std::unique_lock<std::mutex> lock(p.dispatchMutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    runInline(n, chunks, body);
    return;
  }
  Job job;
  job.body = &body;
  job.n = n;
  job.chunks = chunks;
  p.run(job, t - 1);
}

} // namespace mtc::cpu
