//===- PlanMemory.cpp - mtc-plan-memory -------------------------*- C++ -*-===//
//
// Part of mtc. The step's buffers with their sizes and arena offsets,
// checked against the device budget (docs/streaming.md).
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/StepUtils.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/ErrorHandling.h"

namespace mtc {
#define GEN_PASS_DEF_MTCPLANMEMORY
#include "compiler/Transforms/Passes.h.inc"
} // namespace mtc

using namespace mlir;
using namespace mtc;

namespace {

struct PlanMemory : mtc::impl::MtcPlanMemoryBase<PlanMemory> {
  using MtcPlanMemoryBase::MtcPlanMemoryBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    stream::StepOp step = steputil::findStep(module, "mtc-plan-memory");
    int64_t budgetBytes = 0;
    if (!step || failed(steputil::parseBudget(module, budget, budgetBytes)))
      return signalPassFailure();
    if (budget.empty())
      budgetBytes = step.getDeviceBudget();
    analysis::ModelCost cost;
    if (failed(steputil::analyzeStep(step, cost)))
      return signalPassFailure();
    analysis::PlanChoices choices = steputil::choicesOf(step);
    if (optimizerPlacement != "deferred" && optimizerPlacement != "immediate") {
      step.emitOpError() << "optimizer-placement must be deferred or "
                            "immediate, got '"
                         << optimizerPlacement << "'";
      return signalPassFailure();
    }
    choices.immediateOptimizer = optimizerPlacement == "immediate";
    if (!bundle::parseGradDType(gradDType, grads)) {
      step.emitOpError() << "grad-dtype must be fp32 or bf16, got '"
                         << gradDType << "'";
      return signalPassFailure();
    }
    analysis::MemoryPlan plan = analysis::planMemory(cost, choices);
    if (llvm::Error e =
            analysis::checkPlanSizes(plan, steputil::dimsOf(step), choices)) {
      step.emitError() << llvm::toString(std::move(e));
      return signalPassFailure();
    }

