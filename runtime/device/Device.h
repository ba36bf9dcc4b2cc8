//===- Device.h - The device interface the streaming runtime drives -*- C++
//-*-===//
//
// Part of mtc. A device has one fixed-capacity memory (the arena: offsets the
// compiler's memory plan assigned), streams that execute their queued commands
// in order, events that order streams, and asynchronous copies between host
// memory and the arena. The semantics are CUDA's (a stream is a cudaStream_t,
// an event a cudaEvent_t, a launch a kernel launch or cudaLaunchHostFunc), so
// that CpuDevice (runtime/device/CpuDevice.h), which runs on machines without
// a GPU, exercises every scheduling decision a CudaDevice will face.
//
// Nothing is allocated after construction: every command names arena
// offsets, and a range outside the arena is an error (DeviceError), never a
// write out of bounds.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DEVICE_DEVICE_H
#define MTC_RUNTIME_DEVICE_DEVICE_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mtc::device {

class Trace;

struct DeviceError {
  std::string message;
};

/// Element conversion applied by a copy.
enum class Convert {
  None,     ///< bytes as they are
  F32ToBF16 ///< source fp32, destination bf16 (round to nearest even); the
            ///< byte count names the source
};

/// Per-stream counters of DeviceStats.
struct StreamStats {
  std::string label;
  /// Seconds spent executing copies and launches (waits are not busy time).
  double busySeconds = 0;
  int64_t commands = 0; ///< copies and launches executed
};

/// What a device did since construction or the last resetStats().
struct DeviceStats {
  int64_t h2dBytes = 0;      ///< bytes written into the arena by copyToDevice
                             ///< (bytes / 2 for Convert::F32ToBF16)
  int64_t d2hBytes = 0;      ///< bytes copied out of the arena by copyToHost
  int64_t copies = 0;        ///< copy commands executed (both directions)
  int64_t launches = 0;      ///< launch commands executed
  double copySeconds = 0;    ///< time spent executing copies, all streams
  double computeSeconds = 0; ///< time spent executing launches, all streams
  /// The fraction of copySeconds during which a launch was executing on
  /// another stream that is not a host stream (0 when there were no copies).
  double overlap = 0;
  double elapsedSeconds = 0;        ///< wall time since construction / reset
  std::vector<StreamStats> streams; ///< indexed by Stream id
};

/// An opaque event id (created by Device::createEvent). Event and Stream are
/// distinct types, so that synchronize(Event) and synchronize(Stream) are
/// distinct overloads (with two `int` aliases they were one function); each
/// converts implicitly from and to its int id, but never into the other.
struct Event {
  constexpr Event(int id = -1) : id(id) {}
  constexpr operator int() const { return id; }
  int id;
};
/// An opaque stream id (created by Device::createStream).
struct Stream {
  constexpr Stream(int id = -1) : id(id) {}
  constexpr operator int() const { return id; }
  int id;
};

class Device {
public:
  virtual ~Device() = default;

  virtual std::string name() const = 0;
  /// The arena's size in bytes (the device budget).
  virtual int64_t capacity() const = 0;
  /// A host-addressable pointer to arena offset \p offset for \p bytes bytes,
  /// for use by commands running on the device (kernels); throws DeviceError
  /// if the range is outside the arena. (A CudaDevice returns device
  /// pointers, valid only inside launched kernels.)
  virtual void *at(int64_t offset, int64_t bytes) = 0;

  virtual Stream createStream(const std::string &label) = 0;
  /// A stream whose launches are host work (on a GPU: host functions, e.g.
  /// the CPU optimizer), not device compute: DeviceStats::overlap does not
  /// count them as compute hiding a copy.
  virtual Stream createHostStream(const std::string &label) {
    return createStream(label);
  }
  virtual Event createEvent() = 0;

  /// Queues a copy of \p bytes host bytes at \p src to arena offset \p dst.
  /// The host memory must stay valid until the copy has run.
  virtual void copyToDevice(Stream s, int64_t dst, const void *src,
                            int64_t bytes, Convert c = Convert::None,
                            const std::string &label = "") = 0;
  /// Queues a copy of \p bytes arena bytes at \p src to host memory \p dst.
  virtual void copyToHost(Stream s, void *dst, int64_t src, int64_t bytes,
                          const std::string &label = "") = 0;
  /// Queues device work: \p fn runs on the stream's executor after every
  /// command queued before it on \p s (a kernel launch). Exceptions thrown by
  /// fn are captured and rethrown by the next synchronize() of any stream.
  virtual void launch(Stream s, std::function<void()> fn,
                      const std::string &label = "") = 0;
  /// Marks \p e as reached once every command queued on \p s so far has run.
  virtual void record(Event e, Stream s) = 0;
  /// Commands queued on \p s after this wait until \p e is reached (its
  /// latest record()); waiting on a never-recorded event does not block.
  virtual void wait(Stream s, Event e) = 0;
  /// Blocks the calling host thread until \p e is reached.
  virtual void synchronize(Event e) = 0;
  /// Blocks until everything queued on \p s has run.
  virtual void synchronize(Stream s) = 0;
  /// Blocks until all streams are idle.
  virtual void synchronize() = 0;

  /// Telemetry: bytes moved, busy time, copy/compute overlap. The default
  /// implementation (a device without counters) returns zeros.
  virtual DeviceStats stats() const { return {}; }
  virtual void resetStats() {}
  /// Every executed command becomes one span on its stream's track of
  /// \p trace (nullptr: no tracing). The trace must outlive the device or
  /// the next setTrace(). The default implementation ignores it.
  virtual void setTrace(Trace *trace) { (void)trace; }
};

} // namespace mtc::device

#endif // MTC_RUNTIME_DEVICE_DEVICE_H
