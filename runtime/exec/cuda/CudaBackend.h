//===- CudaBackend.h - The executor's backend on a CUDA device --*- C++ -*-===//
//
// Part of mtc. The executor (runtime/exec/Executor.h) on a CudaDevice: values
// live in the device's arena, every op runs through the CUDA kernel table
// (CudaKernels.cpp: each entry calls the launchers of runtime/cuda/ops, which
// queue the library kernels of runtime/cuda/kernels and cuBLASLt GEMMs), and
// the executor's own memory operations are driver calls on the same stream.
//
// How it is driven: the streaming runtime (runtime/stream) hands each piece
// of device compute to issue(), which runs the executor right away, on the
// issuing thread, inside CudaDevice::compute(): the host walks the ops in
// program order and queues their kernels on the compute stream, never
// waiting for the GPU (download() is the one exception). The device's other
// streams (weights in, gradients out, the optimizer's host stream) are
// ordered against it by the plan's events, exactly as with CpuDevice's
// launched closures.
//
// Over the emulated driver (`--device cuda-emu`) the same code runs the
// kernels' emulator builds on the CPU and the GEMMs on the CPU GEMM.
//
// Scratch: the launchers' temporaries (norm weight-gradient partials, the
// embedding gradient's sort, a chunk of logits) come from a region of its
// own (one cuMemAlloc, `scratchBytes`), reused from the start by every op:
// all of the backend's work is on one stream, so an op's kernels run after
// the previous op's have finished with it. The memory plan does not count it:
// it is the device memory beside the plan's arena (deviceBytes(), printed by
// the tools; docs/cuda.md, "Device memory").
//
// Thread safety: one issuing thread at a time, like the device.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_EXEC_CUDA_CUDABACKEND_H
#define MTC_RUNTIME_EXEC_CUDA_CUDABACKEND_H

#include "lib/Bundle/Bundle.h"
#include "lib/Support/Status.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/KernelLoader.h"
#include "runtime/cuda/ops/Launch.h"
#include "runtime/device/CudaDevice.h"
#include "runtime/exec/Backend.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mtc::exec {

/// The CUDA kernel table (CudaKernels.cpp), filled once.
const KernelTable &cudaKernelTable();

class CudaBackend final : public Backend {
public:
  /// Default size of the scratch region.
  static constexpr int64_t kDefaultScratchBytes = int64_t(256) << 20;

  /// The backend over \p device: its kernel loader (NVRTC on a GPU, the
  /// registered emulator modules on the emulated driver), its GEMM engine
  /// (cuBLASLt, or the CPU GEMM) and its scratch region. Errors name what
  /// could not be opened or allocated.
  static Expected<std::unique_ptr<CudaBackend>>
  create(device::CudaDevice &device,
         int64_t scratchBytes = kDefaultScratchBytes);
  /// The device memory create() allocates (one cuMemAlloc): the scratch
  /// region of \p scratchBytes plus the token checks' and aux terms' flags.
  static int64_t deviceBytes(int64_t scratchBytes = kDefaultScratchBytes) {
    return 4 * kMaxTokenChecks + 8 * kMaxAuxTerms + scratchBytes;
  }
  ~CudaBackend() override;
  CudaBackend(const CudaBackend &) = delete;
  CudaBackend &operator=(const CudaBackend &) = delete;

  const KernelTable &table() const override { return cudaKernelTable(); }
  bool hostMemory() const override { return false; }
  void zero(void *p, int64_t bytes) override;
  void copy(void *dst, const void *src, int64_t bytes) override;
  void upload(void *dst, const void *src, int64_t bytes) override;
  void download(void *dst, const void *src, int64_t bytes) override;
  Expected<bool> issue(int stream, const std::function<void()> &fn,
                       const std::string &label) override;

  /// Where the op being run queues its work: the current stream, the
  /// backend's kernels and GEMM engine, and the scratch region (emptied:
  /// every op starts with all of it).
  cuda::ops::Launch launch();
  /// Queues \p n copies of the 32-bit pattern \p bits at \p p.
  void fill32(void *p, uint32_t bits, int64_t n);
  /// A device int32 for embedding() to report an id outside the vocabulary
  /// of the op being run (ops/Embedding.h), checked by
  /// checkDeferredErrors() with \p ids (device) of \p n tokens, \p V and
  /// the op's location for the message.
  cuda::ops::DevPtr tokenCheck(const std::string &where, const void *ids,
                               int64_t n, int64_t V);
  Status checkDeferredErrors() override;
  /// Aux loss terms: doubles at the backend's own memory (kMaxAuxTerms of
  /// them between two takeAuxTerms(), which reads them all in one copy).
  std::pair<int64_t, void *> reserveAuxTerm() override;
  std::vector<double> takeAuxTerms() override;

