//===- Device.h - The device interface the streaming runtime drives -*- C++
//-*-===//
//
// Part of mtc. A device has one fixed-capacity memory (the arena: offsets the
// compiler's memory plan assigned), streams that execute their queued commands
// in order, events that order streams, and asynchronous copies between host
// memory and the arena. The semantics are CUDA's (a stream is a cudaStream_t,
// an event a cudaEvent_t), so that CpuDevice (runtime/device/CpuDevice.h),
// which runs on machines without a GPU, exercises every scheduling decision a
// CudaDevice will face.
//
// Nothing is allocated after construction: every command names arena
// offsets, and a range outside the arena is an error (a Status), never a
// write out of bounds.
//
// Errors are values: every call that can fail returns a Status (or an
// Expected), and nothing a device does throws. A command that fails while it
// runs (a launched closure that throws, a driver fault) fails the device:
// the error reaches the caller as the Status of the next synchronize(), and
// of every one after it (docs/runtime.md, "Errors").
//
// Every device passes the conformance suite (test/unit/DeviceConformance.h,
// docs/testing.md), which tests the promises written here and nothing else:
// what a device does beyond them belongs to its own header and test file.
//
// Launches. launch(s, fn) queues a host closure, ordered in s like any other
// command. On CpuDevice the stream's thread calls it, and the streaming
// executor's closures are the device compute: each runs a layer instance's
// forward or backward with the CPU kernels on arena pointers from at(). A GPU
// cannot run a closure, so on a CudaDevice launch() is host work in stream
// order, such as the AdamW update on the optimizer's host stream, run on the
// device's own thread for the stream (the driver may serialize the host
// functions of independent streams), which must not dereference at() (device
// pointers there) nor call the device. Device compute on a GPU is issued by
// the thread queueing the commands (CudaDevice::compute: the executor's CUDA
// backend queues each op's kernels on the stream, without host
// synchronisation); docs/runtime.md ("Launches and dispatches").
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DEVICE_DEVICE_H
#define MTC_RUNTIME_DEVICE_DEVICE_H

#include "lib/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mtc::device {

class Trace;

/// Element conversion applied by a copy.
enum class Convert {
  None,     ///< bytes as they are
  F32ToBF16 ///< source fp32, destination bf16 (round to nearest even; a
            ///< NaN stays a quiet NaN with its sign); the byte count names
            ///< the source, a multiple of 4
};

/// Per-stream counters of DeviceStats.
struct StreamStats {
  std::string label;
  /// Seconds spent executing copies and launches (waits are not busy time).
  double busySeconds = 0;
  int64_t commands = 0; ///< copies and launches executed (not records, waits)
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
  /// another stream that is not a host stream (0 when there were no copies):
  /// launches on compute streams are device compute, those on host streams
  /// are not.
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

/// A device (see the file comment). Every error message names the call
/// (and the command's label when it has one) and what is wrong: an arena
/// range as "N bytes at offset O [O, O+N)" with "capacity C bytes", an
/// unknown id as "no stream S" / "no event E". A command with bad arguments
/// is an error Status from the call that queues it and is not queued (the
/// device stays usable).
///
/// The destructor never blocks on a wait and returns in bounded time; once it
/// has returned, no command of the device runs any more. Whether queued
/// commands run first is the device's choice (CpuDevice discards them): call
/// synchronize() first to finish the work.
class Device {
public:
  virtual ~Device() = default;

  /// A short name ("cpu"), never empty.
  virtual std::string name() const = 0;
  /// The arena's size in bytes (the device budget), as constructed; a
  /// negative or unobtainable size is an error of the device's factory
  /// (CpuDevice::create, CudaDevice::create), naming the size in bytes.
  virtual int64_t capacity() const = 0;
  /// The address of arena offset \p offset for \p bytes bytes, for use by
  /// commands running on the device (kernels); an error if the range is
  /// outside the arena. The arena is contiguous (at(o, n) is the
  /// base at(0, 0) plus o bytes) and its base is at least 64-byte aligned. On
  /// CpuDevice the address is host memory; on a CudaDevice it is a device
  /// pointer, for kernel arguments only.
  virtual Expected<void *> at(int64_t offset, int64_t bytes) = 0;

