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

Status GradientReducer::sum(const Buffers &bufs) {
  double t0 = now();
  int64_t n = 0;
  for (const auto &[p, count] : bufs) {
    if (Status st = comm->allreduceSum(p, count); !st)
      return st;
    n += count;
  }
  std::lock_guard<std::mutex> g(mu);
  bytes_ += 4 * n;
  busy_ += now() - t0;
  return Status::success();
}

void GradientReducer::loop() {
  std::unique_lock<std::mutex> lk(mu);
  for (;;) {
    cv.wait(lk, [&] { return stopping || !queue.empty(); });
    if (queue.empty())
      return;
    Buffers job = std::move(queue.front());
    queue.pop_front();
    busy = true;
    bool failed = !firstError.ok();
    lk.unlock();
    // After an error the rest is skipped: the collectives no longer match.
    Status st = failed ? Status::success() : sum(job);
    lk.lock();
    if (!st && firstError.ok())
      firstError = st;
    busy = false;
    cv.notify_all();
  }
}

void GradientReducer::enqueue(Buffers bufs) {
  {
    std::lock_guard<std::mutex> g(mu);
    queue.push_back(std::move(bufs));
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

Status GradientReducer::reduceNow(const Buffers &bufs) { return sum(bufs); }

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
