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
// - setThreads also sets OpenBLAS's thread count, so sgemm (called from the
//   top level, never from inside a parallelFor body) and our own loops use
//   the same number of cores and do not oversubscribe.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <atomic>
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
    openblas_set_num_threads(gThreads.load());
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

class Pool {
public:
  ~Pool() { resize(0); }

  /// Runs the job on the pool; the caller owns dispatchMutex.
  void run(Job &job, int workers) {
    if (static_cast<int>(threads_.size()) != workers)
      resize(workers);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      ++generation_;
    }
    cv_.notify_all();
    work(job);
    // Wait for the chunks other threads claimed.
    {
      std::unique_lock<std::mutex> lock(mutex_);
      doneCv_.wait(
          lock, [&] { return job.done.load() == job.chunks && active_ == 0; });
      job_ = nullptr;
    }
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
    if (finished > 0)
      job.done.fetch_add(finished);
  }

  void workerLoop() {
    uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen = generation_;
    }
    for (;;) {
      Job *job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_)
          return;
        seen = generation_;
        job = job_;
        if (job)
          ++active_; // the caller keeps the job alive while active_ > 0
      }
      if (!job)
        continue;
      work(*job);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        --active_;
      }
      doneCv_.notify_all();
    }
  }

  void resize(int workers) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto &t : threads_)
      t.join();
    threads_.clear();
    stop_ = false;
    for (int i = 0; i < workers; ++i)
      threads_.emplace_back([this] { workerLoop(); });
  }

  std::mutex mutex_;
  std::condition_variable cv_, doneCv_;
  Job *job_ = nullptr;
  uint64_t generation_ = 0;
  int active_ = 0;
  bool stop_ = false;
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
  openblas_set_num_threads(n);
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