  /// A new stream; ids are 0, 1, 2, ... in creation order, host streams
  /// included (DeviceStats::streams is indexed by them).
  /// An error when the driver cannot create one.
  virtual Expected<Stream> createStream(const std::string &label) = 0;
  /// A stream whose launches are host work (on a GPU: host functions, e.g.
  /// the CPU optimizer), not device compute: DeviceStats::overlap does not
  /// count them as compute hiding a copy.
  virtual Expected<Stream> createHostStream(const std::string &label) {
    return createStream(label);
  }
  virtual Expected<Event> createEvent() = 0;

  /// Queues a copy of \p bytes host bytes at \p src to arena offset \p dst.
  /// The copy reads the host memory when it runs, in stream order, not when
  /// it is queued (a launch queued before it may still write the source);
  /// the memory must stay valid until then. (A CudaDevice copies from pinned
  /// memory, or stages pageable memory from a host function, to keep this.)
  virtual Status copyToDevice(Stream s, int64_t dst, const void *src,
                              int64_t bytes, Convert c = Convert::None,
                              const std::string &label = "") = 0;
  /// Queues a copy of \p bytes arena bytes at \p src to host memory \p dst,
  /// written when the copy runs: a later command of the stream (or one
  /// ordered after it by an event) sees the bytes. With
  /// Convert::F32ToBF16 the arena holds fp32 values and \p dst receives
  /// bytes / 2 bytes of bf16 (the bf16 gradients of `--grad-dtype bf16`);
  /// DeviceStats::d2hBytes counts the arena's bytes.
  virtual Status copyToHost(Stream s, void *dst, int64_t src, int64_t bytes,
                            const std::string &label = "",
                            Convert c = Convert::None) = 0;
  /// Queues a host closure: \p fn runs after every command queued before it
  /// on \p s and before every command queued after it (see "Launches" in the
  /// file comment for what it means on a GPU). Closures of different streams
  /// do not wait for each other unless events order them: one that blocks
  /// holds up its own stream only. On a compute stream it counts as device
  /// compute in the statistics. fn reports a failure by throwing (an
  /// exception of any type, std::exception's what() being its message); the
  /// device catches it and fails: the first failure's message (with the
  /// stream's and the launch's labels) is the error Status of every later
  /// synchronize() of any kind, and waits on events still complete, so
  /// nothing blocks. fn must not call synchronize() on its own device (that
  /// is an error, not a deadlock).
  virtual Status launch(Stream s, std::function<void()> fn,
                        const std::string &label = "") = 0;
  /// Marks \p e as reached once every command queued on \p s so far has run.
  virtual Status record(Event e, Stream s) = 0;
  /// Commands queued on \p s after this wait until \p e is reached (its
  /// latest record()); waiting on a never-recorded event does not block.
  virtual Status wait(Stream s, Event e) = 0;
  /// Blocks the calling host thread until \p e is reached. The error of a
  /// failed device (see launch()), or of bad arguments.
  virtual Status synchronize(Event e) = 0;
  /// Blocks until everything queued on \p s has run; errors as above.
  virtual Status synchronize(Stream s) = 0;
  /// Blocks until all streams are idle; errors as above.
  virtual Status synchronize() = 0;

  /// Telemetry: bytes moved, busy time, copy/compute overlap. Every device
  /// keeps them (the conformance suite checks them); the defaults, for test
  /// doubles, return zeros.
  virtual DeviceStats stats() const { return {}; }
  virtual void resetStats() {}
  /// Every executed command becomes one span on its stream's track of
  /// \p trace (nullptr: no tracing). A track is named by the stream's label
  /// ("label #id" when an earlier stream has the same label; also the label
  /// in DeviceStats::streams), a span by the command's label or by default
  /// "copy h2d N bytes[ f32->bf16]", "copy d2h N bytes", "launch", "record
  /// event E", "wait event E"; categories "copy", "compute", "sync". The
  /// trace must outlive the device or the next setTrace(). The default
  /// implementation ignores it.
  virtual void setTrace(Trace *trace) { (void)trace; }
};

} // namespace mtc::device

#endif // MTC_RUNTIME_DEVICE_DEVICE_H
