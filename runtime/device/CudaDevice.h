//===- CudaDevice.h - A GPU behind the Device interface ---------*- C++ -*-===//
//
// Part of mtc. The Device (Device.h) of a CUDA GPU, driven only through a
// CudaDriverApi table (runtime/cuda/CudaDriver.h): the real driver loaded
// with dlopen, or the emulated driver of `--device cuda-emu`, which runs
// the same code on the CPU. Nothing here links a GPU library.
//
//   arena     one cuMemAlloc of exactly the capacity; at() returns device
//             pointers (valid only inside kernels)
//   streams   one CUstream each (non-blocking), plus one host thread for the
//             stream's launch() closures
//   events    one CUevent each; record/wait/synchronize map 1:1
//   copies    cuMemcpyHtoDAsync / cuMemcpyDtoHAsync on the stream, from or
//             to memory pinned with registerHost (HostStore's); pageable
//             memory goes through pinned staging buffers (a pool) filled or
//             emptied by the stream's host thread in stream order -- the
//             driver's pageable copies would block the issuing thread until
//             the stream got there, deadlocking with the stream's closures
//   compute   device work queued by the calling thread itself (compute()):
//             the CUDA backend's kernels, between two timing events
//   launch    a host closure in stream order: the stream's prior GPU work is
//             awaited (an event) by the stream's host thread, which runs the
//             closure and then releases the stream's later GPU work
//             (cuStreamWaitValue32 on a pinned counter) -- no driver host
//             function runs user code, so closures of different streams
//             never wait for each other and may call the driver
//   F32ToBF16 the fp32 source is converted in stream order, into a pinned
//             staging buffer, then copied: the stream's host thread splits
//             the conversion over the device's conversion pool
//             (MTC_CONVERT_THREADS threads, default min(8, cores / 2)), so a
//             weight load converts at the host's memory bandwidth, not one
//             core's; a converting copyToHost (bf16 gradients) copies fp32
//             into staging and converts from there on the same pool
//   timing    CUDA events around every copy and host clocks around every
//             launch, harvested into DeviceStats and the trace at
//             synchronize() and stats()
//
// Errors: a driver call that fails is an error Status with the driver's
// name and text of the error; a closure that throws fails the device like
// CpuDevice (later copies and launches are skipped, the first error is
// returned by every synchronize()).
//
// Thread safety: as CpuDevice: commands may be queued from one host thread
// at a time; synchronize() may be called from any thread but not from a
// closure running on the device.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DEVICE_CUDADEVICE_H
#define MTC_RUNTIME_DEVICE_CUDADEVICE_H

#include "lib/Support/Status.h"
#include "lib/Support/ThreadPool.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/device/Device.h"
#include "runtime/device/Timeline.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mtc::device {

class CudaDevice : public Device {
public:
  /// Opens GPU \p ordinal of \p api with an arena of \p capacityBytes
  /// (0: none). An error naming the size when the GPU cannot allocate it,
  /// and the driver's error for anything else.
  static Expected<std::unique_ptr<CudaDevice>>
  create(std::shared_ptr<const cuda::CudaDriverApi> api, int64_t capacityBytes,
         int ordinal = 0);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice &) = delete;
  CudaDevice &operator=(const CudaDevice &) = delete;

  std::string name() const override { return deviceName; }
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

  /// Pins \p bytes of host memory at \p p for DMA (cuMemHostRegister), so
  /// that copies from and to it are asynchronous. Best effort: the error
  /// gives the driver's reason; callers may go on with unpinned memory.
  Status registerHost(void *p, int64_t bytes);

  /// Free and total GPU memory as the driver reports them now.
  Expected<std::pair<int64_t, int64_t>> memoryInfo() const;
  /// The GPU's compute capability, e.g. {9, 0}.
  std::pair<int, int> computeCapability() const { return capability; }
  /// Device compute issued by the calling thread: \p fn runs now and
  /// queues kernels on the CUstream it is given (stream \p s's), in order
  /// with every command queued on \p s before and after; it may queue
  /// copies through this device too. Timed by CUDA events around its work
  /// as one compute span \p label (statistics, trace), counted as a
  /// launch. Returns the device's first error if it has failed (fn does
  /// not run), a driver error, or else what fn returns. Not from a command
  /// running on the device.
  Status compute(Stream s, const std::function<Status(void *)> &fn,
                 const std::string &label = "");
  /// The driver table (for the kernel launches of the CUDA backend).
  const cuda::CudaDriverApi &driver() const { return *api; }
  const std::shared_ptr<const cuda::CudaDriverApi> &driverTable() const {
    return api;
  }
  /// The GPU's ordinal, and making its context current on this thread (for
  /// driver calls made beside the device's own: loading modules, allocating
  /// the CUDA backend's scratch).
  int ordinal() const { return device; }
  void makeCurrent() const { api->cuCtxSetCurrent(context); }

