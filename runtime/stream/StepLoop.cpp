//===- StepLoop.cpp - The step: its commands and layer loops ----*- C++ -*-===//
//
// Part of mtc. StreamExecutor::step and what it queues: the step's inputs,
// the model weights, the stage commands (on the device), the layers loops
// with their weight prefetch, checkpoints and gradient return, and one layer
// instance's forward, backward and recomputation. The host side of a step
// (host stage, host activations) is HostStage.cpp's.
//
//===----------------------------------------------------------------------===//

#include "runtime/stream/StreamExecutor.h"
#include "runtime/stream/StreamSupport.h"

#include "lib/Bundle/Plan.h"

#include <algorithm>

namespace mtc::stream {

using detail::deviceCheck;
using exec::raise;
using exec::raiseIfError;
using exec::Tensor;
using exec::valueOrRaise;
using exec::Workspace;

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
  queueInputs(vals, tokens, targets);

  // Queued commands refer to this frame: if queueing fails, wait for what
  // was queued before unwinding.
  try {
    for (const StepCommand &c : program) {
      switch (c.kind) {
      case StepCommandKind::LoadModelWeights:
        loadModelWeights();
        break;
      case StepCommandKind::Stage:
        if (hostStage)
          runHostStage(c, vals, tokens, targets, loss, haveLoss, lossCopied);
        else
          runStage(c, vals, loss, haveLoss, lossCopied);
        break;
      case StepCommandKind::Layers:
        runLoop(loopInfo(c), vals, aux);
        break;
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
  stats.devicePeakBytes = measuredPeak();

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

void StreamExecutor::queueInputs(std::vector<std::vector<Tensor>> &vals,
                                 const std::vector<const int32_t *> &tokens,
                                 const std::vector<const int32_t *> &targets) {
  // The closure may run after this frame: it holds the step's objects by
  // pointer.
  const int64_t M = p.microBatches;
  auto *valsP = &vals;
  const std::vector<const int32_t *> *tokensP = &tokens, *targetsP = &targets;
  launchCompute(
      [this, M, valsP, tokensP, targetsP] {
        std::vector<std::vector<Tensor>> &vals = *valsP;
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
          vals[mb][fb->args.at(0)] =
              Tensor::ints({p.batch, p.seq}, (*tokensP)[mb]);
          vals[mb][fb->args.at(1)] =
              Tensor::ints({p.batch, p.seq}, (*targetsP)[mb]);
        }
      },
      "step inputs");
}

void StreamExecutor::loadModelWeights() {
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
}

void StreamExecutor::runStage(const StepCommand &c,
                              std::vector<std::vector<Tensor>> &vals,
                              std::vector<double> &loss,
                              std::vector<char> &haveLoss,
                              std::vector<float> &lossCopied) {
  const int64_t M = p.microBatches;
  const size_t begin = c.begin, end = c.end;
  // The closure may run after this frame (the CPU backend's compute
  // thread): it holds the step's objects by pointer. A device backend runs
  // it now, which fills `found` with each loss's device address.
  auto *valsP = &vals;
  auto *lossP = &loss;
  auto *haveP = &haveLoss;
  std::vector<const float *> found(static_cast<size_t>(M), nullptr);
  auto *foundP = &found;
  launchCompute(
      [this, M, valsP, lossP, haveP, foundP, begin, end] {
        for (int64_t mb = 0; mb < M; ++mb) {
          Workspace::Scope scope(&stageWs[mb]);
          raiseIfError(ex.runOps(*fb, (*valsP)[mb], begin, end));
          const Tensor &r = (*valsP)[mb][fb->results.at(0)];
          if (!(*haveP)[mb] && r.f) {
            if (mem.hostMemory()) {
              ex.resetAux();
              (*lossP)[mb] = valueOrRaise(ex.lossOf(r));
            } else {
              (*foundP)[mb] = r.data();
            }
            (*haveP)[mb] = true;
          }
        }
      },
      "stage ops [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
  for (int64_t mb = 0; mb < M; ++mb)
    if (found[mb])
      deviceCheck(device.copyToHost(compute, &lossCopied[mb],
                                    offsetOf(found[mb]), sizeof(float),
                                    "loss"));
}

StreamExecutor::LoopInfo StreamExecutor::loopInfo(const StepCommand &c) const {
  LoopInfo loop;
  loop.cmd = &c;
  loop.op = c.op;
  loop.forward = c.forward;
  loop.first = c.first;
  loop.count = c.count;
  loop.boundaryShape = concrete(fb->values.at(loop.op->operands.at(0)));
  loop.boundaryNumel = detail::numel(loop.boundaryShape);
  return loop;
}

int64_t StreamExecutor::measuredPeak() const {
  // The end of the highest region in use, with the bump regions counted as
  // far as they were used.
  const int64_t M = p.microBatches;
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
  return std::max(peak, workspaceOff + measuredWorkspacePeak);
}

void StreamExecutor::runLoop(const LoopInfo &loop,
                             std::vector<std::vector<Tensor>> &vals,
                             std::vector<exec::AuxLoss> &aux) {
  const int64_t M = p.microBatches;
  const int64_t boundaryBytes =
      bundle::elementBytes(actType) * loop.boundaryNumel;
  std::vector<int64_t> order;
  for (int64_t k = 0; k < loop.count; ++k)
    order.push_back(loop.forward ? loop.first + k
                                 : loop.first + loop.count - 1 - k);
  const bundle::Op *op = loop.op;

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

  const InstanceCall call = instanceCall(loop, boundaryBytes);
  for (int64_t k = 0; k < loop.count; ++k)
    runInstance(loop, call, order, k, vals, aux);

  // The loop's result, per micro-batch, into the stage's values (host
  // activations: the last instance wrote them).
  if (hostActivations)
    return;
  const int64_t last = loop.count % 2;
  std::vector<int64_t> shape = loop.boundaryShape;
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

StreamExecutor::InstanceCall
StreamExecutor::instanceCall(const LoopInfo &loop,
                             int64_t boundaryBytes) const {
  // Extra results a `--recompute none` or `selective` forward keeps, and
  // their layout after the input inside a checkpoint.
  const std::string &layer = loop.op->symbol;
  const bundle::Layer *l = b.layer(layer);
  InstanceCall call;
  call.layer = layer;
  call.shape = loop.boundaryShape;
  call.boundaryBytes = boundaryBytes;
  const bundle::Function &f = l->functions.at("forward");
  const std::vector<DType> &types = resultTypes.at(layer);
  int64_t off = bundle::tensorBytes(loop.boundaryNumel, actType);
  for (size_t r = 1; r < f.results.size(); ++r) {
    std::vector<int64_t> s = concrete(f.values.at(f.results[r]));
    call.extraShapes.push_back(s);
    call.extraTypes.push_back(types.at(r));
    call.extraOffsets.push_back(off);
    off += bundle::tensorBytes(detail::numel(s), types.at(r));
    if (attentionResults.at(layer).at(r)) {
      // [B, S, Hq] log-sum-exp after the output.
      call.extraLse.push_back(off);
      off += bundle::tensorBytes(s[0] * s[1] * s[2]);
    } else {
      call.extraLse.push_back(-1);
    }
  }
  call.ckpt = ckptBytes.count(layer) ? ckptBytes.at(layer) : 0;
  return call;
}

void StreamExecutor::runInstance(const LoopInfo &loop, const InstanceCall &call,
                                 const std::vector<int64_t> &order, int64_t k,
                                 std::vector<std::vector<Tensor>> &vals,
                                 std::vector<exec::AuxLoss> &aux) {
  const int64_t M = p.microBatches, depth = p.prefetchDepth;
  const std::string &layer = call.layer;
  // The instances a command `ahead` instances ahead covers at step k: at
  // the first, every one up to it.
  auto targets = [&](int64_t ahead) {
    std::vector<int64_t> t;
    if (k == 0) {
      for (int64_t a = 0; a <= ahead && a < loop.count; ++a)
        t.push_back(order[a]);
    } else if (k + ahead < loop.count) {
      t.push_back(order[k + ahead]);
    }
    return t;
  };

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
  bool saveHost = false, restoreHost = false, returnGrads = false;
  for (const StepCommand &c : loop.cmd->body) {
    switch (c.kind) {
    case StepCommandKind::OptimizerUpdate:
      for (int64_t j : targets(c.ahead)) {
        if (!pendingGroups.count({layer, j}))
          continue;
        size_t sj = static_cast<size_t>(j % depth);
        launchUpdate(group(layer, j), evUpdated[sj]);
        deviceCheck(device.wait(h2d, evUpdated[sj]));
      }
      break;
    case StepCommandKind::Prefetch:
      for (int64_t j : targets(c.ahead))
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
      const int64_t segSlot = segmentLength > 1 && !loop.forward ? i - s0 : -1;
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
      if (hostActivations)
        computeHostActivations(loop, vals, aux, inst, k, s, g, wOff, pos,
                               segSlot, saveHost, restoreHost);
      else
        computeDeviceActivations(loop, aux, inst, k, s, g, wOff, pos, segSlot,
                                 saveHost, restoreHost);
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

void StreamExecutor::computeDeviceActivations(const LoopInfo &loop,
                                              std::vector<exec::AuxLoss> &aux,
                                              const InstanceCall &inst,
                                              int64_t k, size_t weightSlot,
                                              Group *g, int64_t wOff,
                                              int64_t pos, int64_t segSlot,
                                              bool saveHost, bool restoreHost) {
  const int64_t M = p.microBatches, boundaryBytes = inst.boundaryBytes,
                ckpt = inst.ckpt;
  const int64_t st = k % 2, in = k % 2, out = (k + 1) % 2;
  const std::string tag = inst.layer + "." + std::to_string(inst.instance);
  const size_t s = weightSlot;
  if (loop.forward) {
    if (saveHost)
      deviceCheck(device.wait(compute, evStagingFree[st]));
    launchCompute(
        [this, &aux, M, g, wOff, pos, in, out, st, saveHost, call = inst,
         boundaryBytes, ckpt] {
          boundWeights = g;
          boundWeightsOff = wOff;
          boundGradsOff = -1;
          for (int64_t mb = 0; mb < M; ++mb) {
            int64_t dest = saveHost ? stagingOff + (st * M + mb) * maxCkptBytes
                                    : checkpointsOff + pos + mb * ckpt;
            forwardOne(call, dev(actOff(in, mb), boundaryBytes),
                       pos < 0 ? nullptr
                               : reinterpret_cast<char *>(dev(dest, ckpt)),
                       dev(actOff(out, mb), boundaryBytes), aux[mb]);
          }
          boundWeights = nullptr;
        },
        "forward " + tag);
    deviceCheck(device.record(evSlotFree[s], compute));
    if (saveHost) {
      deviceCheck(device.record(evStaged[st], compute));
      deviceCheck(device.wait(d2h, evStaged[st]));
      for (int64_t mb = 0; mb < M; ++mb)
        deviceCheck(device.copyToHost(d2h, hostCkpt.get() + pos + mb * ckpt,
                                      stagingOff + (st * M + mb) * maxCkptBytes,
                                      ckpt, "offload " + tag));
      deviceCheck(device.record(evStagingFree[st], d2h));
    }
    return;
  }
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
      "backward " + tag);
  deviceCheck(device.record(evSlotFree[s], compute));
  deviceCheck(device.record(evGradReady[gs], compute));
  if (restoreHost)
    deviceCheck(device.record(evStagingRead[st], compute));
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

} // namespace mtc::stream