    // Replace the buffers.
    Block &body = step.getBody().front();
    for (auto old : llvm::make_early_inc_range(body.getOps<stream::BufferOp>()))
      old.erase();
    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&body);
    for (const bundle::PlanBuffer &buf : plan.buffers) {
      // The memory model speaks the bundle's strings, which are the
      // dialect's keywords.
      std::optional<stream::BufferKind> kind =
          stream::symbolizeBufferKind(buf.kind);
      std::optional<stream::MemorySpace> space =
          stream::symbolizeMemorySpace(buf.space);
      if (!kind || !space)
        llvm::report_fatal_error(
            "mtc-plan-memory: the memory model's buffer '" +
            llvm::Twine(buf.name) + "' has no stream dialect kind or space");
      stream::BufferOp::create(b, step.getLoc(), buf.name, *kind, *space,
                               buf.bytes,
                               *space == stream::MemorySpace::Device
                                   ? b.getI64IntegerAttr(buf.offset)
                                   : IntegerAttr());
    }
    step.setDevicePeak(plan.devicePeak);
    step.setDeviceBudget(budgetBytes);
    int64_t hostBudgetBytes = 0;
    if (failed(steputil::parseBudget(module, hostBudget, hostBudgetBytes)))
      return signalPassFailure();
    if (budgetBytes > 0 && plan.devicePeak > budgetBytes)
      return reportDevice(step, cost, choices, plan, budgetBytes);
    if (hostBudgetBytes > 0 && hostNeed(cost, plan) > hostBudgetBytes)
      return reportHost(step, cost, choices, plan, hostBudgetBytes,
                        budgetBytes);
  }

  /// The `grad-dtype` option, parsed.
  bundle::GradDType grads = bundle::GradDType::F32;

  /// Host memory of a plan: the training state plus its host buffers.
  int64_t hostNeed(const analysis::ModelCost &cost,
                   const analysis::MemoryPlan &plan) const {
    return stateBytesPerParam(plan) * cost.totalParams() + plan.hostBytes;
  }

  /// 12 B/param with the immediate placement's gradient ring, else 16 (14
  /// with bf16 gradients).
  int64_t stateBytesPerParam(const analysis::MemoryPlan &plan) const {
    return stateBytesPerParam(plan, grads);
  }
  static int64_t stateBytesPerParam(const analysis::MemoryPlan &plan,
                                    bundle::GradDType g) {
    bool ring = false;
    for (const bundle::PlanBuffer &b : plan.buffers)
      ring = ring || b.name == "grads.host";
    return bundle::stateBytesPerParam(ring, g);
  }

  /// The host-budget error: what is short, by how much, and the options
  /// that would fit.
  void reportHost(stream::StepOp step, const analysis::ModelCost &cost,
                  const analysis::PlanChoices &choices,
                  const analysis::MemoryPlan &plan, int64_t budget,
                  int64_t deviceBudget) {
    using analysis::formatByteSize;
    const int64_t state = stateBytesPerParam(plan) * cost.totalParams();
    const int64_t need = state + plan.hostBytes;
    std::string parts = "training state " + formatByteSize(state, true) + " (" +
                        std::to_string(stateBytesPerParam(plan)) + " B/param)";
    for (const bundle::PlanBuffer &b : plan.buffers)
      if (b.space == "host")
        parts += ", " + b.name + " " + formatByteSize(b.bytes, true);
    std::vector<std::string> fits;
    const int64_t m = choices.microBatches;
    if (state < budget) {
      // Host buffers grow linearly with the micro-batches.
      int64_t perMicroBatch = plan.hostBytes / m;
      int64_t k = perMicroBatch > 0 ? (budget - state) / perMicroBatch : m;
      if (k >= 1 && k < m)
        fits.push_back("--micro-batches " + std::to_string(k) + " (" +
                       formatByteSize(state + k * perMicroBatch, true) + ")");
      // Full recomputation keeps only each instance's input.
      if (step.getRecompute() != stream::RecomputePolicy::Full) {
        // Mixed recomputation first: the most instances that keep their
        // selective checkpoints.
        int64_t total = 0;
        for (const auto &[name, count] : choices.forwardLoops)
          total += count;
        const int64_t from = choices.selectiveLayers < 0
                                 ? total - 1
                                 : choices.selectiveLayers - 1;
        if (step.getRecompute() == stream::RecomputePolicy::Selective)
          for (int64_t s = from; s >= 1; --s) {
            analysis::PlanChoices mixed = choices;
            mixed.selectiveLayers = s;
            int64_t need = state + analysis::planMemory(cost, mixed).hostBytes;
            if (need <= budget) {
              fits.push_back("--selective-layers " + std::to_string(s) +
                             " (the other " + std::to_string(total - s) +
                             " layer instances recompute fully; " +
                             formatByteSize(need, true) + ")");
              break;
            }
          }
        analysis::PlanChoices full = choices;
        full.selectiveLayers = 0;
        int64_t fullBytes = analysis::planMemory(cost, full).hostBytes;
        if (state + fullBytes <= budget)
          fits.push_back("--recompute full (" +
                         formatByteSize(state + fullBytes, true) + ")");
      }
      // Segment checkpointing: the smallest segment length that fits.
      if (step.getRecompute() == stream::RecomputePolicy::Full &&
          choices.checkpointEvery == 1) {
        int64_t longest = 0;
        for (const auto &[name, count] : choices.forwardLoops)
          longest = std::max(longest, count);
        for (int64_t k = 2; k <= longest; ++k) {
          analysis::PlanChoices segmented = choices;
          segmented.checkpointEvery = k;
          analysis::MemoryPlan sp = analysis::planMemory(cost, segmented);
          if (deviceBudget > 0 && sp.devicePeak > deviceBudget)
            break; // longer segments need more device memory
          if (hostNeed(cost, sp) <= budget) {
            fits.push_back("--checkpoint-every " + std::to_string(k) +
                           " (segment checkpointing: " +
                           formatByteSize(hostNeed(cost, sp), true) + ")");
            break;
          }
        }
      }
      analysis::PlanChoices device = choices;
      device.checkpointsOnHost = false;
      analysis::MemoryPlan onDevice = analysis::planMemory(cost, device);
      if (choices.checkpointsOnHost &&
          (deviceBudget == 0 || onDevice.devicePeak <= deviceBudget))
        fits.push_back("--checkpoints device (" +
                       formatByteSize(state + onDevice.hostBytes, true) +
                       " of host memory, " +
                       formatByteSize(onDevice.devicePeak, true) +
                       " of device memory)");
    }
    // bf16 gradients: 2 B/param less, the same buffers.
    if (!choices.immediateOptimizer && grads == bundle::GradDType::F32) {
      int64_t total = stateBytesPerParam(plan, bundle::GradDType::BF16) *
                          cost.totalParams() +
                      plan.hostBytes;
      if (total <= budget)
        fits.push_back("--grad-dtype bf16 (the deferred optimizer's "
                       "gradients as bf16 in host memory, " +
                       std::to_string(bundle::kBf16GradStateBytesPerParam) +
                       " B/param; " + formatByteSize(total, true) + ")");
    }
    // Without clipping AdamW can run as soon as a layer's gradient is final:
    // no model-sized gradient block (12 B/param) and a ring instead.
    if (!choices.immediateOptimizer) {
      analysis::PlanChoices immediate = choices;
      immediate.immediateOptimizer = true;
      analysis::MemoryPlan ring = analysis::planMemory(cost, immediate);
      int64_t total = hostNeed(cost, ring);
      if (total <= budget &&
          (deviceBudget == 0 || ring.devicePeak <= deviceBudget))
        fits.push_back("--clip 0 (no gradient clipping: AdamW as soon as a "
                       "layer's gradient is final, " +
                       std::to_string(bundle::kImmediateStateBytesPerParam) +
                       " B/param; " + formatByteSize(total, true) + ")");
    }
    std::string options;
    for (const std::string &f : fits)
      options += (options.empty() ? "" : ", ") + f;
    if (options.empty())
      options = "none: the training state alone exceeds the budget (a larger "
                "--host-memory, or a file-backed state: mtc train "
                "--host-state-file)";
    step.emitError() << "needs " << formatByteSize(need, true)
                     << " of host memory (" << parts << "), host budget is "
                     << formatByteSize(budget) << ": short by "
                     << formatByteSize(need - budget, true)
                     << "; options that fit: " << options;
    signalPassFailure();
  }

  void reportDevice(stream::StepOp step, const analysis::ModelCost &cost,
                    const analysis::PlanChoices &choices,
                    const analysis::MemoryPlan &plan, int64_t budgetBytes) {
    // What every infeasible budget names: the least these options need
    // (with checkpoints on the host or on the device when left to the
    // compiler).
    int64_t smallest = plan.devicePeak;
    if (step.getCheckpointsAuto()) {
      analysis::PlanChoices frugal = choices;
      frugal.checkpointsOnHost = true;
      smallest =
          std::min(smallest, analysis::planMemory(cost, frugal).devicePeak);
      frugal.checkpointsOnHost = false;
      smallest =
          std::min(smallest, analysis::planMemory(cost, frugal).devicePeak);
    }
    if (budgetBytes < plan.largestLayerWeights)
      step.emitError() << "device budget of "
                       << analysis::formatByteSize(budgetBytes)
                       << " is smaller than the weights of one instance of "
                          "layer "
                       << plan.largestLayer << " ("
                       << analysis::formatByteSize(plan.largestLayerWeights,
                                                   true)
                       << "); the model cannot stream through it; smallest "
                          "feasible budget with these options is "
                       << analysis::formatByteSize(smallest, true);
    else
      step.emitError() << "needs "
                       << analysis::formatByteSize(plan.devicePeak, true)
                       << " of device memory, budget is "
                       << analysis::formatByteSize(budgetBytes)
                       << "; smallest feasible budget with these options is "
                       << analysis::formatByteSize(smallest, true);
    return signalPassFailure();
  }
};

} // namespace
