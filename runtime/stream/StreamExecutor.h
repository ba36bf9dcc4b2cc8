//===- StreamExecutor.h - Runs a bundle's step plan on a device -*- C++ -*-===//
//
// Part of mtc. Executes the "step" program of a bundle (docs/streaming.md):
// the model's forward_backward cut into model-level stages and loops over
// layer instances, with every layer instance's weights copied from host
// memory into a weight slot of the device arena ahead of use, activation
// checkpoints kept in device memory or offloaded to the host, gradients
// returned to the host on their own stream, and the exact AdamW update of
// each layer instance deferred to just before its weights are next loaded.
//
// Streams: `compute` (layer and stage work), `h2d` (weights, restored
// checkpoints), `d2h` (gradients, offloaded checkpoints) and `optimizer` (the
// deferred AdamW updates, host work ordered by events like any other
// command). The host thread only queues commands; step() waits for the end.
//
// Every buffer is the plan's: the runtime computes what it will put into each
// and refuses a plan whose buffers are too small before running anything, and
// layer temporaries are allocated from the plan's workspace region (an
// overrun is an error, not an overflow).
//
// The members are spread over files by concern: StreamExecutor.cpp
// (construction, device memory, weight loads, optimizer updates),
// PlanCheck.cpp (the plan checked and laid out before anything runs),
// StepLoop.cpp (the step, its commands and layer loops) and HostStage.cpp
// (the host stage and host activations).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_STREAM_STREAMEXECUTOR_H
#define MTC_RUNTIME_STREAM_STREAMEXECUTOR_H

#include "lib/Bundle/Bundle.h"
#include "lib/Bundle/Plan.h"
#include "runtime/device/Device.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/ParamStore.h"
#include "runtime/stream/StepProgram.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace mtc::stream {

/// What one step moved and used.
struct StepStats {
  int64_t weightLoads = 0;      ///< layer-instance weight loads (h2d)
  int64_t modelWeightLoads = 0; ///< loads of the model-level parameters
  int64_t residentReuses = 0;   ///< loads skipped: instance still resident
  int64_t h2dBytes = 0, d2hBytes = 0;
  int64_t devicePeakBytes = 0;   ///< highest arena byte in use (measured)
  int64_t deviceBudgetBytes = 0; ///< the arena's capacity
  double overlap = 0;            ///< fraction of copy time hidden under compute
  double optimizerSeconds = 0;   ///< deferred AdamW work run during the step
};

class StreamExecutor {
public:
  /// \p ex runs the layer and stage functions (its parameter locator is
  /// pointed at device memory); \p dev must have at least the plan's
  /// device_peak bytes. An error when the plan does not fit the bundle, the
  /// device or itself, or when the device cannot create its streams.
  static Expected<std::unique_ptr<StreamExecutor>>
  create(const bundle::Bundle &b, exec::ParamStore &store, exec::Executor &ex,
         device::Device &dev);
  ~StreamExecutor();

  const bundle::StepPlan &plan() const { return p; }
  /// Bytes of host memory the runtime allocates beyond the ParamStore
  /// (offloaded checkpoints, host activations, the host stage).
  int64_t hostBytes() const;

  /// One optimizer step's forward and backward over plan().microBatches
  /// micro-batches, each [batch, seq] tokens and targets. Gradients (of the
  /// sum over micro-batches) land in the store's grad buffers (rounded to
  /// bf16 by the copy when the store keeps bf16 gradients); returns each
  /// micro-batch's loss (aux losses included). Errors: an op's (naming its
  /// source location), the device's (a failed command fails its stream and
  /// the device; the step's synchronisation returns the first error), or a
  /// deferred update's.
  Expected<std::vector<double>>
  step(const std::vector<const int32_t *> &tokens,
       const std::vector<const int32_t *> &targets);

  /// An optimizer update over a group of parameters (a layer instance with
  /// its experts, or the model-level parameters). It runs as a launched
  /// closure: an exception it throws fails the device (Device::launch).
  using UpdateFn = std::function<void(const std::vector<exec::ParamSlot *> &)>;
  /// Defers \p fn for every parameter: each group's update runs on the
  /// optimizer stream just before the group's weights are next loaded (the
  /// plan's optimizer_update commands), or at flush(). Runs any update still
  /// pending first (the error of that flush()).
  Status deferUpdate(UpdateFn fn);
  /// Runs every pending update now (before reading weights on the host:
  /// checkpoints, validation, generation, the end of training), after the
  /// device's work: the device's error if it has failed.
  Status flush();