private:
  using Clock = std::chrono::steady_clock;
  enum class Kind { CopyH2D, CopyD2H, Launch, Compute, Record, Wait };

  /// The work of create(). The *OrRaise functions are the public methods'
  /// bodies: their errors unwind (a type private to CudaDevice.cpp) to the
  /// public method, which returns them as a Status.
  CudaDevice(std::shared_ptr<const cuda::CudaDriverApi> api,
             int64_t capacityBytes, int ordinal);
  Stream createStreamOrRaise(const std::string &label);
  void copyToDeviceOrRaise(Stream s, int64_t dst, const void *src,
                           int64_t bytes, Convert c, const std::string &label);
  void copyToHostOrRaise(Stream s, void *dst, int64_t src, int64_t bytes,
                         const std::string &label, Convert c);
  void launchOrRaise(Stream s, std::function<void()> fn,
                     const std::string &label);
  Status computeOrRaise(Stream s, const std::function<Status(void *)> &fn,
                        const std::string &label);
  void recordOrRaise(Event e, Stream s);
  void waitOrRaise(Stream s, Event e);
  void synchronizeOrRaise(Event e);
  void synchronizeOrRaise(Stream s);
  void synchronizeAllOrRaise();

  /// A copy or launch whose timing is not harvested yet.
  struct Pending {
    int stream = 0;
    Kind kind = Kind::Launch;
    std::string label;
    int64_t bytes = 0;     ///< bytes moved (h2d: written)
    void *start = nullptr; ///< copies: CUevents around the copy
    void *end = nullptr;
    void *staging = nullptr;         ///< pinned staging (back to the pool)
    bool needsHost = false;          ///< d2h to pageable: copied out after
    bool skipped = false;            ///< not executed (the device had failed)
    bool hostDone = false;           ///< launches: the closure has run
    Clock::time_point begin, finish; ///< launches: host clocks
  };
  /// One closure (or conversion) for a stream's host thread.
  struct HostJob {
    void *after = nullptr; ///< CUevent: the stream's prior GPU work
    std::function<void()> fn;
    uint32_t ticket = 0;
    std::shared_ptr<Pending> pending;
  };
  struct StreamState {
    int id = 0;
    std::string trackName;
    void *cu = nullptr; ///< CUstream
    std::thread worker;
    std::deque<HostJob> jobs;
    std::condition_variable wake;
    std::atomic<uint32_t> *counter = nullptr; ///< pinned: last job done
    unsigned long long counterDevice = 0;
    uint32_t tickets = 0; ///< jobs queued
    int traceTrack = 0;
    StreamTimeline timeline; ///< harvested statistics (guarded by mu)
  };

  void check(int rc, const std::string &what) const;
  void checkRange(const std::string &what, int64_t offset, int64_t bytes) const;
  StreamState &streamLocked(Stream s, const char *what);
  void *eventLocked(Event e, const char *what);
  void *takeTimingEvent();
  /// A record or wait: timed on the stream, for the trace only.
  void traceSync(StreamState &st, Kind kind, const std::string &label,
                 const std::function<void()> &command);
  /// Issues \p command on \p st between p's two timing events (taken
  /// here) and queues p for harvest().
  void issueTimed(StreamState &st, std::shared_ptr<Pending> p,
                  const std::function<void()> &command);
  /// A copy of nothing, or on a failed device: p queued (skipped if failed)
  /// and true.
  bool queueIfNothingToDo(const std::shared_ptr<Pending> &p, int64_t bytes);
  /// Queues \p job on \p st's host thread after the stream's GPU work so
  /// far, and makes the stream's later GPU work wait for it.
  void enqueueHostJob(StreamState &st, std::function<void()> fn,
                      std::shared_ptr<Pending> pending);
  void runHostJobs(StreamState &st);
  /// Whether [p, p + bytes) lies in memory pinned with registerHost.
  bool isPinnedLocked(const void *p, int64_t bytes) const;
  /// A pinned staging buffer of at least \p bytes from the pool (allocated
  /// when none is free; freed only with the device, since cuMemFreeHost
  /// waits for the whole device).
  void *takeStaging(int64_t bytes);
  void giveStaging(void *buffer) const;
  void fail(const std::string &message);
  void raiseIfFailed() const;
  void checkNotOnDevice(const char *what) const;
  /// Moves the timing of completed commands into the timelines and trace
  /// (\p wait: all of them, after synchronisation).
  void harvest(bool wait) const;
  Clock::time_point hostTimeOf(void *event) const;

  std::shared_ptr<const cuda::CudaDriverApi> api;
  std::string deviceName;
  std::pair<int, int> capability{0, 0};
  int64_t capacityBytes = 0;
  void *context = nullptr;
  int device = 0;
  unsigned long long arena = 0;
  void *clockStream = nullptr; ///< records the base timing event
  void *baseEvent = nullptr;   ///< GPU time 0 ...
  Clock::time_point baseHost;  ///< ... is this host time

  /// Held by the thread issuing commands for the whole of one command (so
  /// commands reach each CUstream in call order), and never by a host
  /// thread: a driver call that blocks under it cannot stall the closures
  /// the GPU may be waiting for.
  std::mutex issueMu;
  mutable std::mutex mu;
  mutable std::mutex stagingMu;
  /// Converts the fp32 sources of F32ToBF16 copies (see the file comment).
  ThreadPool convertPool;
  /// Converts \p n fp32 values at \p src to bf16 at \p dst on convertPool.
  void convert(const void *src, void *dst, int64_t n);
  mutable std::map<size_t, std::vector<void *>> stagingFree;
  std::map<void *, size_t> stagingSize;
  std::vector<std::unique_ptr<StreamState>> streams;
  std::vector<void *> events;
  std::vector<uint64_t> eventRecords;     ///< records queued per event
  mutable std::vector<void *> freeEvents; ///< timing events to reuse
  mutable std::deque<std::shared_ptr<Pending>> pending;
  bool stopping = false;
  std::atomic<bool> isFailed{false};
  Status firstError;
  std::vector<std::pair<void *, int64_t>> registered;
  Trace *trace = nullptr;
  Clock::time_point statsOrigin;
  mutable int64_t h2dBytes = 0, d2hBytes = 0, copies = 0, launches = 0;
};

} // namespace mtc::device

#endif // MTC_RUNTIME_DEVICE_CUDADEVICE_H
