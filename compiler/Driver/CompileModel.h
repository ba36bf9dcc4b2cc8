//===- CompileModel.h - .mt source to a runtime bundle ----------*- C++ -*-===//
//
// Part of mtc. The whole compiler in one call, for the commands that train or
// check a model straight from its source (`mtc train model.mt`, `mtc
// gradcheck model.mt`).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_DRIVER_COMPILEMODEL_H
#define MTC_COMPILER_DRIVER_COMPILEMODEL_H

#include "compiler/Analysis/StepTime.h"
#include "compiler/Transforms/Policies.h"
#include "frontend/AST.h"
#include "frontend/HFImport.h"
#include "frontend/Sema.h"
#include "lib/Bundle/Bundle.h"
#include "lib/Bundle/Plan.h"
#include "lib/Support/Diagnostics.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <optional>

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace mtc {

/// `--set name=value`: replaces a config entry's expression by a number
/// before Sema runs (for tiny instances of a model: `--set dim=16`).
using ConfigOverrides = std::vector<std::pair<std::string, double>>;

/// Streaming (docs/streaming.md): compile a step plan for a device-memory
/// budget into the bundle (bundle::Bundle::step).
struct StreamOptions {
  bool enabled = false;       ///< build the step plan
  int64_t deviceMemory = 0;   ///< budget in bytes; 0: none (plan only)
  int64_t batch = 0, seq = 0; ///< one micro-batch; required (>= 1)
  int64_t microBatches = 1;
  int64_t prefetchDepth = 2; ///< weight slots
  /// Segment checkpointing (`--checkpoint-every K`, recompute full): only
  /// every K-th layer instance keeps its input (docs/streaming.md). With
  /// `--recompute auto` and 1, the smallest K whose plan fits the host
  /// budget when full recomputation's does not.
  int64_t checkpointEvery = 1;
  /// Mixed recomputation (`--selective-layers S`, recompute selective): the
  /// first S layer instances keep selective checkpoints, the others only
  /// their input (docs/streaming.md, "Mixed recomputation"); -1: every
  /// instance. With `--recompute auto` and -1, the largest S whose plan
  /// fits the host budget is a candidate when selective's plan does not.
  int64_t selectiveLayers = -1;
  /// Where layer checkpoints live; auto: on the device when the plan fits
  /// the budget, else in host memory (`--checkpoints`, parsed by
  /// parseCheckpointPlacement).
  CheckpointPlacement checkpoints = CheckpointPlacement::Auto;
  /// How tensors are stored on the device (`--precision fp32|bf16`).
  bundle::Precision precision = bundle::Precision::F32;
  /// Host memory the plan may use (`--host-memory`): the training state at
  /// 16 B/param plus every host buffer; 0: no limit.
  int64_t hostMemory = 0;
  /// AdamW as soon as each layer instance's gradient is final (only without
  /// gradient clipping): the plan adds the `grads.host` ring and the state
  /// is 12 B/param (`--optimizer-placement`, docs/training.md).
  bool immediateOptimizer = false;
  /// How the deferred optimizer's gradients are kept in host memory
  /// (`--grad-dtype`): bf16 counts 14 B/param of state instead of 16 in the
  /// host budget (docs/training.md, "Gradient dtype"). The step plan
  /// records it (StepPlan::gradDType): training a bundle uses it.
  bundle::GradDType gradDType = bundle::GradDType::F32;
};

/// The GPU profile `--recompute auto` prices plans with when the target is
/// `--device cuda` and `--gpu` is not given (lib/Sim, data/hardware).
inline constexpr const char *kDefaultGpuProfile = "h200";

/// What the compiler is asked for besides the source.
struct CompileOptions {
  ConfigOverrides overrides;
  /// CPU the fused kernels are compiled for: "" is the host CPU, "x86-64"
  /// any x86-64 machine, or an LLVM CPU name ("znver4", ...).
  std::string cpu;
  /// Backward recomputation (`--recompute`, parsed by parseRecomputePolicy):
  /// full recomputes each layer from its input (the only activation kept
  /// per layer instance); none keeps every intermediate the backward needs
  /// (no recomputation, more memory); selective keeps the results of
  /// matmul, attention and moe and recomputes the cheap ops between them;
  /// auto (with streaming) keeps everything when that plan fits the budget
  /// with its checkpoints on the device, else the plan among selective, full
  /// (and none, with host checkpoints asked for) that fits and has the
  /// shortest predicted step on the target (a GPU: the step simulation of
  /// its profile, `gpu`; else the CPU device's estimate; docs/streaming.md);
  /// without streaming it is full.
  RecomputePolicy recompute = RecomputePolicy::Full;
  /// Streaming step plan (off by default).
  StreamOptions stream;
  /// Fuse elementwise chains (TrainingPipelineOptions::fuse).
  bool fuse = true;
  /// Also emit the CUDA C of the fused regions into the bundle
  /// (`cuda_kernels`, for `--device cuda|cuda-emu`), with an entry for every
  /// storage signature the step plan's precision gives them.
  bool cudaKernels = false;
  /// The GPU the plan is for (`--gpu NAME|FILE`; `--device cuda`: the
  /// kDefaultGpuProfile): `--recompute auto` prices its candidates by their
  /// step simulated on this profile (lib/Sim, as `mtc simulate`). Absent:
  /// by analysis::estimateStepTime on the CPU device's rates.
  std::optional<sim::Profile> gpu;
};

/// One plan `--recompute auto` considered (docs/streaming.md, "Choosing
/// what to recompute"), for `mtc plan` to show.
struct RecomputeCandidate {
  std::string recompute;   ///< "none", "selective", "full"
  std::string checkpoints; ///< "device", "host"
  int64_t checkpointEvery = 1;
  /// Mixed recomputation: the first S instances selective (-1: every one).
  int64_t selectiveLayers = -1;
  bool fits = false;
  bool chosen = false;
  /// Why it was chosen without being priced against the others ("" when
  /// it was priced): keeping everything on the device recomputes nothing.
  std::string note;
  analysis::StepTimeEstimate estimate; ///< when it fits
};

/// Parses a byte size for `--device-memory`: "64MiB", "2GiB", "512KiB",
/// "1.5GiB", or a bare number of bytes (compiler/Analysis parseByteSize).
/// Zero and negative sizes are errors too.
llvm::Expected<int64_t> parseDeviceMemory(const std::string &text);

/// Parses `name=value` (a number); the error quotes what is wrong.
llvm::Expected<ConfigOverrides::value_type>
parseConfigOverride(const std::string &text);

/// Applies \p overrides to the parsed model; unknown names are errors
/// reported to \p diags.
bool applyConfigOverrides(ast::Model &model, const ConfigOverrides &overrides,
                          DiagnosticEngine &diags);

/// How far compileModelFile goes; each stage fills one more field of
/// CompiledModel.
enum class CompileStage {
  Parsed,         ///< ast
  Checked,        ///< checked
  Lowered,        ///< module: the mt dialect as MLIRGen produces it
  Differentiated, ///< module after the training pipeline
  Bundled,        ///< bundle
};

struct CompiledModel {
  std::optional<ast::Model> ast;
  CheckedModel checked;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  bundle::Bundle bundle;
  /// With `--recompute auto` and streaming: the plans considered, in the
  /// order they were tried, and the target they were priced on.
  std::vector<RecomputeCandidate> recomputeCandidates;
  std::string pricedOn;
};

/// The rates \p options' target runs a step at: the GPU profile's, else
/// the CPU device's.
analysis::StepRates stepRatesFor(const CompileOptions &options);

/// The closed-form predicted step time (analysis::estimateStepTime) of \p
/// module's step plan (after the streaming pipeline) on \p rates; nullopt
/// when it has no step or the model is not differentiated. What
/// `--recompute auto` prices a candidate with when no GPU profile is given.
std::optional<analysis::StepTimeEstimate>
predictStepTime(mlir::ModuleOp module, const analysis::StepRates &rates);

/// Reads the model source \p path: a regular file (a FIFO or a device is
/// refused without being opened) of at most kMaxSourceBytes. Prints the
/// error ("mtc: error: cannot open 'x': ...") to \p errs and returns false
/// on failure.
bool readModelFile(const std::string &path, std::string &out,
                   std::ostream &errs);

/// Reads \p path and runs the compiler up to \p stage (MLIR stages use
/// \p context). Every error is printed to \p errs (file:line:col with a
/// caret); returns false then. The Bundled stage also compiles the fused
/// regions to a CPU kernel library for options.cpu, carried in the bundle.
bool compileModelFile(const std::string &path, const CompileOptions &options,
                      std::ostream &errs, CompileStage stage,
                      mlir::MLIRContext &context, CompiledModel &out);

/// The same for source text held in memory (e.g. imported from a HuggingFace
/// config); \p displayName stands for the file in diagnostics
/// ("DIR/config.json (imported)").
bool compileModelSource(const std::string &source,
                        const std::string &displayName,
                        const CompileOptions &options, std::ostream &errs,
                        CompileStage stage, mlir::MLIRContext &context,
                        CompiledModel &out);

/// `--hf DIR|config.json`: imports the HuggingFace config (frontend/HFImport)
/// into \p source and sets \p displayName to "CONFIG (imported)". Import
/// errors and warnings are printed to \p errs; returns false on an error.
/// When \p names is given it receives the HF tensor of each parameter
/// instance (see attachHFNames).
bool importHFModel(const std::string &dirOrConfig, std::string &source,
                   std::string &displayName, std::ostream &errs,
                   HFNameMap *names = nullptr);

/// Stores \p names in \p b (bundle::Bundle::hfNames), keeping the entries
/// whose instance the compiled model has (a `--set` may have changed counts).
void attachHFNames(bundle::Bundle &b, const HFNameMap &names);

/// Keeps the text of the HF config.json (DIR or the file) and of the
/// tokenizer.json beside it (if any) in the bundle, for `mtc export-hf`,
/// tokenised training text and generation.
void attachHFConfig(bundle::Bundle &b, const std::string &dirOrConfig);

/// `--hf DIR`: the compiled bundle with its HF names, in one call.
bool compileHFModel(const std::string &dirOrConfig,
                    const CompileOptions &options, std::ostream &errs,
                    bundle::Bundle &out);

/// The whole compiler: source to bundle. With options.stream.enabled the
/// bundle carries the step plan (out.step) for options.stream: this is what
/// `mtc train MODEL.mt --device-memory ...` calls. Errors (an infeasible
/// budget included) are printed to \p errs; returns false then.
bool compileModelFile(const std::string &path, const CompileOptions &options,
                      std::ostream &errs, bundle::Bundle &out);

/// The smallest device budget for which a step plan exists with
/// options.stream and the most frugal choices the options leave open
/// (recompute full when options.recompute is auto, host or device
/// checkpoints, whichever needs less, when options.stream.checkpoints is
/// auto). options.stream.deviceMemory is ignored. Returns false after
/// printing errors to \p errs.
bool smallestDeviceMemory(const std::string &source,
                          const std::string &displayName,
                          const CompileOptions &options, std::ostream &errs,
                          int64_t &out);

/// The whole compiler for in-memory source: source to bundle.
bool compileModelSource(const std::string &source,
                        const std::string &displayName,
                        const CompileOptions &options, std::ostream &errs,
                        bundle::Bundle &out);

/// Reads a model given either as `.mt` source (compiled in-process) or as a
/// `.mtb` bundle.
bool loadModel(const std::string &path, const CompileOptions &options,
               std::ostream &errs, bundle::Bundle &out);

} // namespace mtc

#endif // MTC_COMPILER_DRIVER_COMPILEMODEL_H