  /// The immediate optimizer placement (docs/training.md, "Optimizer
  /// placement"): a group's update, given its parameters and their
  /// gradients (of the sum over micro-batches) in a slot of the plan's
  /// `grads.host` ring.
  using ImmediateFn = std::function<void(const std::vector<exec::ParamSlot *> &,
                                         const std::vector<const float *> &)>;
  /// Whether the plan has the `grads.host` ring (compiled with
  /// optimizer-placement=immediate), and its slots.
  bool hasGradRing() const { return ringSlots > 0; }
  int64_t gradRingSlots() const { return ringSlots; }
  /// From the next step() on, each group's gradients are copied into the
  /// ring instead of the store, and \p fn runs on the optimizer stream as
  /// soon as they are there (overlapping the rest of the backward); step()
  /// returns when every update is done. Needs hasGradRing() and no pending
  /// deferred update (it flushes them: the error of that flush()).
  Status updateImmediately(ImmediateFn fn);
  /// Called on the d2h stream once a group's gradients (of the sum over
  /// micro-batches) are in the store's grad buffers, before the step ends
  /// (data-parallel training starts their sum over the ranks). Not called
  /// under the immediate placement, whose gradients pass through the ring.
  using GradsReadyFn =
      std::function<void(const std::vector<exec::ParamSlot *> &)>;
  void setGradsReadyHook(GradsReadyFn fn) { gradsReady = std::move(fn); }
  /// Data parallel with the gradients summed on the device (NCCL,
  /// dataparallel/DeviceReduce.h): called by the thread queueing the step's
  /// commands just before a group's gradients are copied to the host (into
  /// the store or the ring), with the d2h stream, each gradient's (arena
  /// offset, fp32 elements) and whether the group is the model-level one
  /// (returned last); it queues their sum over the ranks on the device,
  /// ordered before the copy. Its error fails the step.
  using DeviceReduceFn = std::function<Status(
      device::Stream, const std::vector<std::pair<int64_t, int64_t>> &, bool)>;
  void setDeviceReduceHook(DeviceReduceFn fn) { deviceReduce = std::move(fn); }
  /// The stream of the step's device compute.
  device::Stream computeStream() const { return compute; }
  bool hasPendingUpdates() const { return !pendingGroups.empty(); }

  const StepStats &lastStats() const { return stats; }

private:
  StreamExecutor(const bundle::Bundle &b, exec::ParamStore &store,
                 exec::Executor &ex, device::Device &dev);
  /// step()'s body: its failures unwind (exec::raise) to step().
  std::vector<double> stepOrRaise(const std::vector<const int32_t *> &tokens,
                                  const std::vector<const int32_t *> &targets);

  struct Group {
    std::string layer; ///< empty: model-level parameters
    int64_t instance = 0;
    std::vector<exec::ParamSlot *> slots;
    std::vector<int64_t> offsets; ///< of each slot inside the group's buffer
    int64_t bytes = 0;
    /// The same for the gradients (f32 under every precision; the values
    /// are bf16 under a bf16 plan).
    std::vector<int64_t> gradOffsets;
    int64_t gradBytes = 0;
  };
  struct LoopInfo {
    const StepCommand *cmd = nullptr;
    const bundle::Op *op = nullptr; ///< its apply_layers(_grad) op
    bool forward = true;
    int64_t first = 0, count = 0;
    int64_t boundaryNumel = 0;
    std::vector<int64_t> boundaryShape;
  };

