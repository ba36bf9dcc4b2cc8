//===- CudaDevice.cpp - A GPU behind the Device interface -----------------===//
//
// Part of mtc. See CudaDevice.h. One mutex guards the stream and event
// tables, the pending timings and the statistics; it is never held while a
// closure runs or while the driver blocks.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/CudaDevice.h"

#include "lib/Support/ByteSize.h"

#include "runtime/device/CpuDevice.h"
#include "runtime/device/Trace.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

namespace mtc::device {

namespace {

/// The device whose closure the current thread runs (nullptr elsewhere).
thread_local const CudaDevice *currentDevice = nullptr;

/// A failed driver call or bad argument inside this file: thrown by check()
/// and the other helpers, caught by guarded() in every public method and
/// returned as a Status. No exception leaves this file.
struct Failure {
  std::string message;
};

[[noreturn]] void raise(std::string message) {
  throw Failure{std::move(message)};
}

/// Runs \p body; a Failure it throws becomes the error Status.
template <typename F> Status guarded(F &&body) {
  try {
    body();
    return Status::success();
  } catch (const Failure &e) {
    return Status::error(e.message);
  }
}

} // namespace

void CudaDevice::check(int rc, const std::string &what) const {
  if (rc != cuda::kCudaSuccess)
    raise(deviceName + ": " + what + ": " + cuda::cudaErrorText(*api, rc));
}

CudaDevice::CudaDevice(std::shared_ptr<const cuda::CudaDriverApi> driverApi,
                       int64_t capacity, int ordinal)
    : api(std::move(driverApi)), capacityBytes(capacity),
      statsOrigin(Clock::now()) {
  deviceName = "cuda:" + std::to_string(ordinal);
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  unsigned threads = std::clamp(cores / 2, 1u, 8u);
  if (const char *env = std::getenv("MTC_CONVERT_THREADS")) {
    char *end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (!*env || *end || v < 1 || v > 1024)
      raise("MTC_CONVERT_THREADS='" + std::string(env) +
            "': expected a number of threads from 1 to 1024");
    threads = static_cast<unsigned>(v);
  }
  convertPool.setNumThreads(threads);
  if (capacity < 0)
    raise(deviceName + ": negative arena capacity " + std::to_string(capacity));
  int count = 0;
  check(api->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    raise("no CUDA device " + std::to_string(ordinal) + " (" +
          std::to_string(count) + " found by " + api->where + ")");
  check(api->cuDeviceGet(&device, ordinal), "cuDeviceGet");
  char name[256] = {0};
  check(api->cuDeviceGetName(name, sizeof name - 1, device), "cuDeviceGetName");
  deviceName += " (" + std::string(name) + ")";
  check(api->cuDeviceGetAttribute(
            &capability.first, cuda::kCuDevAttrComputeCapabilityMajor, device),
        "cuDeviceGetAttribute");
  check(api->cuDeviceGetAttribute(
            &capability.second, cuda::kCuDevAttrComputeCapabilityMinor, device),
        "cuDeviceGetAttribute");
  check(api->cuDevicePrimaryCtxRetain(&context, device),
        "cuDevicePrimaryCtxRetain");
  check(api->cuCtxSetCurrent(context), "cuCtxSetCurrent");
  if (capacity > 0) {
    int rc = api->cuMemAlloc_v2(&arena, static_cast<size_t>(capacity));
    if (rc != cuda::kCudaSuccess) {
      size_t free = 0, total = 0;
      api->cuMemGetInfo_v2(&free, &total);
      api->cuDevicePrimaryCtxRelease_v2(device);
      raise(deviceName + ": cannot allocate the " + formatBytes(capacity) +
            " arena (" + formatBytes(static_cast<int64_t>(free)) + " free of " +
            formatBytes(static_cast<int64_t>(total)) +
            "): " + cuda::cudaErrorText(*api, rc));
    }
  }
  check(api->cuStreamCreate(&clockStream, cuda::kCuStreamNonBlocking),
        "cuStreamCreate");
  check(api->cuEventCreate(&baseEvent, 0), "cuEventCreate");
  check(api->cuEventRecord(baseEvent, clockStream), "cuEventRecord");
  check(api->cuEventSynchronize(baseEvent), "cuEventSynchronize");
  baseHost = Clock::now();
}

Expected<std::unique_ptr<CudaDevice>>
CudaDevice::create(std::shared_ptr<const cuda::CudaDriverApi> api,
                   int64_t capacityBytes, int ordinal) {
  std::unique_ptr<CudaDevice> dev;
  Status st = guarded([&] {
    dev.reset(new CudaDevice(std::move(api), capacityBytes, ordinal));
  });
  if (!st)
    return st;
  return dev;
}

CudaDevice::~CudaDevice() {
  // Queued work completes first (CUDA destroys streams after their work);
  // errors are not reported from a destructor.
  api->cuCtxSetCurrent(context);
  for (auto &st : streams)
    api->cuStreamSynchronize(st->cu);
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    for (auto &st : streams)
      st->wake.notify_all();
  }
  for (auto &st : streams) {
    if (st->worker.joinable())
      st->worker.join();
    api->cuStreamDestroy_v2(st->cu);
    api->cuMemFreeHost(st->counter);
  }
  for (auto &[b, size] : stagingSize)
    api->cuMemFreeHost(b);
  for (void *e : events)
    api->cuEventDestroy_v2(e);
  for (void *e : freeEvents)
    api->cuEventDestroy_v2(e);
  for (auto &[p, bytes] : registered)
    api->cuMemHostUnregister(p);
  api->cuEventDestroy_v2(baseEvent);
  api->cuStreamDestroy_v2(clockStream);
  if (arena)
    api->cuMemFree_v2(arena);
  api->cuDevicePrimaryCtxRelease_v2(device);
}

void CudaDevice::checkRange(const std::string &what, int64_t offset,
                            int64_t bytes) const {
  if (offset >= 0 && bytes >= 0 && offset <= capacityBytes &&
      bytes <= capacityBytes - offset)
    return;
  std::string range = bytes >= 0 && offset >= 0 && offset <= INT64_MAX - bytes
                          ? " [" + std::to_string(offset) + ", " +
                                std::to_string(offset + bytes) + ")"
                          : "";
  raise(deviceName + ": " + what + ": " + std::to_string(bytes) +
        " bytes at offset " + std::to_string(offset) + range +
        " are outside the arena (capacity " + std::to_string(capacityBytes) +
        " bytes)");
}

Expected<void *> CudaDevice::at(int64_t offset, int64_t bytes) {
  if (Status st = guarded([&] { checkRange("at()", offset, bytes); }); !st)
    return st;
  return static_cast<void *>(reinterpret_cast<char *>(arena) + offset);
}

Expected<Stream> CudaDevice::createStream(const std::string &label) {
  Stream id;
  Status status = guarded([&] { id = createStreamOrRaise(label); });
  if (!status)
    return status;
  return id;
}

Stream CudaDevice::createStreamOrRaise(const std::string &label) {
  api->cuCtxSetCurrent(context);
  auto st = std::make_unique<StreamState>();
  check(api->cuStreamCreate(&st->cu, cuda::kCuStreamNonBlocking),
        "cuStreamCreate");
  void *counter = nullptr;
  check(api->cuMemAllocHost_v2(&counter, 64), "cuMemAllocHost");
  st->counter = new (counter) std::atomic<uint32_t>(0);
  check(api->cuMemHostGetDevicePointer_v2(&st->counterDevice, counter, 0),
        "cuMemHostGetDevicePointer");
  std::lock_guard<std::mutex> issue(issueMu);
  std::lock_guard<std::mutex> lock(mu);
  st->id = static_cast<int>(streams.size());
  std::string base = label.empty() ? "stream " + std::to_string(st->id) : label;
  st->trackName = base;
  for (auto &other : streams)
    if (other->trackName == base)
      st->trackName = base + " #" + std::to_string(st->id);
  st->timeline.label = st->trackName;
  if (trace)
    st->traceTrack = trace->track(st->trackName);
  StreamState *p = st.get();
  streams.push_back(std::move(st));
  p->worker = std::thread([this, p] { runHostJobs(*p); });
  return Stream(p->id);
}

Expected<Stream> CudaDevice::createHostStream(const std::string &label) {
  Expected<Stream> s = createStream(label);
  if (!s)
    return s;
  std::lock_guard<std::mutex> lock(mu);
  streams[static_cast<size_t>(static_cast<int>(*s))]->timeline.hostWork = true;
  return s;
}

Expected<Event> CudaDevice::createEvent() {
  api->cuCtxSetCurrent(context);
  void *e = nullptr;
  if (Status st = guarded([&] {
        check(api->cuEventCreate(&e, cuda::kCuEventDisableTiming),
              "cuEventCreate");
      });
      !st)
    return st;
  std::lock_guard<std::mutex> lock(mu);
  events.push_back(e);
  eventRecords.push_back(0);
  return Event(static_cast<int>(events.size() - 1));
}

CudaDevice::StreamState &CudaDevice::streamLocked(Stream s, const char *what) {
  if (s < 0 || static_cast<size_t>(s) >= streams.size())
    raise(deviceName + ": " + what + ": no stream " + std::to_string(s) + " (" +
          std::to_string(streams.size()) + " created)");
  return *streams[s];
}

void *CudaDevice::eventLocked(Event e, const char *what) {
  if (e < 0 || static_cast<size_t>(e) >= events.size())
    raise(deviceName + ": " + what + ": no event " + std::to_string(e) + " (" +
          std::to_string(events.size()) + " created)");
  return events[e];
}

void *CudaDevice::takeTimingEvent() {
  if (!freeEvents.empty()) {
    void *e = freeEvents.back();
    freeEvents.pop_back();
    return e;
  }
  void *e = nullptr;
  check(api->cuEventCreate(&e, 0), "cuEventCreate");
  return e;
}

void CudaDevice::enqueueHostJob(StreamState &st, std::function<void()> fn,
                                std::shared_ptr<Pending> p) {
  // The caller holds issueMu, not mu: a driver call that blocks (a full
  // command queue) must leave the host threads free to make progress.
  HostJob job;
  {
    std::lock_guard<std::mutex> lock(mu);
    job.after = takeTimingEvent();
  }
  check(api->cuEventRecord(job.after, st.cu), "cuEventRecord");
  job.fn = std::move(fn);
  job.ticket = ++st.tickets;
  job.pending = std::move(p);
  check(api->cuStreamWaitValue32_v2(st.cu, st.counterDevice, job.ticket,
                                    cuda::kCuStreamWaitValueGeq),
        "cuStreamWaitValue32");
  std::lock_guard<std::mutex> lock(mu);
  st.jobs.push_back(std::move(job));
  st.wake.notify_one();
}

void CudaDevice::runHostJobs(StreamState &st) {
  currentDevice = this;
  api->cuCtxSetCurrent(context);
  std::unique_lock<std::mutex> lock(mu);
  while (true) {
    st.wake.wait(lock, [&] { return stopping || !st.jobs.empty(); });
    if (st.jobs.empty())
      break; // stopping with nothing left
    HostJob job = std::move(st.jobs.front());
    st.jobs.pop_front();
    lock.unlock();
    int rc = api->cuEventSynchronize(job.after);
    std::string error;
    bool skipped = isFailed.load();
    Clock::time_point begin = Clock::now();
    if (rc != cuda::kCudaSuccess) {
      error = "waiting for the stream's earlier work: " +
              cuda::cudaErrorText(*api, rc);
    } else if (!skipped) {
      try {
        job.fn();
      } catch (const std::exception &e) {
        error = e.what();
      } catch (...) {
        error = "unknown exception";
      }
    }
    Clock::time_point end = Clock::now();
    lock.lock();
    if (!error.empty())
      fail(deviceName + ": stream '" + st.trackName + "': " +
           (job.pending ? job.pending->label : "launch") + ": " + error);
    freeEvents.push_back(job.after);
    if (job.pending) {
      job.pending->begin = begin;
      job.pending->finish = end;
      job.pending->skipped = skipped;
      job.pending->hostDone = true;
    }
    // Releases the stream's later GPU work (and synchronize()).
    st.counter->store(job.ticket, std::memory_order_release);
  }
  currentDevice = nullptr;
}

void CudaDevice::fail(const std::string &message) {
  if (!isFailed.exchange(true))
    firstError = Status::error(message);
}

void CudaDevice::raiseIfFailed() const {
  std::lock_guard<std::mutex> lock(mu);
  if (isFailed)
    raise(firstError.message());
}

void CudaDevice::checkNotOnDevice(const char *what) const {
  if (currentDevice == this)
    raise(deviceName + ": " + what +
          " called from a command running on a stream of the same device (it "
          "would wait for itself)");
}

bool CudaDevice::isPinnedLocked(const void *p, int64_t bytes) const {
  auto a = reinterpret_cast<uintptr_t>(p);
  for (const auto &[base, size] : registered) {
    auto b = reinterpret_cast<uintptr_t>(base);
    if (a >= b && a - b <= static_cast<uintptr_t>(size) &&
        static_cast<uintptr_t>(bytes) <= b + size - a)
      return true;
  }
  return false;
}

void *CudaDevice::takeStaging(int64_t bytes) {
  size_t size = 4096;
  while (size < static_cast<size_t>(bytes))
    size *= 2;
  {
    std::lock_guard<std::mutex> lock(stagingMu);
    auto &free = stagingFree[size];
    if (!free.empty()) {
      void *b = free.back();
      free.pop_back();
      return b;
    }
  }
  void *b = nullptr;
  check(api->cuMemAllocHost_v2(&b, size), "cuMemAllocHost (staging)");
  std::lock_guard<std::mutex> lock(stagingMu);
  stagingSize[b] = size;
  return b;
}

void CudaDevice::giveStaging(void *b) const {
  std::lock_guard<std::mutex> lock(stagingMu);
  stagingFree[stagingSize.at(b)].push_back(b);
}

void CudaDevice::convert(const void *src, void *dst, int64_t n) {
  // Fixed 256K-value chunks: the result does not depend on the threads (the
  // conversion is elementwise anyway).
  constexpr int64_t chunk = 1 << 18;
  size_t tasks = static_cast<size_t>((n + chunk - 1) / chunk);
  convertPool.parallelFor(tasks, [&](size_t t) {
    int64_t b = static_cast<int64_t>(t) * chunk;
    convertF32ToBF16(static_cast<const float *>(src) + b,
                     static_cast<uint16_t *>(dst) + b, std::min(chunk, n - b));
  });
}

Status CudaDevice::copyToDevice(Stream s, int64_t dst, const void *src,
                                int64_t bytes, Convert c,
                                const std::string &label) {
  return guarded([&] { copyToDeviceOrRaise(s, dst, src, bytes, c, label); });
}

void CudaDevice::copyToDeviceOrRaise(Stream s, int64_t dst, const void *src,
                                     int64_t bytes, Convert c,
                                     const std::string &label) {
  int64_t written = bytes;
  if (c == Convert::F32ToBF16) {
    if (bytes % 4 != 0)
      raise(deviceName + ": copyToDevice f32->bf16 of " +
            std::to_string(bytes) +
            " bytes: not a whole number of fp32 values");
    written = bytes / 2;
  }
  std::string what = "copyToDevice" + (label.empty() ? "" : " '" + label + "'");
  checkRange(what, dst, written);
  if (!src && bytes > 0)
    raise(deviceName + ": " + what + ": null host source");
  api->cuCtxSetCurrent(context);
  std::lock_guard<std::mutex> issue(issueMu);
  StreamState *st;
  bool pinned;
  {
    std::lock_guard<std::mutex> lock(mu);
    st = &streamLocked(s, "copyToDevice");
    pinned = c == Convert::None && isPinnedLocked(src, bytes);
  }
  auto p = std::make_shared<Pending>();
  p->stream = st->id;
  p->kind = Kind::CopyH2D;
  p->bytes = written;
  p->label = label.empty() ? "copy h2d " + std::to_string(bytes) + " bytes" +
                                 (c == Convert::F32ToBF16 ? " f32->bf16" : "")
                           : label;
  if (queueIfNothingToDo(p, written))
    return;
  const void *from = src;
  if (!pinned) {
    // Pageable memory (or a conversion): read in stream order on the host
    // thread into pinned staging, so the DMA is asynchronous. The driver's
    // own pageable path would block this thread until the stream gets here.
    p->staging = takeStaging(written);
    void *staging = p->staging;
    if (c == Convert::F32ToBF16)
      enqueueHostJob(
          *st,
          [this, src, staging, bytes] { convert(src, staging, bytes / 4); },
          nullptr);
    else
      enqueueHostJob(
          *st, [src, staging, bytes] { std::memcpy(staging, src, bytes); },
          nullptr);
    from = staging;
  }
  issueTimed(*st, p, [&] {
    check(api->cuMemcpyHtoDAsync_v2(arena + static_cast<uint64_t>(dst), from,
                                    static_cast<size_t>(written), st->cu),
          what);
  });
}

Status CudaDevice::copyToHost(Stream s, void *dst, int64_t src, int64_t bytes,
                              const std::string &label, Convert c) {
  return guarded([&] { copyToHostOrRaise(s, dst, src, bytes, label, c); });
}

void CudaDevice::copyToHostOrRaise(Stream s, void *dst, int64_t src,
                                   int64_t bytes, const std::string &label,
                                   Convert c) {
  std::string what = "copyToHost" + (label.empty() ? "" : " '" + label + "'");
  checkRange(what, src, bytes);
  if (c == Convert::F32ToBF16 && bytes % 4 != 0)
    raise(deviceName + ": " + what + " f32->bf16 of " + std::to_string(bytes) +
          " bytes: not a whole number of fp32 values");
  if (!dst && bytes > 0)
    raise(deviceName + ": " + what + ": null host destination");
  api->cuCtxSetCurrent(context);
  std::lock_guard<std::mutex> issue(issueMu);
  StreamState *st;
  bool pinned;
  {
    std::lock_guard<std::mutex> lock(mu);
    st = &streamLocked(s, "copyToHost");
    pinned = c == Convert::None && isPinnedLocked(dst, bytes);
  }
  auto p = std::make_shared<Pending>();
  p->stream = st->id;
  p->kind = Kind::CopyD2H;
  p->bytes = bytes;
  p->label = label.empty() ? "copy d2h " + std::to_string(bytes) + " bytes" +
                                 (c == Convert::F32ToBF16 ? " f32->bf16" : "")
                           : label;
  if (queueIfNothingToDo(p, bytes))
    return;
  void *to = dst;
  if (!pinned) {
    p->staging = takeStaging(bytes);
    to = p->staging;
  }
  // Pageable destination (or a conversion): the stream's host thread copies
  // (converts) the staging buffer out once the DMA is done (the driver's own
  // pageable path would block this thread until then); harvest() waits for
  // that too.
  p->needsHost = !pinned;
  issueTimed(*st, p, [&] {
    check(api->cuMemcpyDtoHAsync_v2(to, arena + static_cast<uint64_t>(src),
                                    static_cast<size_t>(bytes), st->cu),
          what);
  });
  if (!pinned) {
    void *staging = p->staging;
    if (c == Convert::F32ToBF16)
      enqueueHostJob(
          *st,
          [this, dst, staging, bytes] { convert(staging, dst, bytes / 4); }, p);
    else
      enqueueHostJob(
          *st, [dst, staging, bytes] { std::memcpy(dst, staging, bytes); }, p);
  }
}

Status CudaDevice::launch(Stream s, std::function<void()> fn,
                          const std::string &label) {
  if (!fn)
    return Status::error(deviceName + ": launch '" + label +
                         "': empty function");
  return guarded([&] { launchOrRaise(s, std::move(fn), label); });
}

void CudaDevice::launchOrRaise(Stream s, std::function<void()> fn,
                               const std::string &label) {
  api->cuCtxSetCurrent(context);
  std::lock_guard<std::mutex> issue(issueMu);
  StreamState *st;
  auto p = std::make_shared<Pending>();
  p->kind = Kind::Launch;
  p->label = label.empty() ? "launch" : label;
  {
    std::lock_guard<std::mutex> lock(mu);
    st = &streamLocked(s, "launch");
    p->stream = st->id;
    pending.push_back(p);
  }
  enqueueHostJob(*st, std::move(fn), p);
}

Status CudaDevice::compute(Stream s, const std::function<Status(void *)> &fn,
                           const std::string &label) {
  if (!fn)
    return Status::error(deviceName + ": compute '" + label +
                         "': empty function");
  Status result;
  Status st = guarded([&] { result = computeOrRaise(s, fn, label); });
  return st ? result : st;
}

Status CudaDevice::computeOrRaise(Stream s,
                                  const std::function<Status(void *)> &fn,
                                  const std::string &label) {
  checkNotOnDevice("compute");
  raiseIfFailed();
  api->cuCtxSetCurrent(context);
  auto p = std::make_shared<Pending>();
  p->kind = Kind::Compute;
  p->label = label.empty() ? "compute" : label;
  StreamState *st;
  {
    std::lock_guard<std::mutex> lock(mu);
    st = &streamLocked(s, "compute");
    p->stream = st->id;
    p->start = takeTimingEvent();
    p->end = takeTimingEvent();
  }
  // fn queues its kernels itself and its copies through this device, so
  // the issue lock is held only around the timing events.
  auto finish = [&] {
    {
      std::lock_guard<std::mutex> issue(issueMu);
      check(api->cuEventRecord(p->end, st->cu), "cuEventRecord");
    }
    std::lock_guard<std::mutex> lock(mu);
    pending.push_back(p);
  };
  {
    std::lock_guard<std::mutex> issue(issueMu);
    check(api->cuEventRecord(p->start, st->cu), "cuEventRecord");
  }
  Status result;
  try {
    result = fn(st->cu);
  } catch (...) {
    finish();
    throw;
  }
  finish();
  return result;
}

void CudaDevice::traceSync(StreamState &st, Kind kind, const std::string &label,
                           const std::function<void()> &command) {
  if (!trace) {
    command();
    return;
  }
  auto p = std::make_shared<Pending>();
  p->stream = st.id;
  p->kind = kind;
  p->label = label;
  issueTimed(st, std::move(p), command);
}

void CudaDevice::issueTimed(StreamState &st, std::shared_ptr<Pending> p,
                            const std::function<void()> &command) {
  {
    std::lock_guard<std::mutex> lock(mu);
    p->start = takeTimingEvent();
    p->end = takeTimingEvent();
  }
  check(api->cuEventRecord(p->start, st.cu), "cuEventRecord");
  command();
  check(api->cuEventRecord(p->end, st.cu), "cuEventRecord");
  std::lock_guard<std::mutex> lock(mu);
  pending.push_back(std::move(p));
}

bool CudaDevice::queueIfNothingToDo(const std::shared_ptr<Pending> &p,
                                    int64_t bytes) {
  if (!isFailed && bytes != 0)
    return false;
  p->skipped = isFailed;
  std::lock_guard<std::mutex> lock(mu);
  pending.push_back(p);
  return true;
}

Status CudaDevice::record(Event e, Stream s) {
  return guarded([&] { recordOrRaise(e, s); });
}

void CudaDevice::recordOrRaise(Event e, Stream s) {
  api->cuCtxSetCurrent(context);
  std::lock_guard<std::mutex> issue(issueMu);
  StreamState *st;
  void *ev;
  {
    std::lock_guard<std::mutex> lock(mu);
    st = &streamLocked(s, "record");
    ev = eventLocked(e, "record");
    ++eventRecords[e];
  }
  traceSync(*st, Kind::Record, "record event " + std::to_string(e),
            [&] { check(api->cuEventRecord(ev, st->cu), "cuEventRecord"); });
}

Status CudaDevice::wait(Stream s, Event e) {
  return guarded([&] { waitOrRaise(s, e); });
}

void CudaDevice::waitOrRaise(Stream s, Event e) {
  api->cuCtxSetCurrent(context);
  std::lock_guard<std::mutex> issue(issueMu);
  StreamState *st;
  void *ev;
  {
    std::lock_guard<std::mutex> lock(mu);
    st = &streamLocked(s, "wait");
    ev = eventLocked(e, "wait");
    if (eventRecords[e] == 0)
      return; // never recorded: nothing to wait for (CUDA semantics)
  }
  traceSync(*st, Kind::Wait, "wait event " + std::to_string(e), [&] {
    check(api->cuStreamWaitEvent(st->cu, ev, 0), "cuStreamWaitEvent");
  });
}

Status CudaDevice::synchronize(Event e) {
  return guarded([&] { synchronizeOrRaise(e); });
}

void CudaDevice::synchronizeOrRaise(Event e) {
  checkNotOnDevice("synchronize(event)");
  void *ev;
  {
    std::lock_guard<std::mutex> lock(mu);
    ev = eventLocked(e, "synchronize");
  }
  api->cuCtxSetCurrent(context);
  int rc = api->cuEventSynchronize(ev);
  if (rc != cuda::kCudaSuccess) {
    std::lock_guard<std::mutex> lock(mu);
    fail(deviceName + ": synchronize(event): " + cuda::cudaErrorText(*api, rc));
  }
  raiseIfFailed();
}

Status CudaDevice::synchronize(Stream s) {
  return guarded([&] { synchronizeOrRaise(s); });
}

void CudaDevice::synchronizeOrRaise(Stream s) {
  checkNotOnDevice("synchronize(stream)");
  void *cu;
  std::string track;
  {
    std::lock_guard<std::mutex> lock(mu);
    StreamState &st = streamLocked(s, "synchronize");
    cu = st.cu;
    track = st.trackName;
  }
  api->cuCtxSetCurrent(context);
  int rc = api->cuStreamSynchronize(cu);
  if (rc != cuda::kCudaSuccess) {
    std::lock_guard<std::mutex> lock(mu);
    fail(deviceName + ": stream '" + track +
         "': " + cuda::cudaErrorText(*api, rc));
  }
  harvest(false);
  raiseIfFailed();
}

Status CudaDevice::synchronize() {
  return guarded([&] { synchronizeAllOrRaise(); });
}

void CudaDevice::synchronizeAllOrRaise() {
  checkNotOnDevice("synchronize()");
  std::vector<std::pair<void *, std::string>> all;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto &st : streams)
      all.push_back({st->cu, st->trackName});
  }
  api->cuCtxSetCurrent(context);
  for (auto &[cu, track] : all) {
    int rc = api->cuStreamSynchronize(cu);
    if (rc != cuda::kCudaSuccess) {
      std::lock_guard<std::mutex> lock(mu);
      fail(deviceName + ": stream '" + track +
           "': " + cuda::cudaErrorText(*api, rc));
    }
  }
  harvest(false);
  raiseIfFailed();
}

