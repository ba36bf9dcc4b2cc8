//===- StreamExecutor.cpp - Runs a bundle's step plan on a device ---------===//
//
// Part of mtc. See StreamExecutor.h and docs/streaming.md. This file: the
// executor's construction (streams, events, the parameter locator), its
// device memory, weight loads, and the optimizer updates it defers or runs
// as gradients return. The plan's checks are PlanCheck.cpp's, the step
// StepLoop.cpp's, its host side HostStage.cpp's.
//
//===----------------------------------------------------------------------===//

#include "runtime/stream/StreamExecutor.h"
#include "runtime/stream/StreamSupport.h"

#include "lib/Bundle/Plan.h"

namespace mtc::stream {

using detail::deviceCheck;
using detail::deviceValue;
using detail::now;
using detail::planError;
using exec::catchRaised;
using exec::ParamSlot;
using exec::raise;
using exec::valueOrRaise;

namespace {

const bundle::StepPlan &planOf(const bundle::Bundle &b) {
  if (!b.step)
    planError("the bundle has no step plan (compile it with --device-memory)");
  return *b.step;
}

} // namespace

Expected<std::unique_ptr<StreamExecutor>>
StreamExecutor::create(const bundle::Bundle &b, exec::ParamStore &store,
                       exec::Executor &ex, device::Device &dev) {
  std::unique_ptr<StreamExecutor> s;
  Status st =
      catchRaised([&] { s.reset(new StreamExecutor(b, store, ex, dev)); });
  if (!st) {
    ex.setParamLocator(nullptr); // the constructor may have set it
    return st;
  }
  return s;
}

StreamExecutor::StreamExecutor(const bundle::Bundle &bundle,
                               exec::ParamStore &store, exec::Executor &ex,
                               device::Device &target)
    : b(bundle), p(planOf(bundle)), store(store), ex(ex), mem(ex.runsOn()),
      device(target) {
  auto it = b.functions.find("forward_backward");
  if (it == b.functions.end())
    planError("the bundle has no forward_backward function");
  fb = &it->second;
  validate();

  compute = deviceValue(device.createStream("compute"));
  h2d = deviceValue(device.createStream("h2d"));
  d2h = deviceValue(device.createStream("d2h"));
  opt = deviceValue(device.createHostStream("optimizer"));
  if (hostActivations) {
    actIn = deviceValue(device.createStream("h2d.act"));
    actOut = deviceValue(device.createStream("d2h.act"));
    for (int k = 0; k < 2; ++k) {
      evActIn[k] = deviceValue(device.createEvent());
      evActInFree[k] = deviceValue(device.createEvent());
      evActOut[k] = deviceValue(device.createEvent());
      evActOutFree[k] = deviceValue(device.createEvent());
    }
    for (int64_t mb = 0; mb < p.microBatches; ++mb)
      evHostAct.push_back(deviceValue(device.createEvent()));
    evStageHost = deviceValue(device.createEvent());
  }
  for (int64_t s = 0; s < p.prefetchDepth; ++s) {
    evWeights.push_back(deviceValue(device.createEvent()));
    evSlotFree.push_back(deviceValue(device.createEvent()));
    evUpdated.push_back(deviceValue(device.createEvent()));
  }
  for (int k = 0; k < 2; ++k) {
    evGradReady[k] = deviceValue(device.createEvent());
    evGradFree[k] = deviceValue(device.createEvent());
    evStaged[k] = deviceValue(device.createEvent());
    evStagingFree[k] = deviceValue(device.createEvent());
    evRestored[k] = deviceValue(device.createEvent());
    evStagingRead[k] = deviceValue(device.createEvent());
  }
  evModelUpdated = deviceValue(device.createEvent());
  evModelWeights = deviceValue(device.createEvent());
  evModelGrads = deviceValue(device.createEvent());
  slotHolds.assign(static_cast<size_t>(p.prefetchDepth), {});

  ex.setParamLocator([this](const ParamSlot &s, bool grad) -> float * {
    auto it = where.find(&s);
    if (it == where.end())
      raise("parameter '" + s.name + "' is not in the step plan");
    const Group *g = it->second.first;
    size_t k = it->second.second;
    int64_t off = grad ? g->gradOffsets[k] : g->offsets[k];
    int64_t bytes = bundle::elementBytes(grad ? DType::F32 : paramType) *
                    static_cast<int64_t>(s.value.size());
    if (g == &modelGroup)
      return dev((grad ? modelGradsOff : modelWeightsOff) + off, bytes);
    if (g != boundWeights)
      raise("parameter '" + s.name +
            "' is used while its layer instance's weights are not "
            "on the device");
    if (grad) {
      if (boundGradsOff < 0)
        raise("gradient of '" + s.name + "' outside a backward computation");
      return dev(boundGradsOff + off, bytes);
    }
    return dev(boundWeightsOff + off, bytes);
  });
}

StreamExecutor::~StreamExecutor() {
  (void)device.synchronize(); // errors are not reported from a destructor
  ex.setParamLocator(nullptr);
}

float *StreamExecutor::dev(int64_t offset, int64_t bytes) {
  return static_cast<float *>(deviceValue(device.at(offset, bytes)));
}

int64_t StreamExecutor::offsetOf(const void *p) {
  return static_cast<const char *>(p) -
         static_cast<const char *>(deviceValue(device.at(0, 0)));
}

StreamExecutor::Group &StreamExecutor::group(const std::string &layer,
                                             int64_t instance) {
  return groups.at({layer, instance});
}

int64_t StreamExecutor::bufferOffset(const std::string &name,
                                     int64_t need) const {
  const bundle::PlanBuffer *buf = p.buffer(name);
  if (!buf)
    planError("no buffer '" + name + "'");
  if (buf->space != "device")
    planError("buffer '" + name + "' is not in device memory");
  if (buf->bytes < need)
    planError("buffer '" + name + "' has " + std::to_string(buf->bytes) +
              " bytes; the runtime needs " + std::to_string(need));
  if (buf->offset < 0 || buf->offset + buf->bytes > device.capacity())
    planError("buffer '" + name + "' [" + std::to_string(buf->offset) + ", +" +
              std::to_string(buf->bytes) + ") lies outside the device's " +
              std::to_string(device.capacity()) + " bytes");
  return buf->offset;
}

int64_t StreamExecutor::checkpointBytes(const std::string &layer) const {
  return ckptBytes.at(layer);
}

int64_t StreamExecutor::checkpointIndex(const std::string &layer,
                                        int64_t instance) const {
  auto it = ckptIndex.find({layer, instance});
  if (it == ckptIndex.end())
    raise("no checkpoint for instance " + std::to_string(instance) +
          " of layer '" + layer + "'");
  return it->second;
}

void StreamExecutor::launchWork(device::Stream s, std::function<void()> fn,
                                const std::string &label) {
  // What fn raise()s fails the device with its message (Failure.h), which
  // the step's synchronisation returns.
  deviceCheck(device.launch(s, std::move(fn), label));
}

void StreamExecutor::launchCompute(std::function<void()> fn,
                                   const std::string &label) {
  // A backend with a device of its own (CUDA) queues the kernels now, from
  // this thread; the CPU's are run by the compute stream's thread.
  if (!valueOrRaise(mem.issue(compute, fn, label)))
    launchWork(compute, std::move(fn), label);
}

int64_t StreamExecutor::actOff(int64_t side, int64_t mb) const {
  return activationsOff + (side * p.microBatches + mb) * activationBytes;
}

int64_t StreamExecutor::actSlotOff(bool out, int64_t j) const {
  return activationsOff + ((out ? 2 : 0) + j) * activationBytes;
}

int64_t StreamExecutor::segmentSlot(int64_t q, int64_t mb) const {
  return segmentOff + (q * p.microBatches + mb) * activationBytes;
}

int64_t StreamExecutor::hostBytes() const {
  return hostCkptBytes + hostActBytes + p.microBatches * hostStageBytes +
         ringSlots * ringSlotBytes;
}

void StreamExecutor::launchUpdate(Group &g, device::Event done) {
  if (g.layer.empty())
    modelPending = false;
  else
    pendingGroups.erase({g.layer, g.instance});
  UpdateFn fn = pendingFn;
  std::vector<ParamSlot *> slots = g.slots;
  std::string label =
      g.layer.empty() ? std::string("adamw model")
                      : "adamw " + g.layer + "." + std::to_string(g.instance);
  launchWork(
      opt,
      [this, fn, slots] {
        double t0 = now();
        fn(slots);
        stats.optimizerSeconds += now() - t0;
      },
      label);
  deviceCheck(device.record(done, opt));
}

device::Convert StreamExecutor::weightConvert() const {
  return paramType == DType::BF16 ? device::Convert::F32ToBF16
                                  : device::Convert::None;
}

void StreamExecutor::loadWeights(const std::string &layer, int64_t j) {
  size_t s = static_cast<size_t>(j % p.prefetchDepth);
  SlotContent &held = slotHolds[s];
  if (held.layer == layer && held.instance == j && held.step == stepCounter) {
    ++stats.residentReuses;
    return;
  }
  Group &g = group(layer, j);
  deviceCheck(device.wait(h2d, evSlotFree[s]));
  for (size_t q = 0; q < g.slots.size(); ++q)
    deviceCheck(device.copyToDevice(
        h2d, weightsOff[s] + g.offsets[q], g.slots[q]->value.data(),
        4 * static_cast<int64_t>(g.slots[q]->value.size()), weightConvert(),
        "weights " + g.slots[q]->name));
  deviceCheck(device.record(evWeights[s], h2d));
  held = {layer, j, stepCounter};
  ++stats.weightLoads;
}

Status StreamExecutor::deferUpdate(UpdateFn fn) {
  if (hasPendingUpdates() || modelPending)
    if (Status st = flush(); !st)
      return st;
  pendingFn = std::move(fn);
  for (auto &[key, g] : groups)
    pendingGroups.insert(key);
  modelPending = true;
  return Status::success();
}

Status StreamExecutor::updateImmediately(ImmediateFn fn) {
  if (!hasGradRing())
    return Status::error("the immediate optimizer placement needs a plan "
                         "compiled with it (its 'grads.host' ring)");
  if (hasPendingUpdates() || modelPending)
    if (Status st = flush(); !st)
      return st;
  immediateFn = std::move(fn);
  return Status::success();
}

void StreamExecutor::copyGradsToHost(Group &g, int64_t devOff) {
  if (deviceReduce) {
    // Summed over the ranks on the device first: the copy carries the sum.
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (size_t q = 0; q < g.slots.size(); ++q)
      ranges.push_back({devOff + g.gradOffsets[q],
                        static_cast<int64_t>(g.slots[q]->value.size())});
    deviceCheck(deviceReduce(d2h, ranges, g.layer.empty()));
  }
  if (!immediateFn) {
    // Into the store's gradient block: fp32 as accumulated, or rounded to
    // bf16 on the way (--grad-dtype bf16).
    for (size_t q = 0; q < g.slots.size(); ++q) {
      ParamSlot &s = *g.slots[q];
      const int64_t bytes = 4 * static_cast<int64_t>(s.value.size());
      if (s.gradBf16)
        deviceCheck(device.copyToHost(
            d2h, s.gradBf16, devOff + g.gradOffsets[q], bytes,
            "grads " + s.name + " (to bf16)", device::Convert::F32ToBF16));
      else
        deviceCheck(device.copyToHost(d2h, s.grad.data(),
                                      devOff + g.gradOffsets[q], bytes,
                                      "grads " + s.name));
    }
    if (gradsReady)
      launchWork(
          d2h, [fn = gradsReady, slots = g.slots] { fn(slots); },
          "grads ready");
    return;
  }
  const size_t r = static_cast<size_t>(ringNext++ % ringSlots);
  char *slot = ring.get() + static_cast<int64_t>(r) * ringSlotBytes;
  // The slot is free once the update that read it last is done.
  deviceCheck(device.wait(d2h, evRingFree[r]));
  std::vector<const float *> grads;
  for (size_t q = 0; q < g.slots.size(); ++q) {
    float *dst = reinterpret_cast<float *>(slot + g.gradOffsets[q]);
    deviceCheck(
        device.copyToHost(d2h, dst, devOff + g.gradOffsets[q],
                          4 * static_cast<int64_t>(g.slots[q]->value.size()),
                          "grads " + g.slots[q]->name));
    grads.push_back(dst);
  }
  deviceCheck(device.record(evRingFull[r], d2h));
  deviceCheck(device.wait(opt, evRingFull[r]));
  ImmediateFn fn = immediateFn;
  std::vector<ParamSlot *> slots = g.slots;
  launchWork(
      opt,
      [this, fn, slots, grads] {
        double t0 = now();
        fn(slots, grads);
        stats.optimizerSeconds += now() - t0;
      },
      g.layer.empty() ? std::string("adamw model")
                      : "adamw " + g.layer + "." + std::to_string(g.instance));
  deviceCheck(device.record(evRingFree[r], opt));
}

Status StreamExecutor::flush() {
  if (Status st = device.synchronize(); !st)
    return st.withPrefix("device");
  if (modelPending)
    pendingFn(modelGroup.slots);
  modelPending = false;
  for (const auto &key : pendingGroups)
    pendingFn(groups.at(key).slots);
  pendingGroups.clear();
  return Status::success();
}

} // namespace mtc::stream
