//===- HostStage.cpp - The host side of a step ------------------*- C++ -*-===//
//
// Part of mtc. The parts of StreamExecutor that keep a step's values in host
// memory (docs/streaming.md, "Host activations"): the host stage, whose
// model-level values wait in host memory while one micro-batch at a time
// runs in the device's stage slot, and the layer instances whose boundary
// activations and checkpoints pass through host memory.
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
