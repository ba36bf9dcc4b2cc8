//===- PlanCheck.cpp - The step plan checked and laid out -------*- C++ -*-===//
//
// Part of mtc. StreamExecutor::validate and its parts: before anything runs,
// the plan's options against each other and the device, the parameter
// groups and their layout in a weight slot, the checkpoint layout of every
// layer instance, and every buffer the runtime writes against the bytes it
// will put there (docs/streaming.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/stream/StreamExecutor.h"
#include "runtime/stream/StreamSupport.h"

#include "lib/Bundle/Plan.h"

#include <algorithm>

namespace mtc::stream {

using detail::deviceValue;
using detail::numel;
using detail::planError;
using exec::ParamSlot;
using exec::Workspace;

namespace {

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

} // namespace

std::vector<int64_t>
StreamExecutor::concrete(const bundle::ValueType &t) const {
  std::vector<int64_t> out;
  for (Dim d : t.shape)
    out.push_back(d == kDimB ? p.batch : d == kDimS ? p.seq : d);
  return out;
}

void StreamExecutor::validate() {
  checkPlanOptions();
  groupParameters();
  const int64_t ckptTotal = layOutCheckpoints();
  placeBuffers(ckptTotal);
  placeStage();
  placeWorkspace();
}

void StreamExecutor::checkPlanOptions() {
  if (p.batch <= 0 || p.seq <= 0 || p.microBatches <= 0 || p.prefetchDepth <= 0)
    planError("batch, seq, micro_batches and prefetch_depth must be positive");
  if (p.devicePeak > device.capacity())
    planError("needs " + std::to_string(p.devicePeak) +
              " bytes of device memory; the device has " +
              std::to_string(device.capacity()));
  // A bf16 plan stores weights and activations as bf16 on the device
  // (lib/Bundle/Plan.h, Precision): the executor must store its values as
  // the plan does (a device backend, or exec::cpuDeviceBackend()).
  precision = bundle::planPrecision(b);
  if (precision != bundle::Precision::F32 && !mem.planStorage())
    planError(std::string("precision ") + p.precision +
              ": the executor's backend runs every plan in fp32 (the CPU "
              "device's executor runs on exec::cpuDeviceBackend())");
  paramType = bundle::deviceParamDType(precision);
  if (!bundle::parseRecompute(p.recompute, recompute))
    planError("recompute must be 'full', 'none' or 'selective'");
  segmentLength = p.checkpointEvery;
  if (segmentLength < 1)
    planError("checkpoint_every must be >= 1");
  if (segmentLength > 1 && recompute != bundle::Recompute::Full)
    planError("checkpoint_every " + std::to_string(segmentLength) +
              " needs recompute 'full'");
  if (p.selectiveLayers >= 0 && recompute != bundle::Recompute::Selective)
    planError("selective_layers " + std::to_string(p.selectiveLayers) +
              " needs recompute 'selective'");
  if (segmentLength > p.prefetchDepth)
    planError("checkpoint_every " + std::to_string(segmentLength) +
              " needs as many weight slots; the plan has " +
              std::to_string(p.prefetchDepth));
  // The bundle reader accepts "device" and "host" alone.
  bundle::CheckpointSpace space = bundle::CheckpointSpace::Device;
  hostCheckpoints = bundle::parseCheckpointSpace(p.checkpoints, space) &&
                    space == bundle::CheckpointSpace::Host;
  // The plan decides (analysis::planMemory: host checkpoints and M > 1):
  // host activations are there when their host buffer is.
  hostActivations = p.buffer("activations.host") != nullptr;
  if (hostActivations && !hostCheckpoints)
    planError("buffer 'activations.host' needs checkpoints in host memory");
  hostStage = p.buffer("stage.host") != nullptr;
  if (hostStage && !hostActivations)
    planError("buffer 'stage.host' needs host activations");
}

void StreamExecutor::groupParameters() {
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
}

int64_t StreamExecutor::layOutCheckpoints() {
  // The program: commands, loops and what they carry.
  const int64_t M = p.microBatches;
  int64_t ckptTotal = 0, stackIndex = 0;
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
    if (!forward)
      continue;
    int64_t bytes = 0;
    for (size_t r = 0; r < f.results.size(); ++r) {
      std::vector<int64_t> shape = concrete(f.values.at(f.results[r]));
      bytes += bundle::tensorBytes(numel(shape), types[r]);
      if (r > 0 && lse[r])
        bytes += bundle::tensorBytes(shape[0] * shape[1] * shape[2]);
    }
    if (recompute == bundle::Recompute::Full && f.results.size() != 1)
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
    }
  }
  return ckptTotal;
}

void StreamExecutor::placeBuffers(int64_t ckptTotal) {
  const int64_t M = p.microBatches;
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
}

void StreamExecutor::placeStage() {
  const int64_t M = p.microBatches;
  const bundle::PlanBuffer *stage = p.buffer("stage");
  if (!hostStage) {
    stageOff = bufferOffset("stage", 0);
    stageBytes = stage->bytes / M / 64 * 64;
    for (int64_t mb = 0; mb < M; ++mb)
      stageWs.emplace_back(dev(stageOff + mb * stageBytes, stageBytes),
                           stageBytes, "stage", &mem);
    return;
  }
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
  hostStageMem.reset(
      new char[static_cast<size_t>(std::max<int64_t>(M * hostStageBytes, 1))]);
}

void StreamExecutor::placeWorkspace() {
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
}

} // namespace mtc::stream
