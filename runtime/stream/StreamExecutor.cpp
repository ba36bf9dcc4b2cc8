//===- StreamExecutor.cpp - Runs a bundle's step plan on a device ---------===//
//
// Part of mtc. See StreamExecutor.h and docs/streaming.md.
//
//===----------------------------------------------------------------------===//

#include "runtime/stream/StreamExecutor.h"

#include "lib/Bundle/Plan.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace mtc::stream {

using exec::catchRaised;
using exec::ParamSlot;
using exec::raise;
using exec::raiseIfError;
using exec::Tensor;
using exec::valueOrRaise;
using exec::Workspace;

namespace {

[[noreturn]] void planError(const std::string &msg) {
  raise("step plan: " + msg);
}

const bundle::StepPlan &planOf(const bundle::Bundle &b) {
  if (!b.step)
    planError("the bundle has no step plan (compile it with --device-memory)");
  return *b.step;
}

/// Whether value \p v of \p f is the result of an attention op (which
/// carries its log-sum-exp). At construction only: runLoop reads the answer
/// from attentionResults.
bool isAttentionResult(const bundle::Function &f, int v) {
  for (const bundle::Op &op : f.ops)
    if (bundle::opKindOf(op.name) == bundle::OpKind::Attention &&
        !op.results.empty() && op.results[0] == v)
      return true;
  return false;
}

/// A device call's error, raised with "device: " in front (the tools print
/// device errors so).
void deviceCheck(const Status &st) {
  if (!st.ok())
    raise("device: " + st.message());
}
template <typename T> T deviceValue(Expected<T> e) {
  deviceCheck(e.status());
  return std::move(e).value();
}

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
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

void StreamExecutor::validate() {
  const int64_t M = p.microBatches;
  if (p.batch <= 0 || p.seq <= 0 || M <= 0 || p.prefetchDepth <= 0)
    planError("batch, seq, micro_batches and prefetch_depth must be positive");
  if (p.devicePeak > device.capacity())
    planError("needs " + std::to_string(p.devicePeak) +
              " bytes of device memory; the device has " +
              std::to_string(device.capacity()));
  // A bf16 plan stores weights and activations as bf16 on the device
  // (lib/Bundle/Plan.h, Precision): the executor must store its values as
  // the plan does (a device backend, or exec::cpuDeviceBackend()).
  const bundle::Precision precision = bundle::planPrecision(b);
  if (precision != bundle::Precision::F32 && !mem.planStorage())
    planError(std::string("precision ") + p.precision +
              ": the executor's backend runs every plan in fp32 (the CPU "
              "device's executor runs on exec::cpuDeviceBackend())");
  paramType = bundle::deviceParamDType(precision);
  if (p.recompute != "full" && p.recompute != "none" &&
      p.recompute != "selective")
    planError("recompute must be 'full', 'none' or 'selective'");
  segmentLength = p.checkpointEvery;
  if (segmentLength < 1)
    planError("checkpoint_every must be >= 1");
  if (segmentLength > 1 && p.recompute != "full")
    planError("checkpoint_every " + std::to_string(segmentLength) +
              " needs recompute 'full'");
  if (p.selectiveLayers >= 0 && p.recompute != "selective")
    planError("selective_layers " + std::to_string(p.selectiveLayers) +
              " needs recompute 'selective'");
  if (segmentLength > p.prefetchDepth)
    planError("checkpoint_every " + std::to_string(segmentLength) +
              " needs as many weight slots; the plan has " +
              std::to_string(p.prefetchDepth));
  hostCheckpoints = p.checkpoints == "host";
  // The plan decides (analysis::planMemory: host checkpoints and M > 1):
  // host activations are there when their host buffer is.
  hostActivations = p.buffer("activations.host") != nullptr;
  if (hostActivations && !hostCheckpoints)
    planError("buffer 'activations.host' needs checkpoints in host memory");
  hostStage = p.buffer("stage.host") != nullptr;
  if (hostStage && !hostActivations)
    planError("buffer 'stage.host' needs host activations");

  // Parameter groups and their layout inside a weight slot.
  auto addSlot = [&](Group &g, ParamSlot *s) {
    if (!s)
      planError("a parameter of the bundle is missing from the store");
    g.slots.push_back(s);
    const int64_t n = static_cast<int64_t>(s->value.size());
    g.offsets.push_back(g.bytes);
    g.bytes += bundle::tensorBytes(n, paramType);
    g.gradOffsets.push_back(g.gradBytes);
    g.gradBytes += bundle::tensorBytes(n, DType::F32);
  };
  for (const bundle::Param &pr : b.params)
    addSlot(modelGroup, store.model(pr.name));
  for (const bundle::Layer &l : b.layers)
    for (int64_t i = 0; i < l.count; ++i) {
      Group &g = groups[{l.name, i}];
      g.layer = l.name;
      g.instance = i;
      for (const bundle::Param &pr : l.params)
        addSlot(g, store.layer(l.name, i, pr.name));
      for (const bundle::Expert &x : l.experts)
        for (int64_t e = 0; e < x.count; ++e)
          for (const bundle::Param &pr : x.params)
            addSlot(g, store.expert(l.name, i, x.name, e, pr.name));
      slotBytes = std::max(slotBytes, g.bytes);
      gradSlotBytes = std::max(gradSlotBytes, g.gradBytes);
    }
  for (size_t k = 0; k < modelGroup.slots.size(); ++k)
    where[modelGroup.slots[k]] = {&modelGroup, k};
  for (auto &[key, g] : groups)
    for (size_t k = 0; k < g.slots.size(); ++k)
      where[g.slots[k]] = {&g, k};

  // The program: commands, loops and what they carry.
  auto concrete = [&](const bundle::ValueType &t) {
    std::vector<int64_t> out;
    for (Dim d : t.shape)
      out.push_back(d == kDimB ? p.batch : d == kDimS ? p.seq : d);
    return out;
  };
  auto numel = [](const std::vector<int64_t> &s) {
    int64_t n = 1;
    for (int64_t d : s)
      n *= d;
    return n;
  };
  int64_t ckptTotal = 0, positions = 0, stackIndex = 0;
  Expected<std::vector<StepCommand>> decoded = decodeStepProgram(p, *fb);
  if (!decoded)
    planError(decoded.message());
  program = std::move(*decoded);
  for (const StepCommand &c : program) {
    if (c.kind != StepCommandKind::Layers)
      continue;
    const bundle::Op &op = *c.op;
    bool forward = c.forward;
    const bundle::Layer *layer = b.layer(op.symbol);
    if (!layer || !layer->functions.count("forward") ||
        !layer->functions.count("backward"))
      planError("no layer '" + op.symbol + "' with forward and backward");
    int64_t boundary = numel(concrete(fb->values.at(op.operands.at(0))));
    const bundle::Function &f = layer->functions.at("forward");
    std::vector<DType> &types = resultTypes[layer->name];
    {
      std::vector<DType> st = bundle::valueStorage(f, precision);
      actType = st.at(f.args.at(0));
      types.clear();
      for (int r : f.results)
        types.push_back(st.at(r));
    }
    activationBytes =
        std::max(activationBytes, bundle::tensorBytes(boundary, actType));
    std::vector<bool> &lse = attentionResults[layer->name];
    lse.assign(f.results.size(), false);
    for (size_t r = 0; r < f.results.size(); ++r)
      lse[r] = isAttentionResult(f, f.results[r]);
    if (forward) {
      int64_t bytes = 0;
      for (size_t r = 0; r < f.results.size(); ++r) {
        std::vector<int64_t> shape = concrete(f.values.at(f.results[r]));
        bytes += bundle::tensorBytes(numel(shape), types[r]);
        if (r > 0 && lse[r])
          bytes += bundle::tensorBytes(shape[0] * shape[1] * shape[2]);
      }
      if (p.recompute == "full" && f.results.size() != 1)
        planError("recompute 'full' but layer '" + layer->name +
                  "' keeps intermediates");
      ckptBytes[layer->name] = bytes;
      // Mixed recomputation: past the first selective_layers instances of
      // the stack an instance keeps its input alone.
      const int64_t inputBytes = bundle::tensorBytes(boundary, actType);
      for (int64_t i = c.first; i < c.first + c.count; ++i, ++stackIndex) {
        if ((i - c.first) % segmentLength != 0)
          continue; // recomputed from its segment's checkpoint
        int64_t kept = bytes;
        if (p.selectiveLayers >= 0 && stackIndex >= p.selectiveLayers) {
          if (!layer->functions.count("backward_full"))
            planError("selective_layers " + std::to_string(p.selectiveLayers) +
                      " but layer '" + layer->name +
                      "' has no backward_full function");
          fullInstances.insert({layer->name, i});
          kept = inputBytes;
        }
        maxCkptBytes = std::max(maxCkptBytes, kept);
        ckptIndex[{layer->name, i}] = ckptTotal;
        ckptTotal += M * kept;
        ++positions;
      }
    }
  }

  // Buffers.
  modelWeightsOff = bufferOffset("model.weights", modelGroup.bytes);
  modelGradsOff = bufferOffset("model.grads", modelGroup.gradBytes);
  for (int64_t s = 0; s < p.prefetchDepth; ++s)
    weightsOff.push_back(
        bufferOffset("weights." + std::to_string(s), slotBytes));
  gradsOff[0] = bufferOffset("grads.0", gradSlotBytes);
  gradsOff[1] = bufferOffset("grads.1", gradSlotBytes);
  activationsOff =
      bufferOffset("activations", hostActivations ? 4 * activationBytes
                                                  : 2 * M * activationBytes);
  if (hostActivations) {
    const bundle::PlanBuffer *ha = p.buffer("activations.host");
    hostActBytes = M * activationBytes;
    if (ha->space != "host" || ha->bytes < hostActBytes)
      planError("buffer 'activations.host' must be host memory of at least " +
                std::to_string(hostActBytes) + " bytes");
    hostAct.reset(new char[static_cast<size_t>(hostActBytes)]);
  }
  if (const bundle::PlanBuffer *gh = p.buffer("grads.host")) {
    ringSlotBytes = std::max(gradSlotBytes, modelGroup.gradBytes);
    ringSlots = ringSlotBytes > 0 ? gh->bytes / ringSlotBytes : 0;
    if (gh->space != "host" || ringSlots < 1)
      planError("buffer 'grads.host' must be host memory of at least one "
                "gradient group (" +
                std::to_string(ringSlotBytes) + " bytes)");
    ring.reset(new char[static_cast<size_t>(ringSlots * ringSlotBytes)]);
    for (int64_t r = 0; r < ringSlots; ++r) {
      evRingFull.push_back(deviceValue(device.createEvent()));
      evRingFree.push_back(deviceValue(device.createEvent()));
    }
  }
  if (hostCheckpoints) {
    stagingOff = bufferOffset("checkpoints",
                              (hostActivations ? 2 : 2 * M) * maxCkptBytes);
    hostCkptBytes = ckptTotal;
    hostCkpt.reset(
        new char[static_cast<size_t>(std::max<int64_t>(hostCkptBytes, 1))]);
  } else {
    checkpointsOff = bufferOffset("checkpoints", ckptTotal);
  }
  if (segmentLength > 1)
    segmentOff = bufferOffset("segment", segmentLength * M * activationBytes);
  const bundle::PlanBuffer *stage = p.buffer("stage");
  if (hostStage) {
    // One slot; each stage command is a segment of the stage plan.
    stagePlan =
        bundle::planStage(bundle::stageProgram(*fb, precision, p.batch, p.seq));
    fbStorage = bundle::valueStorage(*fb, precision);
    int64_t need = 0;
    for (const bundle::StagePlan::Segment &seg : stagePlan.segments)
      need = std::max(need, seg.inBytes + seg.outBytes);
    stageOff = bufferOffset("stage", need);
    stageBytes = stage->bytes;
    for (const StepCommand &c : program)
      if (c.kind == StepCommandKind::Stage) {
        const bundle::StagePlan::Segment *seg = stagePlan.segment(c.begin);
        if (!seg || seg->end != static_cast<int64_t>(c.end))
          planError("stage [" + std::to_string(c.begin) + ", " +
                    std::to_string(c.end) +
                    ") is not a run of forward_backward's ops between layer "
                    "loops");
      }
    hostStageBytes = stagePlan.hostBytes;
    const bundle::PlanBuffer *sh = p.buffer("stage.host");
    if (sh->space != "host" || sh->bytes < M * hostStageBytes)
      planError("buffer 'stage.host' must be host memory of at least " +
                std::to_string(M * hostStageBytes) + " bytes");
    hostStageMem.reset(new char[static_cast<size_t>(
        std::max<int64_t>(M * hostStageBytes, 1))]);
  } else {
    stageOff = bufferOffset("stage", 0);
    stageBytes = stage->bytes / M / 64 * 64;
    for (int64_t mb = 0; mb < M; ++mb)
      stageWs.emplace_back(dev(stageOff + mb * stageBytes, stageBytes),
                           stageBytes, "stage", &mem);
  }
  // Layer functions place their values by liveness (bundle::
  // planLayerFunction, the plan the compiler sized the workspace with).
  std::map<const bundle::Function *, bundle::FunctionPlan> plans;
  int64_t wsNeed = 0;
  for (const bundle::Layer &l : b.layers)
    for (const auto &[name, fn] : l.functions) {
      bundle::FunctionPlan fp =
          bundle::planLayerFunction(b, l.name, fn, p.batch, p.seq);
      wsNeed = std::max(wsNeed, fp.bytes());
      plans[&fn] = std::move(fp);
    }
  ex.setFunctionPlans(std::move(plans));
  const bundle::PlanBuffer *ws = p.buffer("workspace");
  workspaceOff = bufferOffset("workspace", wsNeed);
  workspaceBytes = ws->bytes;
  workspace = Workspace(dev(workspaceOff, workspaceBytes), workspaceBytes,
                        "workspace", &mem);
  (void)positions;
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

char *StreamExecutor::hostStageValue(int64_t mb, int v) const {
  int64_t off = stagePlan.hostOffset.at(v);
  if (off < 0)
    raise("value " + std::to_string(v) +
          " of forward_backward has no place in host memory");
  return hostStageMem.get() + mb * hostStageBytes + off;
}

int64_t StreamExecutor::stageValueBytes(int v) const {
  return bundle::elementBytes(fbStorage.at(v)) *
         bundle::concreteNumel(fb->values.at(v).shape, p.batch, p.seq);
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

Expected<std::vector<double>>
StreamExecutor::step(const std::vector<const int32_t *> &tokens,
                     const std::vector<const int32_t *> &targets) {
  return exec::catchRaisedValue<std::vector<double>>(
      [&] { return stepOrRaise(tokens, targets); });
}

std::vector<double>
StreamExecutor::stepOrRaise(const std::vector<const int32_t *> &tokens,
                            const std::vector<const int32_t *> &targets) {
  const int64_t M = p.microBatches;
  if (static_cast<int64_t>(tokens.size()) != M ||
      static_cast<int64_t>(targets.size()) != M)
    raise("the step plan runs " + std::to_string(M) + " micro-batches; got " +
          std::to_string(tokens.size()));
  ++stepCounter;
  stats = StepStats{};
  stats.deviceBudgetBytes = device.capacity();
  device.resetStats();
  measuredWorkspacePeak = 0;
  stageSlotPeak = 0;

  std::vector<std::vector<Tensor>> vals(static_cast<size_t>(M));
  std::vector<exec::AuxLoss> aux(static_cast<size_t>(M));
  std::vector<double> loss(static_cast<size_t>(M), 0.0);
  std::vector<char> haveLoss(static_cast<size_t>(M), 0);
  // Device backends: each micro-batch's loss comes back by a copy queued
  // after the op computing it (read after the step's synchronisation).
  std::vector<float> lossCopied(static_cast<size_t>(M), 0.0f);
  launchCompute(
      [&] {
        ex.beginStep(p.batch, p.seq);
        for (int64_t mb = 0; mb < M; ++mb) {
          if (hostStage) {
            // Each stage command brings in the token ids it reads.
            vals[mb].assign(fb->values.size(), Tensor{});
            continue;
          }
          stageWs[mb].reset();
          stageWs[mb].resetPeak();
          Workspace::Scope scope(&stageWs[mb]);
          vals[mb].assign(fb->values.size(), Tensor{});
          vals[mb][fb->args.at(0)] = Tensor::ints({p.batch, p.seq}, tokens[mb]);
          vals[mb][fb->args.at(1)] =
              Tensor::ints({p.batch, p.seq}, targets[mb]);
        }
      },
      "step inputs");

  // Queued commands refer to this frame: if queueing fails, wait for what
  // was queued before unwinding.
  try {
    for (const StepCommand &c : program) {
      switch (c.kind) {
      case StepCommandKind::LoadModelWeights: {
        if (modelPending) {
          launchUpdate(modelGroup, evModelUpdated);
          deviceCheck(device.wait(h2d, evModelUpdated));
        }
        for (size_t q = 0; q < modelGroup.slots.size(); ++q)
          deviceCheck(device.copyToDevice(
              h2d, modelWeightsOff + modelGroup.offsets[q],
              modelGroup.slots[q]->value.data(),
              4 * static_cast<int64_t>(modelGroup.slots[q]->value.size()),
              weightConvert(), "weights " + modelGroup.slots[q]->name));
        deviceCheck(device.record(evModelWeights, h2d));
        deviceCheck(device.wait(compute, evModelWeights));
        launchCompute(
            [this] {
              mem.zero(dev(modelGradsOff, modelGroup.gradBytes),
                       modelGroup.gradBytes);
            },
            "zero model grads");
        ++stats.modelWeightLoads;
        break;
      }
      case StepCommandKind::Stage: {
        if (hostStage) {
          runHostStage(c, vals, tokens, targets, loss, haveLoss, lossCopied);
          break;
        }
        size_t begin = c.begin, end = c.end;
        std::vector<const float *> found(static_cast<size_t>(M), nullptr);
        launchCompute(
            [&, begin, end] {
              for (int64_t mb = 0; mb < M; ++mb) {
                Workspace::Scope scope(&stageWs[mb]);
                raiseIfError(ex.runOps(*fb, vals[mb], begin, end));
                const Tensor &r = vals[mb][fb->results.at(0)];
                if (!haveLoss[mb] && r.f) {
                  if (mem.hostMemory()) {
                    ex.resetAux();
                    loss[mb] = valueOrRaise(ex.lossOf(r));
                  } else {
                    found[mb] = r.data();
                  }
                  haveLoss[mb] = true;
                }
              }
            },
            "stage ops [" + std::to_string(begin) + ", " + std::to_string(end) +
                ")");
        for (int64_t mb = 0; mb < M; ++mb)
          if (found[mb])
            deviceCheck(device.copyToHost(compute, &lossCopied[mb],
                                          offsetOf(found[mb]), sizeof(float),
                                          "loss"));
        break;
      }
      case StepCommandKind::Layers: {
        LoopInfo loop;
        loop.cmd = &c;
        loop.op = c.op;
        loop.forward = c.forward;
        loop.first = c.first;
        loop.count = c.count;
        for (Dim d : fb->values.at(loop.op->operands.at(0)).shape)
          loop.boundaryShape.push_back(d == kDimB   ? p.batch
                                       : d == kDimS ? p.seq
                                                    : d);
        loop.boundaryNumel = 1;
        for (int64_t d : loop.boundaryShape)
          loop.boundaryNumel *= d;
        runLoop(loop, vals, aux);
        break;
      }
      case StepCommandKind::ReturnModelGrads:
        deviceCheck(device.record(evModelGrads, compute));
        deviceCheck(device.wait(d2h, evModelGrads));
        copyGradsToHost(modelGroup, modelGradsOff);
        break;
      case StepCommandKind::OptimizerUpdate:
      case StepCommandKind::Prefetch:
      case StepCommandKind::WaitWeights:
      case StepCommandKind::Save:
      case StepCommandKind::Restore:
      case StepCommandKind::Compute:
      case StepCommandKind::GradReturn:
        break; // only in a layers body (decodeStepProgram)
      }
    }
  } catch (...) {
    (void)device.synchronize(); // the first error is the one to report
    throw;
  }
  deviceCheck(device.synchronize());
  raiseIfError(mem.checkDeferredErrors());
  // The aux losses device kernels computed (one copy for the whole step).
  const std::vector<double> auxTerms = mem.takeAuxTerms();

  device::DeviceStats ds = device.stats();
  stats.h2dBytes = ds.h2dBytes;
  stats.d2hBytes = ds.d2hBytes;
  stats.overlap = ds.overlap;
  // Measured peak: the end of the highest region in use, with the bump
  // regions counted as far as they were used.
  int64_t peak = std::max(modelWeightsOff + modelGroup.bytes,
                          modelGradsOff + modelGroup.gradBytes);
  for (int64_t off : weightsOff)
    peak = std::max(peak, off + slotBytes);
  for (int64_t off : gradsOff)
    peak = std::max(peak, off + gradSlotBytes);
  peak = std::max(peak, activationsOff +
                            (hostActivations ? 4 : 2 * M) * activationBytes);
  if (hostCheckpoints)
    peak = std::max(peak,
                    stagingOff + (hostActivations ? 2 : 2 * M) * maxCkptBytes);
  else if (!ckptIndex.empty())
    peak =
        std::max(peak, checkpointsOff + static_cast<int64_t>(ckptIndex.size()) *
                                            M * maxCkptBytes);
  if (hostStage)
    peak = std::max(peak, stageOff + stageSlotPeak);
  else
    for (int64_t mb = 0; mb < M; ++mb)
      peak = std::max(peak, stageOff + mb * stageBytes + stageWs[mb].peak());
  if (segmentLength > 1)
    peak = std::max(peak, segmentOff + segmentLength * M * activationBytes);
  peak = std::max(peak, workspaceOff + measuredWorkspacePeak);
  stats.devicePeakBytes = peak;

  std::vector<double> out(static_cast<size_t>(M));
  for (int64_t mb = 0; mb < M; ++mb) {
    if (!haveLoss[mb])
      raise("the step program computed no loss");
    if (!mem.hostMemory())
      loss[mb] = lossCopied[mb];
    out[mb] = loss[mb] + valueOrRaise(aux[mb].total(auxTerms));
  }
  return out;
}

void StreamExecutor::runLoop(const LoopInfo &loop,
                             std::vector<std::vector<Tensor>> &vals,
                             std::vector<exec::AuxLoss> &aux) {
  const int64_t M = p.microBatches, depth = p.prefetchDepth;
  const std::string layer = loop.op->symbol;
  const int64_t boundaryBytes =
      bundle::elementBytes(actType) * loop.boundaryNumel;
  std::vector<int64_t> order;
  for (int64_t k = 0; k < loop.count; ++k)
    order.push_back(loop.forward ? loop.first + k
                                 : loop.first + loop.count - 1 - k);
  const bundle::Op *op = loop.op;
  std::vector<int64_t> shape = loop.boundaryShape;

  // The loop's input, per micro-batch, into the activation buffer (host
  // activations: the first instance reads it from the stage directly).
  if (!hostActivations)
    launchCompute(
        [this, &vals, op, boundaryBytes, M] {
          for (int64_t mb = 0; mb < M; ++mb) {
            const Tensor &x = vals[mb][op->operands.at(0)];
            if (!x.f || x.bytes() != boundaryBytes)
              raise("layers loop input has the wrong shape");
            mem.copy(dev(actOff(0, mb), boundaryBytes), x.data(),
                     boundaryBytes);
          }
        },
        "loop input");

  // Extra results a `--recompute none` or `selective` forward keeps, and
  // their layout after the input inside a checkpoint.
  const bundle::Layer *l = b.layer(layer);
  InstanceCall call;
  call.layer = layer;
  call.shape = shape;
  call.boundaryBytes = boundaryBytes;
  std::vector<std::vector<int64_t>> &extraShapes = call.extraShapes;
  std::vector<int64_t> &extraOffsets = call.extraOffsets;
  std::vector<int64_t> &extraLse = call.extraLse;
  {
    const bundle::Function &f = l->functions.at("forward");
    const std::vector<DType> &types = resultTypes.at(layer);
    int64_t off = bundle::tensorBytes(loop.boundaryNumel, actType);
    for (size_t r = 1; r < f.results.size(); ++r) {
      std::vector<int64_t> s;
      int64_t n = 1;
      for (Dim d : f.values.at(f.results[r]).shape) {
        s.push_back(d == kDimB ? p.batch : d == kDimS ? p.seq : d);
        n *= s.back();
      }
      extraShapes.push_back(s);
      call.extraTypes.push_back(types.at(r));
      extraOffsets.push_back(off);
      off += bundle::tensorBytes(n, types.at(r));
      if (attentionResults.at(layer).at(r)) {
        // [B, S, Hq] log-sum-exp after the output.
        extraLse.push_back(off);
        off += bundle::tensorBytes(s[0] * s[1] * s[2]);
      } else {
        extraLse.push_back(-1);
      }
    }
  }
  call.ckpt = ckptBytes.count(layer) ? ckptBytes.at(layer) : 0;

  auto targets = [&](int64_t k, int64_t ahead) {
    std::vector<int64_t> t;
    if (k == 0) {
      for (int64_t a = 0; a <= ahead && a < loop.count; ++a)
        t.push_back(order[a]);
    } else if (k + ahead < loop.count) {
      t.push_back(order[k + ahead]);
    }
    return t;
  };

  for (int64_t k = 0; k < loop.count; ++k) {
    const int64_t i = order[k];
    // Mixed recomputation: an instance past the first S of the stack keeps
    // its input alone and runs backward_full.
    InstanceCall here = call;
    if (fullInstances.count({layer, i})) {
      here.full = true;
      here.ckpt = bundle::tensorBytes(loop.boundaryNumel, actType);
      here.extraShapes.clear();
      here.extraTypes.clear();
      here.extraOffsets.clear();
      here.extraLse.clear();
    }
    const int64_t ckpt = here.ckpt;
    const size_t s = static_cast<size_t>(i % depth);
    const int64_t st = k % 2;
    const int64_t in = k % 2, out = (k + 1) % 2;
    bool saveHost = false, restoreHost = false, returnGrads = false;
    for (const StepCommand &c : loop.cmd->body) {
      switch (c.kind) {
      case StepCommandKind::OptimizerUpdate:
        for (int64_t j : targets(k, c.ahead)) {
          if (!pendingGroups.count({layer, j}))
            continue;
          size_t sj = static_cast<size_t>(j % depth);
          launchUpdate(group(layer, j), evUpdated[sj]);
          deviceCheck(device.wait(h2d, evUpdated[sj]));
        }
        break;
      case StepCommandKind::Prefetch:
        for (int64_t j : targets(k, c.ahead))
          loadWeights(layer, j);
        break;
      case StepCommandKind::WaitWeights:
        loadWeights(layer, i); // a no-op when prefetched
        deviceCheck(device.wait(compute, evWeights[s]));
        break;
      case StepCommandKind::Save:
        saveHost = c.host;
        break;
      case StepCommandKind::Restore:
        // Segment checkpointing restores a segment's checkpoint once, for
        // its recomputation (recomputeSegment).
        restoreHost = c.host && segmentLength == 1;
        if (restoreHost && !hostActivations) {
          int64_t pos = checkpointIndex(layer, i);
          // The staging slot is free once compute has read it, and the
          // host copy is complete once every offload queued before it has
          // run (d2h runs in order; the latest record of either staging
          // slot's event covers them all).
          deviceCheck(device.wait(h2d, evStagingRead[st]));
          deviceCheck(device.wait(h2d, evStagingFree[0]));
          deviceCheck(device.wait(h2d, evStagingFree[1]));
          for (int64_t mb = 0; mb < M; ++mb)
            deviceCheck(device.copyToDevice(
                h2d, stagingOff + (st * M + mb) * maxCkptBytes,
                hostCkpt.get() + pos + mb * ckpt, ckpt, device::Convert::None,
                "restore " + layer + "." + std::to_string(i)));
          deviceCheck(device.record(evRestored[st], h2d));
          deviceCheck(device.wait(compute, evRestored[st]));
        }
        break;
      case StepCommandKind::GradReturn:
        returnGrads = true;
        break;
      case StepCommandKind::Compute: {
        Group *g = &group(layer, i);
        const int64_t wOff = weightsOff[s];
        // Segment checkpointing: the first instance of each segment keeps
        // its checkpoint; the backward of a segment starts at its last
        // instance by recomputing the forward of the others, whose inputs
        // then wait in the `segment` buffer (slot i - s0).
        const int64_t s0 =
            loop.first + (i - loop.first) / segmentLength * segmentLength;
        const bool keeps = i == s0;
        const int64_t segSlot =
            segmentLength > 1 && !loop.forward ? i - s0 : -1;
        const int64_t pos = keeps ? checkpointIndex(layer, i) : -1;
        if (!loop.forward && segmentLength > 1) {
          const int64_t top =
              std::min(s0 + segmentLength, loop.first + loop.count) - 1;
          if (i == top)
            recomputeSegment(call, s0, top);
        }
        if (!keeps)
          saveHost = false;
        InstanceCall inst = here;
        inst.instance = i;
        if (hostActivations) {
          computeHostActivations(loop, vals, aux, inst, k, s, g, wOff, pos,
                                 segSlot, saveHost, restoreHost);
        } else if (loop.forward) {
          if (saveHost)
            deviceCheck(device.wait(compute, evStagingFree[st]));
          launchCompute(
              [this, &aux, M, g, wOff, pos, in, out, st, saveHost, call = inst,
               boundaryBytes, ckpt] {
                boundWeights = g;
                boundWeightsOff = wOff;
                boundGradsOff = -1;
                for (int64_t mb = 0; mb < M; ++mb) {
                  int64_t dest = saveHost
                                     ? stagingOff + (st * M + mb) * maxCkptBytes
                                     : checkpointsOff + pos + mb * ckpt;
                  forwardOne(call, dev(actOff(in, mb), boundaryBytes),
                             pos < 0
                                 ? nullptr
                                 : reinterpret_cast<char *>(dev(dest, ckpt)),
                             dev(actOff(out, mb), boundaryBytes), aux[mb]);
                }
                boundWeights = nullptr;
              },
              "forward " + layer + "." + std::to_string(i));
          deviceCheck(device.record(evSlotFree[s], compute));
          if (saveHost) {
            deviceCheck(device.record(evStaged[st], compute));
            deviceCheck(device.wait(d2h, evStaged[st]));
            for (int64_t mb = 0; mb < M; ++mb)
              deviceCheck(device.copyToHost(
                  d2h, hostCkpt.get() + pos + mb * ckpt,
                  stagingOff + (st * M + mb) * maxCkptBytes, ckpt,
                  "offload " + layer + "." + std::to_string(i)));
            deviceCheck(device.record(evStagingFree[st], d2h));
          }
        } else {
          const int64_t gs = k % 2;
          const int64_t gOff = gradsOff[gs];
          deviceCheck(device.wait(compute, evGradFree[gs]));
          launchCompute(
              [this, M, g, wOff, gOff, pos, in, out, st, restoreHost, segSlot,
               call = inst, boundaryBytes, ckpt] {
                boundWeights = g;
                boundWeightsOff = wOff;
                boundGradsOff = gOff;
                mem.zero(dev(gOff, g->gradBytes), g->gradBytes);
                for (int64_t mb = 0; mb < M; ++mb) {
                  int64_t src = segSlot >= 0 ? segmentSlot(segSlot, mb)
                                : restoreHost
                                    ? stagingOff + (st * M + mb) * maxCkptBytes
                                    : checkpointsOff + pos + mb * ckpt;
                  backwardOne(call, reinterpret_cast<char *>(dev(src, ckpt)),
                              dev(actOff(in, mb), boundaryBytes),
                              dev(actOff(out, mb), boundaryBytes));
                }
                boundWeights = nullptr;
                boundGradsOff = -1;
              },
              "backward " + layer + "." + std::to_string(i));
          deviceCheck(device.record(evSlotFree[s], compute));
          deviceCheck(device.record(evGradReady[gs], compute));
          if (restoreHost)
            deviceCheck(device.record(evStagingRead[st], compute));
        }
        break;
      }
      case StepCommandKind::LoadModelWeights:
      case StepCommandKind::Stage:
      case StepCommandKind::Layers:
      case StepCommandKind::ReturnModelGrads:
        break; // never in a body (decodeStepProgram)
      }
    }
    if (returnGrads) {
      const int64_t gs = k % 2;
      Group &g = group(layer, i);
      deviceCheck(device.wait(d2h, evGradReady[gs]));
      copyGradsToHost(g, gradsOff[gs]);
      deviceCheck(device.record(evGradFree[gs], d2h));
    }
  }

  // The loop's result, per micro-batch, into the stage's values (host
  // activations: the last instance wrote them).
  if (hostActivations)
    return;
  const int64_t last = loop.count % 2;
  launchCompute(
      [this, &vals, op, shape, boundaryBytes, last, M] {
        for (int64_t mb = 0; mb < M; ++mb) {
          Workspace::Scope scope(&stageWs[mb]);
          Tensor y = Tensor::empty(shape, actType);
          mem.copy(y.data(), dev(actOff(last, mb), boundaryBytes),
                   boundaryBytes);
          vals[mb][op->results.at(0)] = std::move(y);
        }
      },
      "loop result");
}

void StreamExecutor::runHostStage(const StepCommand &c,
                                  std::vector<std::vector<Tensor>> &vals,
                                  const std::vector<const int32_t *> &tokens,
                                  const std::vector<const int32_t *> &targets,
                                  std::vector<double> &loss,
                                  std::vector<char> &haveLoss,
                                  std::vector<float> &lossCopied) {
  const bundle::StagePlan::Segment *seg = stagePlan.segment(c.begin);
  const std::string range =
      "[" + std::to_string(c.begin) + ", " + std::to_string(c.end) + ")";
  auto concrete = [&](int v) {
    std::vector<int64_t> out;
    for (Dim d : fb->values.at(v).shape)
      out.push_back(d == kDimB ? p.batch : d == kDimS ? p.seq : d);
    return out;
  };
  // The queued closures outlive this frame: they capture the step's
  // objects by pointer.
  auto *valsP = &vals;
  auto *lossP = &loss;
  auto *haveP = &haveLoss;
  for (int64_t mb = 0; mb < p.microBatches; ++mb) {
    const std::string what = " " + range + " mb " + std::to_string(mb);
    // Loop results of this micro-batch are in host memory, and the slot's
    // previous user is done (compute runs in order).
    deviceCheck(device.wait(compute, evHostAct[static_cast<size_t>(mb)]));
    for (size_t q = 0; q < seg->in.size(); ++q)
      deviceCheck(device.copyToDevice(
          compute, stageOff + seg->inOffset[q], hostStageValue(mb, seg->in[q]),
          stageValueBytes(seg->in[q]), device::Convert::None,
          "stage in" + what));
    const float *found = nullptr;
    const int32_t *ids = tokens[mb], *tgt = targets[mb];
    launchCompute(
        [this, seg, mb, valsP, lossP, haveP, ids, tgt, &found, concrete] {
          std::vector<Tensor> &v = (*valsP)[mb];
          const int64_t fixed = seg->inBytes + seg->outBytes;
          Workspace ws(dev(stageOff + fixed, stageBytes - fixed),
                       stageBytes - fixed, "stage", &mem);
          Workspace::Scope scope(&ws);
          for (size_t q = 0; q < seg->in.size(); ++q) {
            int id = seg->in[q];
            float *at = dev(stageOff + seg->inOffset[q], stageValueBytes(id));
            if (fbStorage.at(id) == DType::I32) {
              Tensor t;
              t.shape = concrete(id);
              t.isInt = true;
              t.dtype = DType::I32;
              t.i = std::shared_ptr<int32_t>(reinterpret_cast<int32_t *>(at),
                                             [](int32_t *) {});
              v[id] = std::move(t);
            } else {
              v[id] = Tensor::view(concrete(id), at, fbStorage[id]);
            }
          }
          for (int a : seg->args)
            v[a] = Tensor::ints(concrete(a), a == fb->args.at(0) ? ids : tgt);
          raiseIfError(ex.runOps(*fb, v, seg->begin, seg->end));
          const Tensor &r = v[fb->results.at(0)];
          if (!(*haveP)[mb] && r.f) {
            if (mem.hostMemory()) {
              ex.resetAux();
              (*lossP)[mb] = valueOrRaise(ex.lossOf(r));
            } else {
              found = r.data();
            }
            (*haveP)[mb] = 1;
          }
          for (size_t q = 0; q < seg->out.size(); ++q) {
            int id = seg->out[q];
            const Tensor &t = v[id];
            const void *src = t.isInt ? static_cast<const void *>(t.ints())
                                      : static_cast<const void *>(t.data());
            int64_t bytes = stageValueBytes(id);
            if (!src || t.bytes() != bytes)
              raise("stage value " + std::to_string(id) +
                    " has the wrong shape");
            mem.copy(dev(stageOff + seg->outOffset[q], bytes), src, bytes);
          }
          stageSlotPeak = std::max(stageSlotPeak, fixed + ws.peak());
        },
        "stage ops" + what);
    for (size_t q = 0; q < seg->out.size(); ++q)
      deviceCheck(device.copyToHost(compute, hostStageValue(mb, seg->out[q]),
                                    stageOff + seg->outOffset[q],
                                    stageValueBytes(seg->out[q]),
                                    "stage out" + what));
    // Device backends ran the closure now: the loss is a device value.
    if (found)
      deviceCheck(device.copyToHost(compute, &lossCopied[mb], offsetOf(found),
                                    sizeof(float), "loss"));
  }
  deviceCheck(device.record(evStageHost, compute));
}

void StreamExecutor::forwardOne(const InstanceCall &call, float *x, char *ckpt,
                                float *y, exec::AuxLoss &aux) {
  if (ckpt)
    mem.copy(ckpt, x, call.boundaryBytes);
  workspace.reset();
  Workspace::Scope scope(&workspace);
  ex.resetAux();
  std::vector<Tensor> outs =
      valueOrRaise(ex.runLayer(call.layer, call.instance, "forward",
                               {Tensor::view(call.shape, x, actType)}));
  aux += ex.auxLoss();
  mem.copy(y, outs.at(0).data(), call.boundaryBytes);
  // An instance that keeps its input alone drops the forward's extras.
  for (size_t r = 1; r < (call.full ? 1 : outs.size()); ++r) {
    mem.copy(ckpt + call.extraOffsets.at(r - 1), outs[r].data(),
             outs[r].bytes());
    if (call.extraLse.at(r - 1) >= 0) {
      if (!outs[r].lse)
        raise("a kept attention output has no log-sum-exp");
      const std::vector<int64_t> &sh = call.extraShapes.at(r - 1);
      mem.copy(ckpt + call.extraLse[r - 1], outs[r].lse.get(),
               4 * sh[0] * sh[1] * sh[2]);
    }
  }
  measuredWorkspacePeak = std::max(measuredWorkspacePeak, workspace.peak());
}

void StreamExecutor::backwardOne(const InstanceCall &call, char *ckpt,
                                 float *dy, float *dx) {
  std::vector<Tensor> args{
      Tensor::view(call.shape, reinterpret_cast<float *>(ckpt), actType),
      Tensor::view(call.shape, dy, actType)};
  for (size_t r = 0; r < call.extraShapes.size(); ++r) {
    args.push_back(
        Tensor::view(call.extraShapes[r],
                     reinterpret_cast<float *>(ckpt + call.extraOffsets[r]),
                     call.extraTypes[r]));
    if (call.extraLse[r] >= 0)
      args.back().lse = std::shared_ptr<float>(
          reinterpret_cast<float *>(ckpt + call.extraLse[r]), [](float *) {});
  }
  workspace.reset();
  Workspace::Scope scope(&workspace);
  std::vector<Tensor> outs = valueOrRaise(
      ex.runLayer(call.layer, call.instance,
                  call.full ? "backward_full" : "backward", std::move(args)));
  mem.copy(dx, outs.at(0).data(), call.boundaryBytes);
  measuredWorkspacePeak = std::max(measuredWorkspacePeak, workspace.peak());
}

void StreamExecutor::recomputeOne(const InstanceCall &call, float *x,
                                  float *y) {
  workspace.reset();
  Workspace::Scope scope(&workspace);
  ex.resetAux();
  std::vector<Tensor> outs =
      valueOrRaise(ex.runLayer(call.layer, call.instance, "forward",
                               {Tensor::view(call.shape, x, actType)}));
  ex.resetAux(); // the step's aux losses were counted by the forward pass
  mem.copy(y, outs.at(0).data(), call.boundaryBytes);
  measuredWorkspacePeak = std::max(measuredWorkspacePeak, workspace.peak());
}

void StreamExecutor::recomputeSegment(const InstanceCall &call, int64_t s0,
                                      int64_t top) {
  const int64_t M = p.microBatches, bb = call.boundaryBytes;
  const int64_t pos = checkpointIndex(call.layer, s0), ckpt = call.ckpt;
  const std::string tag = call.layer + "." + std::to_string(s0);
  // Slot 0: the segment's checkpoint (its first instance's input) of every
  // micro-batch. Compute runs in order, so the previous segment's backward
  // has read the buffer before it is overwritten.
  if (hostCheckpoints) {
    // Every offload queued before has landed (the latest record of either
    // staging slot's event covers them all).
    deviceCheck(device.wait(compute, evStagingFree[0]));
    deviceCheck(device.wait(compute, evStagingFree[1]));
    for (int64_t mb = 0; mb < M; ++mb)
      deviceCheck(device.copyToDevice(compute, segmentSlot(0, mb),
                                      hostCkpt.get() + pos + mb * ckpt, bb,
                                      device::Convert::None, "restore " + tag));
  } else {
    launchCompute(
        [this, M, pos, ckpt, bb] {
          for (int64_t mb = 0; mb < M; ++mb)
            mem.copy(dev(segmentSlot(0, mb), bb),
                     dev(checkpointsOff + pos + mb * ckpt, bb), bb);
        },
        "segment input " + tag);
  }
  // The segment's other instances: their weights stay in their slots until
  // their backward (the plan has a slot per instance of a segment).
  std::vector<std::pair<const Group *, int64_t>> bound;
  for (int64_t j = s0; j < top; ++j) {
    const size_t s = static_cast<size_t>(j % p.prefetchDepth);
    loadWeights(call.layer, j);
    deviceCheck(device.wait(compute, evWeights[s]));
    bound.emplace_back(&group(call.layer, j), weightsOff[s]);
  }
  if (bound.empty())
    return;
  launchCompute(
      [this, bound, call, s0, M, bb] {
        for (size_t q = 0; q < bound.size(); ++q) {
          boundWeights = bound[q].first;
          boundWeightsOff = bound[q].second;
          boundGradsOff = -1;
          InstanceCall c = call;
          c.instance = s0 + static_cast<int64_t>(q);
          const int64_t from = static_cast<int64_t>(q);
          for (int64_t mb = 0; mb < M; ++mb)
            recomputeOne(c, dev(segmentSlot(from, mb), bb),
                         dev(segmentSlot(from + 1, mb), bb));
        }
        boundWeights = nullptr;
      },
      "recompute " + tag + ".." + std::to_string(top - 1));
}

void StreamExecutor::computeHostActivations(
    const LoopInfo &loop, std::vector<std::vector<Tensor>> &vals,
    std::vector<exec::AuxLoss> &aux, const InstanceCall &call, int64_t k,
    size_t weightSlot, Group *g, int64_t wOff, int64_t pos, int64_t segSlot,
    bool saveHost, bool restoreHost) {
  const int64_t M = p.microBatches, bb = call.boundaryBytes, ckpt = call.ckpt;
  const bool first = k == 0, last = k + 1 == loop.count;
  const bool forward = loop.forward;
  const bundle::Op *op = loop.op;
  const int64_t gs = k % 2, gOff = gradsOff[gs];
  const std::string tag = call.layer + "." + std::to_string(call.instance);
  if (!forward)
    deviceCheck(device.wait(compute, evGradFree[gs]));
  for (int64_t mb = 0; mb < M; ++mb) {
    // Slots alternate over the loop's (instance, micro-batch) sequence.
    const int64_t j = (k * M + mb) % 2;
    const std::string what = tag + " mb " + std::to_string(mb);
    const int64_t inOff = actSlotOff(false, j), outOff = actSlotOff(true, j);
    const int64_t staging = stagingOff + j * maxCkptBytes;
    char *hostX = hostAct.get() + mb * activationBytes;
    if (!first || hostStage) {
      // The previous instance's output of this micro-batch (first, with a
      // host stage: the loop's input there), once it is in host memory and
      // the slot's last reader is done.
      deviceCheck(device.wait(actIn, evActInFree[j]));
      deviceCheck(device.wait(actIn, evHostAct[static_cast<size_t>(mb)]));
      if (first)
        deviceCheck(device.wait(actIn, evStageHost));
      const char *src = first ? hostStageValue(mb, op->operands.at(0)) : hostX;
      deviceCheck(device.copyToDevice(actIn, inOff, src, bb,
                                      device::Convert::None,
                                      "activation in " + what));
      deviceCheck(device.record(evActIn[j], actIn));
      deviceCheck(device.wait(compute, evActIn[j]));
    }
    if (restoreHost) {
      // As in the device-activation path: the staging slot's reader is done
      // and every offload queued before has landed.
      deviceCheck(device.wait(actIn, evStagingRead[j]));
      deviceCheck(device.wait(actIn, evStagingFree[0]));
      deviceCheck(device.wait(actIn, evStagingFree[1]));
      deviceCheck(
          device.copyToDevice(actIn, staging, hostCkpt.get() + pos + mb * ckpt,
                              ckpt, device::Convert::None, "restore " + what));
      deviceCheck(device.record(evRestored[j], actIn));
      deviceCheck(device.wait(compute, evRestored[j]));
    }
    deviceCheck(device.wait(compute, evActOutFree[j]));
    if (saveHost)
      deviceCheck(device.wait(compute, evStagingFree[j]));
    const bool stageIn = first && !hostStage, stageOut = last && !hostStage;
    launchCompute(
        [this, &vals, &aux, op, call, g, wOff, gOff, mb, stageIn, stageOut,
         forward, inOff, outOff, staging, saveHost, restoreHost, pos, segSlot,
         bb, ckpt] {
          boundWeights = g;
          boundWeightsOff = wOff;
          boundGradsOff = forward ? -1 : gOff;
          float *x = nullptr;
          if (stageIn) {
            Tensor &in = vals[mb][op->operands.at(0)];
            if (!in.f || in.bytes() != bb)
              raise("layers loop input has the wrong shape");
            x = in.data();
          } else {
            x = dev(inOff, bb);
          }
          float *y = dev(outOff, bb);
          // No checkpoint: an instance inside a segment (its forward keeps
          // none; its backward reads its input from the segment buffer).
          char *c = nullptr;
          if (segSlot >= 0)
            c = reinterpret_cast<char *>(dev(segmentSlot(segSlot, mb), bb));
          else if (pos >= 0)
            c = reinterpret_cast<char *>(
                (forward ? saveHost : restoreHost)
                    ? dev(staging, ckpt)
                    : dev(checkpointsOff + pos + mb * ckpt, ckpt));
          if (forward) {
            forwardOne(call, x, c, y, aux[mb]);
          } else {
            if (mb == 0)
              mem.zero(dev(gOff, g->gradBytes), g->gradBytes);
            backwardOne(call, c, x, y);
          }
          if (stageOut) {
            Workspace::Scope scope(&stageWs[mb]);
            Tensor t = Tensor::empty(call.shape, actType);
            mem.copy(t.data(), y, bb);
            vals[mb][op->results.at(0)] = std::move(t);
          }
          boundWeights = nullptr;
          boundGradsOff = -1;
        },
        (forward ? "forward " : "backward ") + what);
    deviceCheck(device.record(evActInFree[j], compute));
    deviceCheck(device.record(evActOut[j], compute));
    if (saveHost) {
      deviceCheck(device.record(evStaged[j], compute));
      deviceCheck(device.wait(actOut, evStaged[j]));
      deviceCheck(device.copyToHost(actOut, hostCkpt.get() + pos + mb * ckpt,
                                    staging, ckpt, "offload " + what));
      deviceCheck(device.record(evStagingFree[j], actOut));
    }
    if (restoreHost)
      deviceCheck(device.record(evStagingRead[j], compute));
    if (!last || hostStage) {
      // The output into host memory (last, with a host stage: the loop's
      // result there).
      deviceCheck(device.wait(actOut, evActOut[j]));
      char *dst = last ? hostStageValue(mb, op->results.at(0)) : hostX;
      deviceCheck(
          device.copyToHost(actOut, dst, outOff, bb, "activation out " + what));
      deviceCheck(device.record(evActOutFree[j], actOut));
      deviceCheck(device.record(evHostAct[static_cast<size_t>(mb)], actOut));
    }
  }
  deviceCheck(device.record(evSlotFree[weightSlot], compute));
  if (!forward)
    deviceCheck(device.record(evGradReady[gs], compute));
}

} // namespace mtc::stream
