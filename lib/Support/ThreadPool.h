//===- ThreadPool.h - Persistent worker threads -----------------*- C++ -*-===//
//
// Part of mtc. The one pool of std::thread workers in lib/ and runtime/: the
// CPU kernels' global pool (runtime/cpu parallelFor) and the host-side
// training pools (AdamW, initialisation, token validation) are instances of
// it. parallelFor(n, task) runs task(i) for every i in [0, n) on the workers
// and the calling thread, which claim indices from an atomic counter: which
// thread runs an index varies, the indices do not, so a caller whose tasks
// depend only on their index (fixed chunking) gets deterministic results.
//
// Thread safety. Any thread may call parallelFor at any time. The pool serves
// one call at a time; a call that finds it busy, and a call made from inside
// a task (of any pool), runs its tasks on the calling thread, in index order,
// instead of waiting: nested and concurrent calls never deadlock and run the
// same indices.
//
// Waiting. Blocking workers sleep on a condition variable between calls.
// Spinning workers first poll for the next call for up to 2 ms (a `pause`
// loop, then sched_yield) before they sleep: consecutive kernels follow each
// other within microseconds, and waking a blocked thread costs tens of
// microseconds on a virtual machine, more than many kernels take.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_THREADPOOL_H
#define MTC_LIB_SUPPORT_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mtc {

class ThreadPool {
public:
  /// How idle workers wait for the next call (see the file comment).
  enum class Wait { Block, Spin };

  /// \p numThreads threads in all, the caller included (0: the hardware
  /// concurrency; 1: everything runs on the calling thread). Workers start
  /// on the first parallelFor that needs them.
  explicit ThreadPool(unsigned numThreads = 0, Wait wait = Wait::Block);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// The threads a call uses, the caller included.
  unsigned numThreads() const { return wanted.load(); }
  /// Changes numThreads() (0: the hardware concurrency). Takes effect at the
  /// next call the pool serves; safe while another call runs.
  void setNumThreads(unsigned numThreads);

  /// Runs task(i) for every i in [0, numTasks) and returns when all are
  /// done; an index runs exactly once. See the file comment.
  void parallelFor(size_t numTasks, const std::function<void(size_t)> &task);

  /// True while the calling thread runs a task of some pool.
  static bool insideTask();

private:
  struct Job;
  void runInline(size_t numTasks, const std::function<void(size_t)> &task);
  void work(Job &job);
  void workerLoop(uint64_t seen);
  void resize(unsigned workers);
  template <typename Ready> void waitUntil(Ready ready);

  const Wait waitPolicy;
  std::atomic<unsigned> wanted;
  std::mutex dispatchMutex; ///< held by the call the pool serves
  std::mutex mutex;         ///< guards sleeping and waking
  std::condition_variable wake, finished;
  std::atomic<Job *> job{nullptr};
  std::atomic<uint64_t> generation{0};
  std::atomic<int> active{0}, sleepers{0};
  std::atomic<bool> stopping{false};
  std::vector<std::thread> workers;
};

/// The chunks of [0, n) of size \p chunk (the last one shorter).
inline size_t numChunks(size_t n, size_t chunk) {
  return (n + chunk - 1) / chunk;
}

} // namespace mtc

#endif // MTC_LIB_SUPPORT_THREADPOOL_H