Status CudaDevice::registerHost(void *p, int64_t bytes) {
  if (!p || bytes <= 0)
    return Status::success();
  api->cuCtxSetCurrent(context);
  int rc = api->cuMemHostRegister_v2(p, static_cast<size_t>(bytes),
                                     cuda::kCuMemHostRegisterPortable |
                                         cuda::kCuMemHostRegisterDeviceMap);
  if (rc != cuda::kCudaSuccess)
    return Status::error("cannot pin " + formatBytes(bytes) +
                         " for DMA: " + cuda::cudaErrorText(*api, rc));
  std::lock_guard<std::mutex> lock(mu);
  registered.push_back({p, bytes});
  return Status::success();
}

Expected<std::pair<int64_t, int64_t>> CudaDevice::memoryInfo() const {
  size_t free = 0, total = 0;
  api->cuCtxSetCurrent(context);
  if (Status st = guarded(
          [&] { check(api->cuMemGetInfo_v2(&free, &total), "cuMemGetInfo"); });
      !st)
    return st;
  return std::make_pair(static_cast<int64_t>(free),
                        static_cast<int64_t>(total));
}

CudaDevice::Clock::time_point CudaDevice::hostTimeOf(void *event) const {
  float ms = 0;
  api->cuEventElapsedTime(&ms, baseEvent, event);
  return baseHost + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double, std::milli>(ms));
}

