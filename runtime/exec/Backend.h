//===- Backend.h - Where the executor's kernels and memory live -*- C++ -*-===//
//
// Part of mtc. The executor runs each decoded op through the kernel table of
// a backend (KernelTable.h); the backend also says where the values of a run
// live and how the executor itself fills and moves them (zeroing a result,
// placing an op's result at its planned offset, bringing token ids in,
// reading the loss back):
//
//   CPU    values are host memory (the heap, or CpuDevice's arena, which is
//          host memory too); kernels run on the calling thread; zero/copy
//          are memset/memcpy; on the CPU device (cpuDeviceBackend) a bf16
//          plan's values are bf16 there, converted around the fp32 kernels
//   CUDA   values are device memory of a CudaDevice's arena; the kernels
//          and the executor's own memory operations are queued on the
//          device's compute stream by the thread running the executor, in
//          program order, and nothing waits for them except download()
//          (runtime/exec/cuda/CudaBackend.h)
//
// So the executor's code is the same for both: it never dereferences a
// value itself, except through hostMemory() backends' pointers in the CPU
// kernels.
//
// The memory operations (zero, copy, upload, download) and the aux-term
// slots are for the kernels and the executors' internals: a failure there
// fails the running op (raise(), runtime/exec/Failure.h) and reaches the
// caller of the executor's entry point as a Status. checkDeferredErrors()
// and issue(), called by the executors between ops, return theirs.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_BACKEND_H
#define MTC_RUNTIME_EXEC_BACKEND_H

#include "lib/Support/Status.h"
#include "runtime/exec/KernelTable.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace mtc::exec {

class Backend {
public:
  virtual ~Backend() = default;

  /// The kernels of this backend.
  virtual const KernelTable &table() const = 0;
  /// Whether values are host memory the executor may read and write
  /// directly (CPU); false for device memory (CUDA).
  virtual bool hostMemory() const = 0;
  /// Whether values are stored as the step plan's precision lays them out
  /// (bf16 weights and activations under a bf16 plan): the device backends
  /// and the CPU device's backend (cpuDeviceBackend). False for the host
  /// executor's CPU backend, which runs every bundle in fp32 on the master
  /// weights.
  virtual bool planStorage() const { return !hostMemory(); }

  /// \p bytes of zeros at value memory \p p.
  virtual void zero(void *p, int64_t bytes) = 0;
  /// \p bytes from value memory \p src to value memory \p dst (ranges do
  /// not overlap, or are equal).
  virtual void copy(void *dst, const void *src, int64_t bytes) = 0;
  /// \p bytes from host memory \p src into value memory \p dst; \p src must
  /// stay valid until the work queued so far has run.
  virtual void upload(void *dst, const void *src, int64_t bytes) = 0;
  /// \p bytes of value memory \p src into host memory \p dst, once every
  /// write queued before has landed (the CUDA backend waits for its stream
  /// here: use it only where the plan allows a synchronisation).
  virtual void download(void *dst, const void *src, int64_t bytes) = 0;

  /// Errors the backend's kernels could only record on the device (a token
  /// id outside the vocabulary), read once the work queued so far has run:
  /// the caller synchronised first. An error naming the first one.
  virtual Status checkDeferredErrors() { return Status::success(); }

  /// A slot of the backend's own memory for one double that a kernel
  /// computes (a moe op's aux loss on a device backend): its index and its
  /// address. takeAuxTerms() returns every slot reserved since its last
  /// call, by index, once the work queued so far has run (the caller
  /// synchronised, or a download did), and frees them. Host backends
  /// compute aux losses on the host and have no slots.
  virtual std::pair<int64_t, void *> reserveAuxTerm() { return {-1, nullptr}; }
  virtual std::vector<double> takeAuxTerms() { return {}; }

  /// Device compute of a streaming runtime on stream \p stream (a
  /// device::Stream id) of the backend's device. False when the backend has
  /// no device of its own (CPU: the caller launches \p fn as a closure
  /// instead); otherwise \p fn runs now, on the calling thread, and its
  /// kernels and memory operations are queued on that stream, timed as one
  /// compute span named \p label. An error when the device has failed (fn
  /// does not run) or fn raised one (Failure.h).
  virtual Expected<bool> issue(int stream, const std::function<void()> &fn,
                               const std::string &label) {
    (void)stream, (void)fn, (void)label;
    return false;
  }
};

/// The CPU backend: the CPU kernel table over host memory, every value
/// fp32.
Backend &cpuBackend();
/// The CPU device's backend: as cpuBackend, but values are stored as the
/// step plan's precision says (bf16 plans: the conversion layer,
/// cpuBf16KernelTable).
Backend &cpuDeviceBackend();

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_BACKEND_H
