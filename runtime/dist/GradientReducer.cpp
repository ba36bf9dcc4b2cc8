//===- GradientReducer.cpp - Gradient sums on a thread of their own -------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/dist/GradientReducer.h"

#include <chrono>

namespace mtc::dist {

namespace {
double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
} // namespace

Expected<std::unique_ptr<GradientReducer>>
GradientReducer::create(Communicator &world) {
  Expected<std::unique_ptr<Communicator>> dup = world.duplicate();
  if (!dup)
    return dup.status();
  return std::unique_ptr<GradientReducer>(new GradientReducer(std::move(*dup)));
}

GradientReducer::GradientReducer(std::unique_ptr<Communicator> c)
    : comm(std::move(c)) {
  worker = std::thread([this] { loop(); });
}

GradientReducer::~GradientReducer() {
  {
    std::lock_guard<std::mutex> g(mu);
    stopping = true;
  }
  cv.notify_all();
  worker.join();
}

namespace {
/// The job that sums \p bufs in place.
GradientReducer::Job sumJob(GradientReducer::Buffers bufs) {
  return [bufs = std::move(bufs)](Communicator &c, int64_t &bytes) {
    for (const auto &[p, count] : bufs) {
      if (Status st = c.allreduceSum(p, count); !st)
        return st;
      bytes += 4 * count;
    }
    return Status::success();
  };
}
} // namespace

Status GradientReducer::run(const Job &job) {
  double t0 = now();
  auto begin = std::chrono::steady_clock::now();
  int64_t n = 0;
  Status st = job(*comm, n);
  if (observer)
    observer(begin, std::chrono::steady_clock::now(), n);
  std::lock_guard<std::mutex> g(mu);
  bytes_ += n;
  busy_ += now() - t0;
  return st;
}

void GradientReducer::loop() {
  std::unique_lock<std::mutex> lk(mu);
  for (;;) {
    cv.wait(lk, [&] { return stopping || !queue.empty(); });
    if (queue.empty())
      return;
    Job job = std::move(queue.front());
    queue.pop_front();
    busy = true;
    bool failed = !firstError.ok();
    lk.unlock();
    // After an error the rest is skipped: the collectives no longer match.
    Status st = failed ? Status::success() : run(job);
    lk.lock();
    if (!st && firstError.ok())
      firstError = st;
    busy = false;
    cv.notify_all();
  }
}

void GradientReducer::enqueue(Buffers bufs) {
  enqueue(sumJob(std::move(bufs)));
}

void GradientReducer::enqueue(Job job) {
  {
    std::lock_guard<std::mutex> g(mu);
    queue.push_back(std::move(job));
  }
  cv.notify_all();
}

Status GradientReducer::wait() {
  double t0 = now();
  std::unique_lock<std::mutex> lk(mu);
  cv.wait(lk, [&] { return queue.empty() && !busy; });
  exposed += now() - t0;
  Status st = firstError;
  firstError = Status::success();
  return st;
}

Status GradientReducer::reduceNow(const Buffers &bufs) {
  return run(sumJob(bufs));
}

Status GradientReducer::runNow(const Job &job) { return run(job); }

double GradientReducer::busySeconds() const {
  std::lock_guard<std::mutex> g(mu);
  return busy_;
}

void GradientReducer::resetStats() {
  std::lock_guard<std::mutex> g(mu);
  bytes_ = 0;
  exposed = busy_ = 0;
}

} // namespace mtc::dist