void CudaDevice::harvest(bool) const {
  std::lock_guard<std::mutex> lock(mu);
  while (!pending.empty()) {
    Pending &p = *pending.front();
    Clock::time_point begin, end;
    if (p.kind == Kind::Launch) {
      if (!p.hostDone)
        break;
      begin = p.begin;
      end = p.finish;
    } else if (p.end) {
      if (api->cuEventQuery(p.end) != cuda::kCudaSuccess ||
          (p.needsHost && !p.hostDone))
        break;
      begin = hostTimeOf(p.start);
      end = hostTimeOf(p.end);
      freeEvents.push_back(p.start);
      freeEvents.push_back(p.end);
    } else {
      begin = end = Clock::now(); // zero bytes, or skipped
    }
    if (p.staging)
      giveStaging(p.staging);
    StreamState &st = *streams[p.stream];
    bool sync = p.kind == Kind::Record || p.kind == Kind::Wait;
    const bool isCompute = p.kind == Kind::Launch || p.kind == Kind::Compute;
    const char *category = sync ? "sync" : isCompute ? "compute" : "copy";
    if (trace)
      trace->span(st.traceTrack, p.skipped ? p.label + " (skipped)" : p.label,
                  begin, p.skipped ? begin : end, category);
    if (!p.skipped && !sync) {
      const_cast<StreamTimeline &>(st.timeline)
          .add(isCompute, begin, end, statsOrigin);
      if (isCompute) {
        ++launches;
      } else {
        ++copies;
        (p.kind == Kind::CopyH2D ? h2dBytes : d2hBytes) += p.bytes;
      }
    }
    pending.pop_front();
  }
}

DeviceStats CudaDevice::stats() const {
  harvest(false);
  std::lock_guard<std::mutex> lock(mu);
  std::vector<const StreamTimeline *> timelines;
  for (const auto &st : streams)
    timelines.push_back(&st->timeline);
  DeviceStats out = summarize(timelines, statsOrigin);
  out.h2dBytes = h2dBytes;
  out.d2hBytes = d2hBytes;
  out.copies = copies;
  out.launches = launches;
  return out;
}

void CudaDevice::resetStats() {
  harvest(false);
  std::lock_guard<std::mutex> lock(mu);
  statsOrigin = Clock::now();
  h2dBytes = d2hBytes = copies = launches = 0;
  for (auto &st : streams)
    st->timeline.clear();
}

void CudaDevice::setTrace(Trace *t) {
  std::lock_guard<std::mutex> lock(mu);
  trace = t;
  if (t)
    for (auto &st : streams)
      st->traceTrack = t->track(st->trackName);
}

} // namespace mtc::device
