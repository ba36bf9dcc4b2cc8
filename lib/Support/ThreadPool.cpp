//===- ThreadPool.cpp - Persistent worker threads -------------------------===//
//
// Part of mtc. See ThreadPool.h.
//
// A call publishes a Job (the task and an atomic index counter) and bumps the
// generation; workers that see a new generation announce themselves in
// `active`, claim indices until none is left and add what they ran to
// `done`. The caller claims indices too, then waits until `done` reaches the
// count, clears the job and waits for `active` to drop to zero, so that no
// worker still reads the Job when it goes out of scope.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/ThreadPool.h"

#include <algorithm>
#include <chrono>

namespace mtc {

struct ThreadPool::Job {
  const std::function<void(size_t)> *task = nullptr;
  size_t count = 0;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
};

namespace {

/// True while the current thread runs a task of some pool.
thread_local bool tInsideTask = false;

/// Sets tInsideTask for a scope and restores it.
class InsideTask {
public:
  InsideTask() : saved(tInsideTask) { tInsideTask = true; }
  ~InsideTask() { tInsideTask = saved; }

private:
  bool saved;
};

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

unsigned hardwareThreads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

} // namespace

ThreadPool::ThreadPool(unsigned numThreads, Wait wait)
    : waitPolicy(wait),
      wanted(numThreads == 0 ? hardwareThreads() : numThreads) {}

ThreadPool::~ThreadPool() {
  std::lock_guard<std::mutex> lock(dispatchMutex);
  resize(0);
}

void ThreadPool::setNumThreads(unsigned numThreads) {
  wanted.store(numThreads == 0 ? hardwareThreads() : numThreads);
}

bool ThreadPool::insideTask() { return tInsideTask; }

void ThreadPool::runInline(size_t numTasks,
                           const std::function<void(size_t)> &task) {
  InsideTask inside;
  for (size_t i = 0; i < numTasks; ++i)
    task(i);
}

void ThreadPool::parallelFor(size_t numTasks,
                             const std::function<void(size_t)> &task) {
  if (numTasks == 0)
    return;
  if (numTasks == 1 || wanted.load() <= 1 || tInsideTask)
    return runInline(numTasks, task);
  std::unique_lock<std::mutex> serving(dispatchMutex, std::try_to_lock);
  if (!serving.owns_lock())
    return runInline(numTasks, task);

  unsigned workerCount = wanted.load() - 1;
  if (workers.size() != workerCount)
    resize(workerCount);
  Job current;
  current.task = &task;
  current.count = numTasks;
  job.store(&current);
  generation.fetch_add(1);
  if (waitPolicy == Wait::Block || sleepers.load() > 0) {
    // Taking the mutex orders this notify after a sleeper's predicate check
    // (no lost wake-up).
    std::lock_guard<std::mutex> lock(mutex);
    wake.notify_all();
  }
  work(current);
  // The indices other threads claimed take about as long as ours.
  auto allDone = [&] { return current.done.load() == current.count; };
  if (waitPolicy == Wait::Block || !spinUntil(allDone)) {
    std::unique_lock<std::mutex> lock(mutex);
    finished.wait(lock, allDone);
  }
  // A worker announces itself in `active` before it reads `job` (both
  // seq_cst): once `active` is zero with the job cleared, none holds it.
  job.store(nullptr);
  while (active.load() != 0)
    cpuRelax();
}

void ThreadPool::work(Job &current) {
  size_t ran = 0;
  {
    InsideTask inside;
    for (;;) {
      size_t i = current.next.fetch_add(1);
      if (i >= current.count)
        break;
      (*current.task)(i);
      ++ran;
    }
  }
  if (ran > 0 && current.done.fetch_add(ran) + ran == current.count) {
    std::lock_guard<std::mutex> lock(mutex);
    finished.notify_all();
  }
}

void ThreadPool::workerLoop(uint64_t seen) {
  for (;;) {
    auto changed = [&] { return stopping.load() || generation.load() != seen; };
    if (waitPolicy == Wait::Block || !spinUntil(changed)) {
      std::unique_lock<std::mutex> lock(mutex);
      sleepers.fetch_add(1);
      wake.wait(lock, changed);
      sleepers.fetch_sub(1);
    }
    if (stopping.load())
      return;
    seen = generation.load();
    active.fetch_add(1);
    if (Job *current = job.load())
      work(*current);
    active.fetch_sub(1);
  }
}

void ThreadPool::resize(unsigned workerCount) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping.store(true);
  }
  wake.notify_all();
  for (std::thread &t : workers)
    t.join();
  workers.clear();
  stopping.store(false);
  // The generation before the next call's: a new worker serves that call.
  uint64_t seen = generation.load();
  for (unsigned i = 0; i < workerCount; ++i)
    workers.emplace_back([this, seen] { workerLoop(seen); });
}

} // namespace mtc