  /// What one layer instance's call needs besides its data: the layer, the
  /// boundary shape and the layout of a checkpoint (the input, then each
  /// extra forward result and a kept attention output's log-sum-exp).
  struct InstanceCall {
    std::string layer;
    int64_t instance = 0;
    std::vector<int64_t> shape;
    std::vector<std::vector<int64_t>> extraShapes;
    std::vector<DType> extraTypes;
    std::vector<int64_t> extraOffsets, extraLse;
    int64_t boundaryBytes = 0, ckpt = 0;
    /// Mixed recomputation: the instance keeps its input alone (ckpt is the
    /// input's bytes, no extras) and its backward is "backward_full".
    bool full = false;
  };
  /// One micro-batch through one instance (weights already bound): the
  /// forward writes its input and saved values to \p ckpt and its output to
  /// \p y; the backward reads \p ckpt and \p dy and writes dx to \p dx.
  void forwardOne(const InstanceCall &call, float *x, char *ckpt, float *y,
                  exec::AuxLoss &aux);
  void backwardOne(const InstanceCall &call, char *ckpt, float *dy, float *dx);
  /// The forward of one micro-batch through one instance again, from \p x
  /// to \p y, keeping nothing and counting no aux loss (segment
  /// checkpointing).
  void recomputeOne(const InstanceCall &call, float *x, float *y);
  /// Segment checkpointing, at the backward of a segment's last instance
  /// \p top: the checkpoint of its first instance \p s0 into slot 0 of the
  /// `segment` buffer, the weights of s0 .. top - 1 into their slots (where
  /// they stay until their backward), and their forward over every
  /// micro-batch, instance s0 + q writing the input of the next into slot
  /// q + 1.
  void recomputeSegment(const InstanceCall &call, int64_t s0, int64_t top);
  /// The `segment` buffer's slot of instance s0 + \p q, micro-batch \p mb.
  int64_t segmentSlot(int64_t q, int64_t mb) const;
  /// How weights are converted on their way in (bf16 plans: to bf16).
  device::Convert weightConvert() const;

  /// The compute command of instance step \p k of \p loop with host
  /// activations: per micro-batch, its input from host memory (or, first,
  /// from the stage), its checkpoint to or from host memory through a
  /// staging slot, the call, its output to host memory (or, last, into the
  /// stage).
  void computeHostActivations(const LoopInfo &loop,
                              std::vector<std::vector<exec::Tensor>> &vals,
                              std::vector<exec::AuxLoss> &aux,
                              const InstanceCall &call, int64_t k,
                              size_t weightSlot, Group *g, int64_t wOff,
                              int64_t pos, int64_t segSlot, bool saveHost,
                              bool restoreHost);

  /// One stage command with a host stage: per micro-batch, the values it
  /// reads come from host memory into the stage slot, its ops run there, and
  /// the values later commands read go back to host memory.
  void runHostStage(const StepCommand &c,
                    std::vector<std::vector<exec::Tensor>> &vals,
                    const std::vector<const int32_t *> &tokens,
                    const std::vector<const int32_t *> &targets,
                    std::vector<double> &loss, std::vector<char> &haveLoss,
                    std::vector<float> &lossCopied);
  /// The host-stage address of value \p v of micro-batch \p mb.
  char *hostStageValue(int64_t mb, int v) const;
  /// The bytes of value \p v of forward_backward as stored on the device.
  int64_t stageValueBytes(int v) const;

  // PlanCheck.cpp: validate() runs the others in order; each raises a
  // "step plan: " error naming what does not fit.
  void validate();
  /// Sizes, precision, recomputation, segments and where checkpoints,
  /// activations and the stage live.
  void checkPlanOptions();
  /// Every parameter's group and its offset in a weight (gradient) slot.
  void groupParameters();
  /// Decodes the program; per layer its checkpoint layout and storage
  /// types, per kept instance its checkpoint position. Returns the bytes of
  /// every checkpoint.
  int64_t layOutCheckpoints();
  /// The weight, gradient, activation, checkpoint, segment and ring buffers
  /// against what the runtime will put there (\p ckptTotal: checkpoints).
  void placeBuffers(int64_t ckptTotal);
  /// The stage buffer: one workspace per micro-batch, or with a host stage
  /// one slot that every stage segment fits.
  void placeStage();
  /// The layer functions' value plans and the workspace they need.
  void placeWorkspace();
  /// \p t's shape with B and S of the plan.
  std::vector<int64_t> concrete(const bundle::ValueType &t) const;

  Group &group(const std::string &layer, int64_t instance);
  int64_t bufferOffset(const std::string &name, int64_t need) const;

