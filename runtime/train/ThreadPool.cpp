//===- ThreadPool.cpp - A small fixed-size worker pool --------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/ThreadPool.h"

#include <algorithm>

namespace mtc::train {

ThreadPool::ThreadPool(unsigned numThreads) {
  if (numThreads == 0)
    numThreads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < numThreads; ++i)
    workers.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread &t : workers)
    t.join();
}

// Runs tasks until none is left. Called and returns with \p lock held.
static void drain(std::unique_lock<std::mutex> &lock,
                  const std::function<void(size_t)> *&job, size_t &jobTasks,
                  size_t &nextTask, size_t &finishedTasks) {
  while (job && nextTask < jobTasks) {
    size_t i = nextTask++;
    const std::function<void(size_t)> *fn = job;
    lock.unlock();
    (*fn)(i);
    lock.lock();
    ++finishedTasks;
  }
}

void ThreadPool::workerLoop() {
  unsigned long long seen = 0;
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    wake.wait(lock, [&] { return stopping || generation != seen; });
    if (stopping)
      return;
    seen = generation;
    ++busyWorkers;
    drain(lock, job, jobTasks, nextTask, finishedTasks);
    --busyWorkers;
    if (finishedTasks == jobTasks && busyWorkers == 0)
      done.notify_all();
  }
}

void ThreadPool::parallelFor(size_t numTasks,
                             const std::function<void(size_t)> &task) {
  if (numTasks == 0)
    return;
  if (workers.empty() || numTasks == 1) {
    for (size_t i = 0; i < numTasks; ++i)
      task(i);
    return;
  }
  std::unique_lock<std::mutex> lock(mu);
  job = &task;
  jobTasks = numTasks;
  nextTask = 0;
  finishedTasks = 0;
  ++generation;
  wake.notify_all();
  drain(lock, job, jobTasks, nextTask, finishedTasks);
  done.wait(lock,
            [&] { return finishedTasks == jobTasks && busyWorkers == 0; });
  job = nullptr;
  jobTasks = 0;
  nextTask = 0;
  finishedTasks = 0;
}

} // namespace mtc::train
