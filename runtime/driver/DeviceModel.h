//===- DeviceModel.h - A whole model resident on a device -------*- C++ -*-===//
//
// Part of mtc. The executor of `generate --device` and `gradcheck --device`:
// every parameter resident, no step plan. On `cpu` it is the host executor
// (the bundle's compiled CPU kernels). On `cuda` / `cuda-emu` it is the
// executor with the CUDA backend over a CudaDevice whose arena holds
//
//   [ parameter values (f32) | parameter gradients (f32) | workspace ]
//
// the workspace taking the rest of --device-memory for the values of one
// call (Executor::run allocates them there, nothing is planned). Each call
// uploads the host parameter values first (so a caller may change them
// between calls, as gradcheck's finite differences do), runs the bundle's
// function on the device's compute stream, and brings back what it computes
// (the loss, the gradients into the ParamStore's grad arrays, the logits).
// The bundle runs in fp32 on every device (a bf16 step plan's storage is
// ignored here). KV-cache decoding is the CPU executor's only.
//
// Errors are values: open() and the calls return them (the executor's and
// the device's, the device's message kept behind "device: ").
//
// Thread safety: one calling thread.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_DEVICEMODEL_H
#define MTC_RUNTIME_DRIVER_DEVICEMODEL_H

#include "lib/Bundle/Bundle.h"
#include "lib/Support/Status.h"
#include "runtime/driver/DeviceKind.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ParamStore.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mtc::device {
class CudaDevice;
}
namespace mtc::exec {
class CudaBackend;
}

namespace mtc::driver {

class DeviceModel {
public:
  /// \p b's executor over \p store on a device of \p kind with \p deviceMemory
  /// bytes of device memory (CUDA only; at least the parameters' values and
  /// gradients plus some workspace). Errors name the device and what is
  /// missing.
  static Expected<std::unique_ptr<DeviceModel>> open(const bundle::Bundle &b,
                                                     exec::ParamStore &store,
                                                     DeviceKind kind,
                                                     int64_t deviceMemory);
  ~DeviceModel();
  DeviceModel(const DeviceModel &) = delete;
  DeviceModel &operator=(const DeviceModel &) = delete;

  /// "cpu", or the GPU's name with the device memory's split.
  std::string describe() const;
  /// Whether the host executor's KV cache can be used (cpu only).
  bool host() const { return !gpu; }
  /// The executor (routing pins, the KV cache on the CPU).
  exec::Executor &executor() { return *ex; }

  /// Executor::forwardBackward; the gradients land in the store's grad
  /// arrays (overwritten on a device; accumulated on the CPU, as there).
  Expected<double> forwardBackward(const int32_t *tokens,
                                   const int32_t *targets, int64_t B,
                                   int64_t S);
  /// Executor::loss.
  Expected<double> loss(const int32_t *tokens, const int32_t *targets,
                        int64_t B, int64_t S);
  /// Executor::logits, in host memory.
  Expected<exec::Tensor> logits(const int32_t *tokens, int64_t B, int64_t S);

private:
  DeviceModel() = default;
  /// Uploads the values, then runs \p fn on the compute stream with the
  /// workspace current (fn may exec::raise). The error of the device, the
  /// backend or fn.
  Status run(const std::function<void()> &fn);
  /// Device memory at \p offset; exec::raise()s a range outside the arena.
  float *at(int64_t offset, int64_t bytes);

  bundle::Bundle b; ///< a copy, fp32
  exec::ParamStore *store = nullptr;
  std::unique_ptr<device::CudaDevice> gpu;
  std::unique_ptr<exec::CudaBackend> backend;
  std::unique_ptr<exec::Executor> ex;
  exec::Workspace workspace;
  std::vector<int64_t> valueOff, gradOff; ///< per store slot
  int64_t paramBytes = 0, workspaceOff = 0;
  int stream = 0;
};

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_DEVICEMODEL_H
