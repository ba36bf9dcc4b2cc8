//===- ThreadPool.h - A small fixed-size worker pool ------------*- C++ -*-===//
//
// Part of mtc. Persistent std::thread workers for the host-side training code
// (optimizer, initialisation, token validation). parallelFor hands out task
// indices dynamically; callers that need determinism make each task's result
// depend only on its index (fixed chunking), never on which thread ran it.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_TRAIN_THREADPOOL_H
#define MTC_RUNTIME_TRAIN_THREADPOOL_H

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mtc::train {

class ThreadPool {
public:
  /// \p numThreads total threads including the caller (0 = hardware
  /// concurrency; 1 = everything runs on the calling thread).
  explicit ThreadPool(unsigned numThreads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned numThreads() const {
    return static_cast<unsigned>(workers.size()) + 1;
  }

  /// Runs task(i) for every i in [0, numTasks) on the pool and the calling
  /// thread; returns when all are done. Not reentrant (one parallelFor at a
  /// time per pool).
  void parallelFor(size_t numTasks, const std::function<void(size_t)> &task);

private:
  void workerLoop();

  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable wake, done;
  const std::function<void(size_t)> *job = nullptr;
  size_t jobTasks = 0;
  size_t nextTask = 0;
  size_t finishedTasks = 0;
  unsigned busyWorkers = 0;
  unsigned long long generation = 0;
  bool stopping = false;
};

/// The chunks of [0, n) of size \p chunk (the last one shorter).
inline size_t numChunks(size_t n, size_t chunk) {
  return (n + chunk - 1) / chunk;
}

} // namespace mtc::train

#endif // MTC_RUNTIME_TRAIN_THREADPOOL_H
