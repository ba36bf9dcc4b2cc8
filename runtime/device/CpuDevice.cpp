//===- CpuDevice.cpp - The device of machines without a GPU -----*- C++ -*-===//
//
// Part of mtc. One mutex guards the queues, the events and the statistics;
// it is never held while a command's memcpy or function runs. Commands are
// coarse (a layer's weights, a kernel), so contention is negligible.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/CpuDevice.h"

#include "lib/Support/ByteSize.h"

#include "runtime/device/Trace.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sys/mman.h>

namespace mtc::device {

namespace {

/// The device whose command the current thread is running (nullptr on host
/// threads): synchronize() from inside a command would wait for itself.
thread_local const CpuDevice *currentDevice = nullptr;

} // namespace

void convertF32ToBF16(const void *src, void *dst, int64_t n) {
  const unsigned char *s = static_cast<const unsigned char *>(src);
  unsigned char *d = static_cast<unsigned char *>(dst);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, s + 4 * i, 4);
    uint16_t h;
    if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep the sign, force quiet
      h = static_cast<uint16_t>((u >> 16) | 0x0040u);
    else
      h = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    std::memcpy(d + 2 * i, &h, 2);
  }
}

void CpuDevice::EventState::markReached(uint64_t g) {
  if (g != reached + 1) {
    if (g > reached)
      reachedAhead.insert(g);
    return;
  }
  reached = g;
  while (!reachedAhead.empty() && *reachedAhead.begin() == reached + 1) {
    reachedAhead.erase(reachedAhead.begin());
    ++reached;
  }
}

CpuDevice::CpuDevice(int64_t capacityBytes)
    : capacityBytes(capacityBytes), statsOrigin(Clock::now()) {}

Expected<std::unique_ptr<CpuDevice>> CpuDevice::create(int64_t capacityBytes) {
  if (capacityBytes < 0)
    return Status::error("cpu device: negative arena capacity " +
                         std::to_string(capacityBytes));
  std::unique_ptr<CpuDevice> dev(new CpuDevice(capacityBytes));
  // An anonymous mapping: page-aligned (so 64-byte aligned), zero-filled,
  // committed lazily as the arena is touched.
  size_t mapped = static_cast<size_t>(std::max<int64_t>(capacityBytes, 1));
  void *p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return Status::error("cpu device: cannot allocate the " +
                         formatBytes(capacityBytes) +
                         " arena: " + std::strerror(errno));
  // Large arenas are backed by transparent huge pages where the kernel
  // offers them (fewer TLB misses in kernels and copies); best effort.
  if (mapped >= (size_t(2) << 20))
    ::madvise(p, mapped, MADV_HUGEPAGE);
  dev->arena = p;
  dev->arenaMapped = mapped;
  return dev;
}

CpuDevice::~CpuDevice() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    for (auto &st : streams)
      st->wake.notify_all();
    changed.notify_all();
  }
  for (auto &st : streams)
    if (st->worker.joinable())
      st->worker.join();
  if (arena)
    ::munmap(arena, arenaMapped);
}

Status CpuDevice::checkRange(const std::string &what, int64_t offset,
                             int64_t bytes) const {
  if (offset >= 0 && bytes >= 0 && offset <= capacityBytes &&
      bytes <= capacityBytes - offset)
    return Status::success();
  std::string range = bytes >= 0 && offset >= 0 && offset <= INT64_MAX - bytes
                          ? " [" + std::to_string(offset) + ", " +
                                std::to_string(offset + bytes) + ")"
                          : "";
  return Status::error("cpu device: " + what + ": " + std::to_string(bytes) +
                       " bytes at offset " + std::to_string(offset) + range +
                       " are outside the arena (capacity " +
                       std::to_string(capacityBytes) + " bytes)");
}

Expected<void *> CpuDevice::at(int64_t offset, int64_t bytes) {
  if (Status st = checkRange("at()", offset, bytes); !st)
    return st;
  return static_cast<void *>(static_cast<char *>(arena) + offset);
}

Expected<Stream> CpuDevice::createStream(const std::string &label) {
  std::lock_guard<std::mutex> lock(mu);
  auto st = std::make_unique<StreamState>();
  st->id = static_cast<int>(streams.size());
  st->label = label;
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
  p->worker = std::thread([this, p] { run(*p); });
  return Stream(p->id);
}

