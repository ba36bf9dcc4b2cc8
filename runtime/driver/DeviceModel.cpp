//===- DeviceModel.cpp - A whole model resident on a device -----*- C++ -*-===//
//
// Part of mtc. See DeviceModel.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/DeviceModel.h"

#include "lib/Bundle/Plan.h"
#include "lib/Support/ByteSize.h"
#include "runtime/device/CudaDevice.h"
#include "runtime/driver/DeviceSelect.h"
#include "runtime/exec/Failure.h"
#include "runtime/exec/cuda/CudaBackend.h"

namespace mtc::driver {

namespace {

int64_t roundUp(int64_t bytes) { return (bytes + 255) / 256 * 256; }

} // namespace

Expected<std::unique_ptr<DeviceModel>>
DeviceModel::open(const bundle::Bundle &bundle, exec::ParamStore &store,
                  DeviceKind kind, int64_t deviceMemory) {
  std::unique_ptr<DeviceModel> m(new DeviceModel());
  m->b = bundle;
  // Every device runs the functions in fp32 (DeviceModel.h).
  if (m->b.step)
    m->b.step->precision = bundle::precisionName(bundle::Precision::F32);
  m->store = &store;
  if (!isGpu(kind)) {
    Expected<std::unique_ptr<exec::Executor>> ex =
        exec::Executor::create(m->b, store);
    if (!ex)
      return ex.status();
    m->ex = std::move(*ex);
    if (Status st = m->ex->useBundleKernels(); !st.ok())
      return st;
    return m;
  }
  const std::string device = deviceKindName(kind);
  // The arena: values, gradients, then the workspace.
  for (const exec::ParamSlot &s : store.slots()) {
    m->valueOff.push_back(m->paramBytes);
    m->paramBytes += roundUp(4 * static_cast<int64_t>(s.value.size()));
  }
  for (const exec::ParamSlot &s : store.slots()) {
    m->gradOff.push_back(m->paramBytes);
    m->paramBytes += roundUp(4 * static_cast<int64_t>(s.value.size()));
  }
  m->workspaceOff = m->paramBytes;
  if (deviceMemory <= m->paramBytes)
    return Status::error(
        "--device " + device + ": the model's parameters and gradients take " +
        std::to_string(m->paramBytes) + " bytes of device memory (" +
        formatBytes(m->paramBytes, ByteFormat::approx()) +
        "), and --device-memory is " + std::to_string(deviceMemory) +
        ": give more, leaving room for the values of one call");
  Expected<std::shared_ptr<const cuda::CudaDriverApi>> api =
      openCudaDriverFor(kind);
  if (!api)
    return api.status().withPrefix("--device " + device);
  Expected<std::unique_ptr<device::CudaDevice>> gpu =
      device::CudaDevice::create(*api, deviceMemory);
  if (!gpu)
    return gpu.status().withPrefix("--device " + device);
  m->gpu = std::move(*gpu);
  Expected<std::unique_ptr<exec::CudaBackend>> be =
      exec::CudaBackend::create(*m->gpu);
  if (!be)
    return be.status().withPrefix("--device " + device);
  m->backend = std::move(*be);
  Expected<std::unique_ptr<exec::Executor>> ex =
      exec::Executor::create(m->b, store, *m->backend);
  if (!ex)
    return ex.status().withPrefix("--device " + device);
  m->ex = std::move(*ex);
  Expected<device::Stream> stream = m->gpu->createStream("compute");
  if (!stream)
    return stream.status().withPrefix("--device " + device);
  m->stream = stream->id;
  Expected<void *> ws =
      m->gpu->at(m->workspaceOff, deviceMemory - m->workspaceOff);
  if (!ws)
    return ws.status().withPrefix("--device " + device);
  m->workspace = exec::Workspace(
      static_cast<float *>(*ws), deviceMemory - m->workspaceOff,
      "the device's workspace (--device-memory)", m->backend.get());
  DeviceModel *self = m.get();
  m->ex->setParamLocator([self](const exec::ParamSlot &s, bool grad) {
    size_t k = static_cast<size_t>(&s - self->store->slots().data());
    int64_t bytes = 4 * static_cast<int64_t>(s.value.size());
    return self->at(grad ? self->gradOff.at(k) : self->valueOff.at(k), bytes);
  });
  return m;
}

DeviceModel::~DeviceModel() {
  if (!gpu)
    return;
  (void)gpu->synchronize(); // errors are not reported from a destructor
  ex.reset();
  backend.reset();
}

std::string DeviceModel::describe() const {
  if (!gpu)
    return "cpu";
  return gpu->name() + " (CUDA kernels, GEMMs on " + backend->gemmName() +
         "), device memory " + std::to_string(gpu->capacity()) +
         " bytes: parameters and gradients " + std::to_string(paramBytes) +
         ", workspace " + std::to_string(gpu->capacity() - workspaceOff) +
         ", plus the CUDA backend's " +
         std::to_string(exec::CudaBackend::deviceBytes());
}

float *DeviceModel::at(int64_t offset, int64_t bytes) {
  return static_cast<float *>(exec::valueOrRaise(gpu->at(offset, bytes)));
}

Status DeviceModel::run(const std::function<void()> &fn) {
  device::Stream s(stream);
  const std::vector<exec::ParamSlot> &slots = store->slots();
  for (size_t k = 0; k < slots.size(); ++k)
    if (Status st =
            gpu->copyToDevice(s, valueOff[k], slots[k].value.data(),
                              4 * static_cast<int64_t>(slots[k].value.size()));
        !st)
      return st.withPrefix("device");
  Expected<bool> issued = backend->issue(
      stream,
      [&] {
        exec::Workspace::Scope scope(&workspace);
        workspace.reset();
        fn();
      },
      "call");
  if (!issued)
    return issued.status();
  if (Status st = gpu->synchronize(s); !st)
    return st.withPrefix("device");
  if (Status st = backend->checkDeferredErrors(); !st)
    return st.withPrefix("device");
  return Status::success();
}

Expected<double> DeviceModel::forwardBackward(const int32_t *tokens,
                                              const int32_t *targets, int64_t B,
                                              int64_t S) {
  if (!gpu)
    return ex->forwardBackward(tokens, targets, B, S);
  double loss = 0;
  if (Status st = run([&] {
        backend->zero(at(gradOff.front(), paramBytes - gradOff.front()),
                      paramBytes - gradOff.front());
        loss = exec::valueOrRaise(ex->forwardBackward(tokens, targets, B, S));
      });
      !st)
    return st;
  device::Stream s(stream);
  std::vector<exec::ParamSlot> &slots = store->slots();
  for (size_t k = 0; k < slots.size(); ++k)
    if (Status st =
            gpu->copyToHost(s, slots[k].grad.data(), gradOff[k],
                            4 * static_cast<int64_t>(slots[k].grad.size()));
        !st)
      return st.withPrefix("device");
  if (Status st = gpu->synchronize(s); !st)
    return st.withPrefix("device");
  return loss;
}

Expected<double> DeviceModel::loss(const int32_t *tokens,
                                   const int32_t *targets, int64_t B,
                                   int64_t S) {
  if (!gpu)
    return ex->loss(tokens, targets, B, S);
  double l = 0;
  if (Status st =
          run([&] { l = exec::valueOrRaise(ex->loss(tokens, targets, B, S)); });
      !st)
    return st;
  return l;
}

Expected<exec::Tensor> DeviceModel::logits(const int32_t *tokens, int64_t B,
                                           int64_t S) {
  if (!gpu)
    return ex->logits(tokens, B, S);
  exec::Tensor out;
  if (Status st =
          run([&] { out = exec::valueOrRaise(ex->logits(tokens, B, S)); });
      !st)
    return st;
  return out;
}

} // namespace mtc::driver