  /// Keeps the scratch the running op has allocated so far for the ops it
  /// runs inside itself (a moe op's routing outlives its experts' ops):
  /// while the hold lasts, launch() starts the scratch after it.
  class ScratchHold {
  public:
    explicit ScratchHold(CudaBackend &b) : b(b), saved(b.scratchFloor) {
      b.scratchFloor = b.scratchTop;
    }
    ~ScratchHold() { b.scratchFloor = saved; }
    ScratchHold(const ScratchHold &) = delete;
    ScratchHold &operator=(const ScratchHold &) = delete;

  private:
    CudaBackend &b;
    int64_t saved;
  };
  /// Entry \p entry of a bundle's fused kernels \p kernels (module
  /// fusedModuleName(kernels)), loaded once: compiled by NVRTC on a GPU, by
  /// the host compiler on the emulated driver.
  Expected<void *> fusedFunction(const bundle::CudaKernels &kernels,
                                 const std::string &entry);
  /// "fused-<xxh64 of the source>.cu": one module per distinct source.
  static std::string fusedModuleName(const bundle::CudaKernels &kernels);
  /// fusedModuleName(kernels), hashed once per bundle rather than once per
  /// launch (the source is the whole bundle's CUDA C).
  const std::string &fusedModule(const bundle::CudaKernels &kernels);
  /// "cuBLASLt 130001", "cpu (emulated)": for messages and reports.
  std::string gemmName() const { return gemm->name(); }

private:
  CudaBackend(device::CudaDevice &device) : dev(device) {}
  /// raise()s \p st's message when it is an error (Failure.h).
  static void check(const Status &st);
  void checkDeferredErrorsOrRaise();
  /// The arena's first byte (device memory).
  const char *arenaBase() const;
  /// The stream work is queued on (an error outside issue()).
  void *stream() const;
  /// A Launch for the executor's own memory operations: unlike launch(),
  /// it leaves the op's scratch alone (zeroing a result in the middle of an
  /// op must not hand its scratch out again).
  cuda::ops::Launch memoryLaunch() const;
  cuda::ops::DevPtr offsetOf(const void *p) const;

  device::CudaDevice &dev;
  std::unique_ptr<cuda::KernelLoader> loader;
  /// fusedFunction's functions by (module, entry).
  std::map<std::pair<std::string, std::string>, void *> fusedFunctions;
  /// fusedModule's last answer and the source it was computed for.
  struct {
    const bundle::CudaKernels *kernels = nullptr;
    const char *data = nullptr;
    size_t size = 0;
    std::string name;
  } lastFusedModule;
  std::unique_ptr<cuda::ops::KernelFunctions> functions;
  std::unique_ptr<cuda::GemmEngine> gemm;
  /// The CUstream and stream id issue() is running for (null and -1
  /// outside it: kernels are refused there).
  void *cu = nullptr;
  int streamId = -1;
  /// The backend's own stream, for reads outside issue().
  int ownStream = -1;
  /// Token checks since the last checkDeferredErrors(): one int32 each at
  /// the start of the scratch allocation (kMaxTokenChecks of them).
  struct TokenCheck {
    std::string where;
    const void *ids;
    int64_t n, V;
  };
  static constexpr int64_t kMaxTokenChecks = 1024;
  std::vector<TokenCheck> tokenChecks;
  unsigned long long flagsBase = 0;
  /// Aux loss terms reserved since the last takeAuxTerms(), after the token
  /// checks' flags.
  static constexpr int64_t kMaxAuxTerms = 4096;
  int64_t auxTerms = 0;
  unsigned long long auxBase = 0;
  unsigned long long scratchBase = 0;
  /// launch() empties the scratch down to scratchFloor (ScratchHold).
  int64_t scratchBytes = 0, scratchTop = 0, scratchFloor = 0;
};

} // namespace mtc::exec

#endif // MTC_RUNTIME_EXEC_CUDA_CUDABACKEND_H
