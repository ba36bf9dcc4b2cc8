//===- GradientReducer.h - Gradient sums on a thread of their own -*- C++
//-*-===//
//
// Part of mtc. Data-parallel training sums each layer instance's gradient
// over the ranks as soon as it is final (after the last micro-batch's
// backward of that instance), while the backward of the next instance runs:
// enqueue() hands the buffers (or, with a sharded optimizer, a job that
// reduce-scatters them) to the reducer's thread, which runs them over its own
// duplicate of the communicator, in the order they were enqueued (the same on
// every rank, so the collectives match). wait() blocks until every enqueued
// job is done; the time it blocks is the reduction time the backward did not
// hide ("exposed").
//
// Thread safety: enqueue(), wait() and the counters are for one driving
// thread (any one); reduceNow() may run on another thread only while nothing
// is enqueued.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DIST_GRADIENTREDUCER_H
#define MTC_RUNTIME_DIST_GRADIENTREDUCER_H

#include "runtime/dist/Communicator.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace mtc::dist {

class GradientReducer {
public:
  /// Float buffers, each (address, elements).
  using Buffers = std::vector<std::pair<float *, int64_t>>;
  /// Collectives over the reducer's communicator; adds the bytes it reduced
  /// to its second argument.
  using Job = std::function<Status(Communicator &, int64_t &)>;

  /// Reduces over a duplicate of \p world (its own collectives).
  static Expected<std::unique_ptr<GradientReducer>> create(Communicator &world);
  ~GradientReducer();

  /// Sums \p bufs over the ranks on the reducer's thread, in place.
  void enqueue(Buffers bufs);
  /// Runs \p job on the reducer's thread, after the jobs before it.
  void enqueue(Job job);
  /// Blocks until every enqueued sum is done; the first error since the last
  /// wait().
  Status wait();
  /// Sums \p bufs now on the calling thread (nothing may be enqueued).
  Status reduceNow(const Buffers &bufs);
  /// Runs \p job now on the calling thread (nothing may be enqueued).
  Status runNow(const Job &job);

  /// Bytes summed and seconds wait() blocked since the last resetStats().
  int64_t bytes() const { return bytes_; }
  double exposedSeconds() const { return exposed; }
  /// Called on the running thread after each job with its start, end and
  /// bytes (a timeline, --trace); null: none. Set before enqueueing.
  using Observer =
      std::function<void(std::chrono::steady_clock::time_point,
                         std::chrono::steady_clock::time_point, int64_t)>;
  void setObserver(Observer fn) { observer = std::move(fn); }
  /// Seconds the reducer's collectives ran since the last resetStats().
  double busySeconds() const;
  void resetStats();

private:
  explicit GradientReducer(std::unique_ptr<Communicator> comm);
  void loop();
  Status run(const Job &job);

  std::unique_ptr<Communicator> comm;
  std::thread worker;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Job> queue;
  bool busy = false, stopping = false;
  Status firstError = Status::success();
  Observer observer;
  int64_t bytes_ = 0;
  double exposed = 0, busy_ = 0;
};

} // namespace mtc::dist

#endif // MTC_RUNTIME_DIST_GRADIENTREDUCER_H
