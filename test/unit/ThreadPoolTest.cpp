//===- ThreadPoolTest.cpp - The one worker pool ---------------------------===//
//
// Part of mtc. lib/Support/ThreadPool.h under both wait policies: every index
// runs exactly once, on several threads when the pool has them; nested and
// concurrent calls run inline instead of deadlocking; resizing between calls.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using mtc::ThreadPool;

namespace {

class ThreadPoolTest : public ::testing::TestWithParam<ThreadPool::Wait> {};

TEST_P(ThreadPoolTest, EveryIndexOnce) {
  ThreadPool pool(4, GetParam());
  for (size_t n : {0u, 1u, 3u, 1000u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallelFor(n, [&](size_t i) { hits[i].fetch_add(1); });
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(hits[i].load(), 1) << "index " << i << " of " << n;
  }
}

TEST_P(ThreadPoolTest, UsesSeveralThreads) {
  ThreadPool pool(4, GetParam());
  EXPECT_EQ(pool.numThreads(), 4u);
  std::mutex mu;
  std::set<std::thread::id> ids;
  // Each task waits until a second thread has joined in (or a deadline).
  std::atomic<int> started{0};
  pool.parallelFor(4, [&](size_t) {
    started.fetch_add(1);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GE(ids.size(), 2u);
}

TEST_P(ThreadPoolTest, OneThreadRunsOnTheCaller) {
  ThreadPool pool(1, GetParam());
  std::thread::id caller = std::this_thread::get_id();
  std::vector<size_t> order;
  pool.parallelFor(5, [&](size_t i) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_TRUE(ThreadPool::insideTask());
    order.push_back(i);
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(ThreadPool::insideTask());
}

TEST_P(ThreadPoolTest, NestedCallsRunInline) {
  ThreadPool pool(3, GetParam());
  std::atomic<int> total{0};
  pool.parallelFor(6, [&](size_t) {
    std::thread::id self = std::this_thread::get_id();
    pool.parallelFor(4, [&](size_t) {
      EXPECT_EQ(std::this_thread::get_id(), self);
      total.fetch_add(1);
    });
  });
  EXPECT_EQ(total.load(), 24);
}

TEST_P(ThreadPoolTest, ConcurrentCallersAllFinish) {
  ThreadPool pool(3, GetParam());
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r)
        pool.parallelFor(8, [&](size_t) { total.fetch_add(1); });
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 8);
}

TEST_P(ThreadPoolTest, ResizesBetweenCalls) {
  ThreadPool pool(2, GetParam());
  std::atomic<int> total{0};
  for (unsigned t : {4u, 1u, 3u}) {
    pool.setNumThreads(t);
    EXPECT_EQ(pool.numThreads(), t);
    pool.parallelFor(100, [&](size_t) { total.fetch_add(1); });
  }
  EXPECT_EQ(total.load(), 300);
  pool.setNumThreads(0);
  EXPECT_GE(pool.numThreads(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Wait, ThreadPoolTest,
                         ::testing::Values(ThreadPool::Wait::Block,
                                           ThreadPool::Wait::Spin));

} // namespace