  // StepLoop.cpp: what step() queues, command by command.
  /// Each micro-batch's token ids and targets as forward_backward's
  /// arguments (host stage: each stage command brings in its own).
  void queueInputs(std::vector<std::vector<exec::Tensor>> &vals,
                   const std::vector<const int32_t *> &tokens,
                   const std::vector<const int32_t *> &targets);
  /// The model-level weights (after their pending update) and their
  /// gradients zeroed.
  void loadModelWeights();
  /// A stage command on the device: its ops per micro-batch, and the loss
  /// where it is computed.
  void runStage(const StepCommand &c,
                std::vector<std::vector<exec::Tensor>> &vals,
                std::vector<double> &loss, std::vector<char> &haveLoss,
                std::vector<float> &lossCopied);
  LoopInfo loopInfo(const StepCommand &c) const;
  /// The highest arena byte the step used (bump regions as far as used).
  int64_t measuredPeak() const;
  void runLoop(const LoopInfo &loop,
               std::vector<std::vector<exec::Tensor>> &vals,
               std::vector<exec::AuxLoss> &aux);
  /// What every instance of \p loop's layer passes to its calls.
  InstanceCall instanceCall(const LoopInfo &loop, int64_t boundaryBytes) const;
  /// Instance step \p k of \p loop (instance order[k]): its body's
  /// commands, in order, and its gradient return.
  void runInstance(const LoopInfo &loop, const InstanceCall &call,
                   const std::vector<int64_t> &order, int64_t k,
                   std::vector<std::vector<exec::Tensor>> &vals,
                   std::vector<exec::AuxLoss> &aux);
  /// The compute command of instance step \p k with the boundary
  /// activations of every micro-batch in device memory: all micro-batches
  /// in one launch, checkpoints saved to (restored from) the device or a
  /// staging slot offloaded to the host.
  void computeDeviceActivations(const LoopInfo &loop,
                                std::vector<exec::AuxLoss> &aux,
                                const InstanceCall &inst, int64_t k,
                                size_t weightSlot, Group *g, int64_t wOff,
                                int64_t pos, int64_t segSlot, bool saveHost,
                                bool restoreHost);
  void loadWeights(const std::string &layer, int64_t instance);
  void launchUpdate(Group &g, device::Event done);
  /// Gradient return of \p g from device offset \p devOff: into the store's
  /// grad buffers, or with the immediate placement into the next ring slot
  /// followed by the group's update on the optimizer stream.
  void copyGradsToHost(Group &g, int64_t devOff);
  int64_t checkpointBytes(const std::string &layer) const;
  int64_t checkpointIndex(const std::string &layer, int64_t instance) const;
  float *dev(int64_t offset, int64_t bytes);
  /// Host work on stream \p s (a launched closure).
  void launchWork(device::Stream s, std::function<void()> fn,
                  const std::string &label);
  /// Device compute on the compute stream: a closure on the CPU backend,
  /// kernels queued now by this thread on a device backend (Backend::issue).
  void launchCompute(std::function<void()> fn, const std::string &label);
  /// The arena offset of device address \p p.
  int64_t offsetOf(const void *p);
  /// Activation buffer of micro-batch \p mb, side 0 or 1 (ping-pong).
  int64_t actOff(int64_t side, int64_t mb) const;
  /// Host activations: the device slots a micro-batch's input (\p out
  /// false) or output uses, slot \p j of 2.
  int64_t actSlotOff(bool out, int64_t j) const;

  const bundle::Bundle &b;
  const bundle::StepPlan &p;
  exec::ParamStore &store;
  exec::Executor &ex;
  /// The executor's backend: its memory operations fill and move the
  /// arena's values.
  exec::Backend &mem;
  device::Device &device;
  const bundle::Function *fb = nullptr;
  /// The plan's program, decoded at construction (StepProgram.h).
  std::vector<StepCommand> program;
  /// Per layer: which results of its forward are attention outputs (a kept
  /// one carries its log-sum-exp in the checkpoint).
  std::map<std::string, std::vector<bool>> attentionResults;

  device::Stream compute = 0, h2d = 0, d2h = 0, opt = 0;
  std::vector<device::Event> evWeights, evSlotFree, evUpdated;
  device::Event evGradReady[2] = {0, 0}, evGradFree[2] = {0, 0};
  device::Event evStaged[2] = {0, 0}, evStagingFree[2] = {0, 0};
  device::Event evRestored[2] = {0, 0}, evStagingRead[2] = {0, 0};
  device::Event evModelUpdated = 0, evModelWeights = 0, evModelGrads = 0;
  /// Host activations (host checkpoints with several micro-batches): the
  /// activation and checkpoint copies of each micro-batch run on their own
  /// streams, so that they never queue behind a weight prefetch.
  device::Stream actIn = 0, actOut = 0;
  device::Event evActIn[2] = {0, 0}, evActInFree[2] = {0, 0};
  device::Event evActOut[2] = {0, 0}, evActOutFree[2] = {0, 0};
  std::vector<device::Event> evHostAct; ///< per micro-batch: output in host