Expected<Stream> CpuDevice::createHostStream(const std::string &label) {
  Expected<Stream> s = createStream(label);
  if (!s)
    return s;
  std::lock_guard<std::mutex> lock(mu);
  StreamState &st = *streams[static_cast<size_t>(static_cast<int>(*s))];
  st.hostWork = st.timeline.hostWork = true;
  return s;
}

Expected<Event> CpuDevice::createEvent() {
  std::lock_guard<std::mutex> lock(mu);
  events.emplace_back();
  return Event(static_cast<int>(events.size() - 1));
}

CpuDevice::StreamState *CpuDevice::streamLocked(Stream s, const char *what,
                                                Status &err) {
  if (s < 0 || static_cast<size_t>(s) >= streams.size()) {
    err = Status::error(std::string("cpu device: ") + what + ": no stream " +
                        std::to_string(s) + " (" +
                        std::to_string(streams.size()) + " created)");
    return nullptr;
  }
  return streams[s].get();
}

CpuDevice::EventState *CpuDevice::eventLocked(Event e, const char *what,
                                              Status &err) {
  if (e < 0 || static_cast<size_t>(e) >= events.size()) {
    err = Status::error(std::string("cpu device: ") + what + ": no event " +
                        std::to_string(e) + " (" +
                        std::to_string(events.size()) + " created)");
    return nullptr;
  }
  return &events[e];
}

void CpuDevice::enqueue(StreamState &st, Command cmd) {
  st.queue.push_back(std::move(cmd));
  ++st.queued;
  st.wake.notify_one();
}

Status CpuDevice::copyToDevice(Stream s, int64_t dst, const void *src,
                               int64_t bytes, Convert c,
                               const std::string &label) {
  Command cmd;
  cmd.kind = Kind::CopyH2D;
  cmd.label = label;
  int64_t written = bytes;
  if (c == Convert::F32ToBF16) {
    if (bytes % 4 != 0)
      return Status::error("cpu device: copyToDevice f32->bf16 of " +
                           std::to_string(bytes) +
                           " bytes: not a whole number of fp32 values");
    written = bytes / 2;
  }
  std::string what = "copyToDevice" + (label.empty() ? "" : " '" + label + "'");
  if (cmd.label.empty())
    cmd.label = "copy h2d " + std::to_string(bytes) + " bytes" +
                (c == Convert::F32ToBF16 ? " f32->bf16" : "");
  if (Status st = checkRange(what, dst, written); !st)
    return st;
  if (!src && bytes > 0)
    return Status::error("cpu device: " + what + ": null host source");
  cmd.hostSrc = src;
  cmd.offset = dst;
  cmd.bytes = bytes;
  cmd.convert = c;
  std::lock_guard<std::mutex> lock(mu);
  Status err;
  StreamState *st = streamLocked(s, "copyToDevice", err);
  if (!st)
    return err;
  enqueue(*st, std::move(cmd));
  return Status::success();
}

Status CpuDevice::copyToHost(Stream s, void *dst, int64_t src, int64_t bytes,
                             const std::string &label, Convert c) {
  Command cmd;
  cmd.kind = Kind::CopyD2H;
  cmd.label = label.empty() ? "copy d2h " + std::to_string(bytes) + " bytes" +
                                  (c == Convert::F32ToBF16 ? " f32->bf16" : "")
                            : label;
  std::string what = "copyToHost" + (label.empty() ? "" : " '" + label + "'");
  if (Status st = checkRange(what, src, bytes); !st)
    return st;
  if (c == Convert::F32ToBF16 && bytes % 4 != 0)
    return Status::error("cpu device: " + what + " f32->bf16 of " +
                         std::to_string(bytes) +
                         " bytes: not a whole number of fp32 values");
  cmd.convert = c;
  if (!dst && bytes > 0)
    return Status::error("cpu device: " + what + ": null host destination");
  cmd.host = dst;
  cmd.offset = src;
  cmd.bytes = bytes;
  std::lock_guard<std::mutex> lock(mu);
  Status err;
  StreamState *st = streamLocked(s, "copyToHost", err);
  if (!st)
    return err;
  enqueue(*st, std::move(cmd));
  return Status::success();
}

