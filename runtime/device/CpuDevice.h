//===- CpuDevice.h - The device of machines without a GPU -------*- C++ -*-===//
//
// Part of mtc. A Device whose "device memory" is a separate fixed-capacity
// host allocation (the arena, allocated once in the constructor) and whose
// streams are worker threads, each executing its FIFO command queue strictly
// in order. It has CUDA's semantics (see Device.h), so every scheduling
// decision of the streaming runtime runs, and can fail, here first.
//
//  - record(e, s) queues a marker that gives e a new generation; wait(s, e)
//    captures the generation of the latest record() queued so far and holds
//    back the commands queued on s after it until that record has executed
//    (cudaStreamWaitEvent). Waiting on a never-recorded event is a no-op.
//  - Copies are memcpy's run on the stream's thread; their arena range is
//    checked when they are queued (the error Status of copyToDevice /
//    copyToHost themselves).
//  - Launches run on the stream's thread, and at() is host memory, so a
//    launched closure may read and write the arena: the streaming executor's
//    layer closures are this device's compute (on a GPU that is a dispatch;
//    see "Launches" in Device.h).
//  - An exception thrown by a command marks the device failed: the first
//    error is kept, every copy and launch not yet run is skipped (records and
//    waits still complete, so nothing blocks), and every synchronize() from
//    then on returns an error Status naming the stream, the command and the
//    original message. The failure is sticky, like a CUDA kernel fault.
//  - The destructor does not run queued work: commands not yet started are
//    discarded, each stream's running command finishes, blocked waits are
//    released, and the threads are joined. Call synchronize() first to finish
//    the work. (Discarding is what makes destruction during exception
//    unwinding safe: queued copies may name host memory already freed.)
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DEVICE_CPUDEVICE_H
#define MTC_RUNTIME_DEVICE_CPUDEVICE_H

#include "runtime/device/Device.h"
#include "runtime/device/Timeline.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace mtc::device {

/// Converts \p n fp32 values to bf16, rounding to nearest even; NaN stays a
/// (quiet) NaN with its sign. \p src and \p dst need no alignment.
void convertF32ToBF16(const void *src, void *dst, int64_t n);

class CpuDevice : public Device {
public:
  /// Allocates the arena (64-byte aligned, zero-filled); an error naming the
  /// size if that fails.
  static Expected<std::unique_ptr<CpuDevice>> create(int64_t capacityBytes);
  ~CpuDevice() override;
  CpuDevice(const CpuDevice &) = delete;
  CpuDevice &operator=(const CpuDevice &) = delete;

  std::string name() const override { return "cpu"; }
  int64_t capacity() const override { return capacityBytes; }
  Expected<void *> at(int64_t offset, int64_t bytes) override;

  Expected<Stream> createStream(const std::string &label) override;
  Expected<Stream> createHostStream(const std::string &label) override;
  Expected<Event> createEvent() override;

  Status copyToDevice(Stream s, int64_t dst, const void *src, int64_t bytes,
                      Convert c = Convert::None,
                      const std::string &label = "") override;
  Status copyToHost(Stream s, void *dst, int64_t src, int64_t bytes,
                    const std::string &label = "",
                    Convert c = Convert::None) override;
  Status launch(Stream s, std::function<void()> fn,
                const std::string &label = "") override;
  Status record(Event e, Stream s) override;
  Status wait(Stream s, Event e) override;
  Status synchronize(Event e) override;
  Status synchronize(Stream s) override;
  Status synchronize() override;

  DeviceStats stats() const override;
  void resetStats() override;
  void setTrace(Trace *trace) override;

  /// True once a command has thrown (see the file comment).
  bool failed() const;

private:
  using Clock = std::chrono::steady_clock;

  explicit CpuDevice(int64_t capacityBytes);

  enum class Kind { CopyH2D, CopyD2H, Launch, Record, Wait };
  struct Command {
    Kind kind;
    std::string label;
    // copies
    void *host = nullptr;
    const void *hostSrc = nullptr;
    int64_t offset = 0, bytes = 0;
    Convert convert = Convert::None;
    // launches
    std::function<void()> fn;
    // record / wait
    Event event = -1;
    uint64_t generation = 0;
  };
  struct StreamState {
    int id = 0;
    std::string label, trackName;
    bool hostWork = false; ///< launches are host work, not device compute
    std::deque<Command> queue;
    int64_t queued = 0, done = 0;
    std::condition_variable wake; // commands arrived, or stopping
    std::thread worker;
    int traceTrack = 0;
    StreamTimeline timeline; ///< statistics (guarded by mu)
  };
  struct EventState {
    uint64_t recorded = 0; ///< generation of the latest record() queued
    uint64_t reached = 0;  ///< every generation <= reached has executed
    std::set<uint64_t> reachedAhead; ///< executed generations > reached + 1
    bool hasReached(uint64_t g) const {
      return g <= reached || reachedAhead.count(g);
    }
    void markReached(uint64_t g);
  };

  void run(StreamState &st);
  void execute(StreamState &st, Command &cmd);
  /// Null (and \p err set) for an unknown id.
  StreamState *streamLocked(Stream s, const char *what, Status &err);
  EventState *eventLocked(Event e, const char *what, Status &err);
  Status checkRange(const std::string &what, int64_t offset,
                    int64_t bytes) const;
  void enqueue(StreamState &st, Command cmd);
  Status checkNotOnStream(const char *what) const;
  Status failureLocked() const;

  int64_t capacityBytes;
  void *arena = nullptr;
  size_t arenaMapped = 0;

  mutable std::mutex mu;
  std::condition_variable changed; // a command completed / the device failed
  /// Threads inside synchronize(): completions wake `changed` only while
  /// there are any (else only records and failures do: nothing else is
  /// waited for, and waking every stream on every command costs a context
  /// switch each on a small machine).
  int syncWaiters = 0;
  std::vector<std::unique_ptr<StreamState>> streams;
  std::vector<EventState> events;
  bool stopping = false;
  bool isFailed = false;
  Status firstError;
  Trace *trace = nullptr;

  // statistics (guarded by mu)
  Clock::time_point statsOrigin;
  int64_t h2dBytes = 0, d2hBytes = 0, copies = 0, launches = 0;
};

} // namespace mtc::device

#endif // MTC_RUNTIME_DEVICE_CPUDEVICE_H