  std::map<std::pair<std::string, int64_t>, Group> groups;
  Group modelGroup;
  /// Each parameter's group and its index there.
  std::map<const exec::ParamSlot *, std::pair<Group *, size_t>> where;
  /// The plan's precision (lib/Bundle/Plan.h), and how parameter values
  /// and boundary activations are stored on the device under it.
  bundle::Precision precision = bundle::Precision::F32;
  /// The plan's recomputation, decoded once (checkPlanOptions).
  bundle::Recompute recompute = bundle::Recompute::Full;
  DType paramType = DType::F32, actType = DType::F32;
  /// Per layer: the storage of its forward's results (checkpoint layout).
  std::map<std::string, std::vector<DType>> resultTypes;
  /// What each weight slot holds: (layer, instance, step) or empty.
  struct SlotContent {
    std::string layer;
    int64_t instance = -1, step = -1;
  };
  std::vector<SlotContent> slotHolds;
  int64_t stepCounter = 0;

  /// Buffers (offsets into the arena) and sizes.
  int64_t modelWeightsOff = 0, modelGradsOff = 0;
  std::vector<int64_t> weightsOff;
  int64_t gradsOff[2] = {0, 0}, slotBytes = 0, gradSlotBytes = 0;
  int64_t activationsOff = 0, activationBytes = 0; ///< per micro-batch
  int64_t checkpointsOff = 0, stagingOff = 0;
  int64_t stageOff = 0, stageBytes = 0; ///< per micro-batch
  int64_t workspaceOff = 0, workspaceBytes = 0;
  bool hostCheckpoints = false;
  std::unique_ptr<char[]> hostCkpt;
  int64_t hostCkptBytes = 0;
  /// Boundary activations of every micro-batch wait in host memory between
  /// layer instances; the device holds two input and two output slots, and
  /// two checkpoint staging slots (docs/streaming.md, "Host activations").
  bool hostActivations = false;
  std::unique_ptr<char[]> hostAct;
  int64_t hostActBytes = 0;
  /// Host stage (the plan's `stage.host`, docs/streaming.md): the
  /// model-level values of every micro-batch that a later command reads wait
  /// in host memory; the device's `stage` buffer is one slot, in which one
  /// micro-batch's stage runs at a time.
  bool hostStage = false;
  bundle::StagePlan stagePlan;
  std::vector<DType> fbStorage; ///< forward_backward's value storage
  std::unique_ptr<char[]> hostStageMem;
  int64_t hostStageBytes = 0;    ///< per micro-batch
  int64_t stageSlotPeak = 0;     ///< measured: the slot's highest byte in use
  device::Event evStageHost = 0; ///< the stage's values are in host memory
  /// Checkpoint position of each (layer, instance), in forward order.
  std::map<std::pair<std::string, int64_t>, int64_t> ckptIndex;
  std::map<std::string, int64_t> ckptBytes;
  /// Mixed recomputation (the plan's selective_layers): the instances past
  /// the first S of the stack, which keep their input alone.
  std::set<std::pair<std::string, int64_t>> fullInstances;
  /// Segment checkpointing (the plan's checkpoint_every; 1: off): the
  /// instances of a loop fall into segments of this many, only the first of
  /// each keeps a checkpoint (pos < 0 for the others), and the `segment`
  /// buffer holds the inputs of one segment's instances, every
  /// micro-batch's.
  int64_t segmentLength = 1, segmentOff = 0;
  int64_t maxCkptBytes = 0;

  exec::Workspace workspace;
  std::vector<exec::Workspace> stageWs;
  /// The layer instance whose weights (and gradients) compute is bound to.
  const Group *boundWeights = nullptr;
  int64_t boundWeightsOff = 0, boundGradsOff = -1;

  UpdateFn pendingFn;
  /// The `grads.host` ring: slots of ringSlotBytes (the largest group's
  /// gradients), filled on d2h in turn and freed by the group's update.
  int64_t ringSlots = 0, ringSlotBytes = 0, ringNext = 0;
  std::unique_ptr<char[]> ring;
  std::vector<device::Event> evRingFull, evRingFree;
  ImmediateFn immediateFn;
  GradsReadyFn gradsReady;
  DeviceReduceFn deviceReduce;
  std::set<std::pair<std::string, int64_t>> pendingGroups;
  bool modelPending = false;

  StepStats stats;
  int64_t measuredWorkspacePeak = 0;
};

} // namespace mtc::stream

#endif // MTC_RUNTIME_STREAM_STREAMEXECUTOR_H