Status CpuDevice::launch(Stream s, std::function<void()> fn,
                         const std::string &label) {
  if (!fn)
    return Status::error("cpu device: launch '" + label + "': empty function");
  Command cmd;
  cmd.kind = Kind::Launch;
  cmd.label = label.empty() ? "launch" : label;
  cmd.fn = std::move(fn);
  std::lock_guard<std::mutex> lock(mu);
  Status err;
  StreamState *st = streamLocked(s, "launch", err);
  if (!st)
    return err;
  enqueue(*st, std::move(cmd));
  return Status::success();
}

Status CpuDevice::record(Event e, Stream s) {
  std::lock_guard<std::mutex> lock(mu);
  Status err;
  StreamState *st = streamLocked(s, "record", err);
  EventState *ev = st ? eventLocked(e, "record", err) : nullptr;
  if (!ev)
    return err;
  Command cmd;
  cmd.kind = Kind::Record;
  cmd.label = "record event " + std::to_string(e);
  cmd.event = e;
  cmd.generation = ++ev->recorded;
  enqueue(*st, std::move(cmd));
  return Status::success();
}

Status CpuDevice::wait(Stream s, Event e) {
  std::lock_guard<std::mutex> lock(mu);
  Status err;
  StreamState *st = streamLocked(s, "wait", err);
  EventState *ev = st ? eventLocked(e, "wait", err) : nullptr;
  if (!ev)
    return err;
  if (ev->recorded == 0)
    return Status::success(); // never recorded: nothing to wait for (CUDA)
  Command cmd;
  cmd.kind = Kind::Wait;
  cmd.label = "wait event " + std::to_string(e);
  cmd.event = e;
  cmd.generation = ev->recorded;
  enqueue(*st, std::move(cmd));
  return Status::success();
}

Status CpuDevice::checkNotOnStream(const char *what) const {
  if (currentDevice == this)
    return Status::error(std::string("cpu device: ") + what +
                         " called from a command running on a stream of the "
                         "same device (it would wait for itself)");
  return Status::success();
}

Status CpuDevice::failureLocked() const {
  return isFailed ? firstError : Status::success();
}

Status CpuDevice::synchronize(Event e) {
  if (Status st = checkNotOnStream("synchronize(event)"); !st)
    return st;
  std::unique_lock<std::mutex> lock(mu);
  Status err;
  EventState *ev = eventLocked(e, "synchronize", err);
  if (!ev)
    return err;
  uint64_t g = ev->recorded;
  if (g > 0) {
    ++syncWaiters;
    changed.wait(lock, [&] { return events[e].hasReached(g); });
    --syncWaiters;
  }
  return failureLocked();
}

Status CpuDevice::synchronize(Stream s) {
  if (Status st = checkNotOnStream("synchronize(stream)"); !st)
    return st;
  std::unique_lock<std::mutex> lock(mu);
  Status err;
  StreamState *st = streamLocked(s, "synchronize", err);
  if (!st)
    return err;
  int64_t target = st->queued;
  ++syncWaiters;
  changed.wait(lock, [&] { return st->done >= target; });
  --syncWaiters;
  return failureLocked();
}

Status CpuDevice::synchronize() {
  if (Status st = checkNotOnStream("synchronize()"); !st)
    return st;
  std::unique_lock<std::mutex> lock(mu);
  // Streams created meanwhile by other threads are not waited for.
  size_t n = streams.size();
  std::vector<int64_t> targets(n);
  for (size_t i = 0; i < n; ++i)
    targets[i] = streams[i]->queued;
  ++syncWaiters;
  changed.wait(lock, [&] {
    for (size_t i = 0; i < n; ++i)
      if (streams[i]->done < targets[i])
        return false;
    return true;
  });
  --syncWaiters;
  return failureLocked();
}

bool CpuDevice::failed() const {
  std::lock_guard<std::mutex> lock(mu);
  return isFailed;
}

