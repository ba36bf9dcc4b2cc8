//===- DeviceModel.cpp - A whole model resident on a device -----*- C++ -*-===//
//
// Part of mtc. See DeviceModel.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/DeviceModel.h"

#include "lib/Support/ByteSize.h"
#include "runtime/device/CudaDevice.h"
#include "runtime/driver/DeviceSelect.h"
#include "runtime/exec/cuda/CudaBackend.h"

namespace mtc::driver {

namespace {

int64_t roundUp(int64_t bytes) { return (bytes + 255) / 256 * 256; }

} // namespace

Expected<std::unique_ptr<DeviceModel>>
DeviceModel::open(const bundle::Bundle &bundle, exec::ParamStore &store,
                  const std::string &device, int64_t deviceMemory) {
  std::unique_ptr<DeviceModel> m(new DeviceModel());
  m->b = bundle;
  // Every device runs the functions in fp32 (DeviceModel.h).
  if (m->b.step)
    m->b.step->precision = "fp32";
  m->store = &store;
  if (device == "cpu") {
    m->ex = std::make_unique<exec::Executor>(m->b, store);
    if (Status st = m->ex->useBundleKernels(); !st.ok())
      return st;
    return m;
  }
  if (!isKnownDevice(device))
    return Status::error("--device expects cpu, cuda or cuda-emu, got '" +
                         device + "'");
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
      openCudaDriverFor(device);
  if (!api)
    return api.status().withPrefix("--device " + device);
  try {
    m->gpu = std::make_unique<device::CudaDevice>(*api, deviceMemory);
  } catch (const device::DeviceError &e) {
    return Status::error("--device " + device + ": " + e.message);
  }
  Expected<std::unique_ptr<exec::CudaBackend>> be =
      exec::CudaBackend::create(*m->gpu);
  if (!be)
    return be.status().withPrefix("--device " + device);
  m->backend = std::move(*be);
  try {
    m->ex = std::make_unique<exec::Executor>(m->b, store, *m->backend);
  } catch (const exec::ExecError &e) {
    return Status::error("--device " + device + ": " + e.message);
  }
  m->stream = m->gpu->createStream("compute").id;
  m->workspace = exec::Workspace(
      m->at(m->workspaceOff, deviceMemory - m->workspaceOff),
      deviceMemory - m->workspaceOff,
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
  try {
    gpu->synchronize();
  } catch (...) {
  }
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
  return static_cast<float *>(gpu->at(offset, bytes));
}

void DeviceModel::run(const std::function<void()> &fn) {
  try {
    device::Stream s(stream);
    const std::vector<exec::ParamSlot> &slots = store->slots();
    for (size_t k = 0; k < slots.size(); ++k)
      gpu->copyToDevice(s, valueOff[k], slots[k].value.data(),
                        4 * static_cast<int64_t>(slots[k].value.size()));
    backend->issue(
        stream,
        [&] {
          exec::Workspace::Scope scope(&workspace);
          workspace.reset();
          fn();
        },
        "call");
    gpu->synchronize(s);
    backend->checkDeferredErrors();
  } catch (const device::DeviceError &e) {
    throw exec::ExecError{"device: " + e.message};
  }
}

double DeviceModel::forwardBackward(const int32_t *tokens,
                                    const int32_t *targets, int64_t B,
                                    int64_t S) {
  if (!gpu)
    return ex->forwardBackward(tokens, targets, B, S);
  double loss = 0;
  run([&] {
    backend->zero(at(gradOff.front(), paramBytes - gradOff.front()),
                  paramBytes - gradOff.front());
    loss = ex->forwardBackward(tokens, targets, B, S);
  });
  try {
    device::Stream s(stream);
    std::vector<exec::ParamSlot> &slots = store->slots();
    for (size_t k = 0; k < slots.size(); ++k)
      gpu->copyToHost(s, slots[k].grad.data(), gradOff[k],
                      4 * static_cast<int64_t>(slots[k].grad.size()));
    gpu->synchronize(s);
  } catch (const device::DeviceError &e) {
    throw exec::ExecError{"device: " + e.message};
  }
  return loss;
}

double DeviceModel::loss(const int32_t *tokens, const int32_t *targets,
                         int64_t B, int64_t S) {
  if (!gpu)
    return ex->loss(tokens, targets, B, S);
  double l = 0;
  run([&] { l = ex->loss(tokens, targets, B, S); });
  return l;
}

exec::Tensor DeviceModel::logits(const int32_t *tokens, int64_t B, int64_t S) {
  if (!gpu)
    return ex->logits(tokens, B, S);
  exec::Tensor out;
  run([&] { out = ex->logits(tokens, B, S); });
  return out;
}

} // namespace mtc::driver