void CpuDevice::run(StreamState &st) {
  currentDevice = this;
  std::unique_lock<std::mutex> lock(mu);
  while (true) {
    st.wake.wait(lock, [&] { return stopping || !st.queue.empty(); });
    if (stopping)
      break; // queued commands are discarded (see CpuDevice.h)
    Command cmd = std::move(st.queue.front());
    st.queue.pop_front();
    Trace *tr = trace;
    int track = st.traceTrack;
    Clock::time_point begin = Clock::now();
    const char *category = "sync";
    switch (cmd.kind) {
    case Kind::Record:
      events[cmd.event].markReached(cmd.generation);
      break;
    case Kind::Wait:
      changed.wait(lock, [&] {
        return stopping || isFailed ||
               events[cmd.event].hasReached(cmd.generation);
      });
      break;
    case Kind::CopyH2D:
    case Kind::CopyD2H:
    case Kind::Launch: {
      category = cmd.kind == Kind::Launch ? "compute" : "copy";
      if (isFailed)
        break; // skipped: the device has failed
      lock.unlock();
      begin = Clock::now();
      std::string error;
      bool threw = false;
      try {
        execute(st, cmd);
      } catch (const std::exception &e) {
        threw = true;
        error = e.what();
      } catch (...) {
        threw = true;
        error = "unknown exception";
      }
      Clock::time_point end = Clock::now();
      if (tr)
        tr->span(track, cmd.label, begin, end, category);
      lock.lock();
      if (threw && !isFailed) {
        isFailed = true;
        firstError = Status::error("cpu device: stream '" + st.trackName +
                                   "': " + cmd.label + ": " + error);
      }
      st.timeline.add(cmd.kind == Kind::Launch, begin, end, statsOrigin);
      if (cmd.kind == Kind::Launch) {
        ++launches;
      } else {
        ++copies;
        if (cmd.kind == Kind::CopyD2H)
          d2hBytes += cmd.bytes;
        else
          h2dBytes +=
              cmd.convert == Convert::F32ToBF16 ? cmd.bytes / 2 : cmd.bytes;
      }
      ++st.done;
      if (threw || syncWaiters > 0)
        changed.notify_all();
      continue;
    }
    }
    if (tr && (cmd.kind == Kind::Record || cmd.kind == Kind::Wait)) {
      Clock::time_point end = Clock::now();
      lock.unlock();
      tr->span(track, cmd.label, begin, end, category);
      lock.lock();
    } else if (tr) {
      // a skipped copy or launch: a zero-length span keeps one per command
      lock.unlock();
      tr->span(track, cmd.label + " (skipped)", begin, begin, category);
      lock.lock();
    }
    ++st.done;
    if (cmd.kind == Kind::Record || syncWaiters > 0)
      changed.notify_all();
  }
  currentDevice = nullptr;
}

void CpuDevice::execute(StreamState &st, Command &cmd) {
  (void)st;
  char *base = static_cast<char *>(arena);
  switch (cmd.kind) {
  case Kind::CopyH2D:
    if (cmd.convert == Convert::F32ToBF16)
      convertF32ToBF16(cmd.hostSrc, base + cmd.offset, cmd.bytes / 4);
    else if (cmd.bytes > 0)
      std::memcpy(base + cmd.offset, cmd.hostSrc, cmd.bytes);
    break;
  case Kind::CopyD2H:
    if (cmd.convert == Convert::F32ToBF16)
      convertF32ToBF16(base + cmd.offset, cmd.host, cmd.bytes / 4);
    else if (cmd.bytes > 0)
      std::memcpy(cmd.host, base + cmd.offset, cmd.bytes);
    break;
  case Kind::Launch:
    cmd.fn();
    break;
  default:
    break;
  }
}

DeviceStats CpuDevice::stats() const {
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

void CpuDevice::resetStats() {
  std::lock_guard<std::mutex> lock(mu);
  statsOrigin = Clock::now();
  h2dBytes = d2hBytes = copies = launches = 0;
  for (auto &st : streams)
    st->timeline.clear();
}

void CpuDevice::setTrace(Trace *t) {
  std::lock_guard<std::mutex> lock(mu);
  trace = t;
  if (t)
    for (auto &st : streams)
      st->traceTrack = t->track(st->trackName);
}

} // namespace mtc::device
