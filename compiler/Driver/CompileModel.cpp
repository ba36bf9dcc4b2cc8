//===- CompileModel.cpp - .mt source to a runtime bundle --------*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "compiler/Driver/CompileModel.h"

#include "compiler/Analysis/MemoryModel.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/BundleWriter.h"
#include "compiler/Target/CpuKernels.h"
#include "compiler/Target/CudaKernels.h"
#include "compiler/Transforms/StepUtils.h"
#include "dialects/mt/MtDialect.h"
#include "dialects/stream/StreamDialect.h"
#include "frontend/HFImport.h"
#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"
#include "frontend/Sema.h"
#include "lib/Bundle/Validate.h"
#include "lib/Sim/Simulator.h"
#include "lib/Support/ByteSize.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <vector>

namespace mtc {

llvm::Expected<ConfigOverrides::value_type>
parseConfigOverride(const std::string &text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    return llvm::createStringError("expected NAME=VALUE, got '" + text + "'");
  std::string name = text.substr(0, eq), value = text.substr(eq + 1);
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(value.c_str(), &end);
  if (errno || end == value.c_str() || *end != '\0')
    return llvm::createStringError("value of '" + name +
                                   "' is not a number: '" + value + "'");
  return ConfigOverrides::value_type(name, v);
}

bool applyConfigOverrides(ast::Model &model, const ConfigOverrides &overrides,
                          DiagnosticEngine &diags) {
  bool ok = true;
  for (const auto &[name, value] : overrides) {
    bool found = false;
    for (ast::ConfigEntry &e : model.config) {
      if (e.name != name)
        continue;
      auto num = std::make_unique<ast::Expr>();
      num->kind = ast::Expr::Kind::Number;
      num->loc = e.loc;
      num->number = value;
      num->isInt = value == static_cast<double>(static_cast<int64_t>(value));
      e.value = std::move(num);
      found = true;
    }
    if (!found) {
      diags.error({}, "--set " + name + ": the model has no config entry '" +
                          name + "'");
      ok = false;
    }
  }
  return ok;
}

llvm::Expected<int64_t> parseDeviceMemory(const std::string &text) {
  Expected<int64_t> bytes = parseDeviceBudget(text);
  if (!bytes)
    return llvm::createStringError(bytes.message());
  return *bytes;
}

namespace {

/// Model::modelHash of \p module as MLIRGen produced it: xxh3 of its printed
/// form (no locations) with the model's name left out.
std::string loweredModelHash(mlir::ModuleOp module) {
  mlir::OwningOpRef<mlir::ModuleOp> copy = module.clone();
  for (mt::ModelOp model : copy->getBody()->getOps<mt::ModelOp>())
    model.setSymName("model");
  std::string text;
  llvm::raw_string_ostream os(text);
  copy->print(os);
  os.flush();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(llvm::xxh3_64bits(text)));
  return hex;
}

/// Checks the streaming options against \p model; prints the first problem.
bool checkStreamOptions(const CompileOptions &options,
                        const CheckedModel &model, DiagnosticEngine &diags) {
  const StreamOptions &s = options.stream;
  if (s.batch < 1 || s.seq < 1) {
    diags.error({}, "a step plan needs --batch and --seq (>= 1)");
    return false;
  }
  if (s.microBatches < 1 || s.prefetchDepth < 1 || s.checkpointEvery < 1) {
    diags.error({}, "--micro-batches, --prefetch-depth and --checkpoint-every "
                    "must be >= 1");
    return false;
  }
  if (s.deviceMemory < 0) {
    diags.error({}, "device memory must be positive");
    return false;
  }
  // A weight slot per layer instance at most (the default 2 stays valid for
  // a one-layer model): more would only be memory no load ever fills.
  const int64_t instances = model.totalLayerInstances();
  if (instances > bundle::kMaxLayerInstances) {
    diags.error({}, "the model has " + std::to_string(instances) +
                        " layer instances, more than the limit of " +
                        std::to_string(bundle::kMaxLayerInstances) +
                        " of a step plan (--device-memory)");
    return false;
  }
  const int64_t maxDepth = std::max<int64_t>(instances, 2);
  if (s.prefetchDepth > maxDepth) {
    diags.error({}, "--prefetch-depth " + std::to_string(s.prefetchDepth) +
                        " is more than the model's " +
                        std::to_string(instances) + " layer instance" +
                        (instances == 1 ? "" : "s") +
                        " (the limit: one weight slot per instance, " +
                        std::to_string(maxDepth) + ")");
    return false;
  }
  return true;
}

/// \p module's step op, or null.
stream::StepOp stepOf(mlir::ModuleOp module) {
  for (auto step : module.getBody()->getOps<stream::StepOp>())
    return step;
  return nullptr;
}

/// \p module's step simulated on the GPU profile \p gpu (lib/Sim, what
/// `mtc simulate` runs), as a StepTimeEstimate; nullopt when it cannot be.
std::optional<analysis::StepTimeEstimate>
simulateCandidate(mlir::ModuleOp module, const CompileOptions &options,
                  const sim::Profile &gpu) {
  bundle::Bundle b;
  if (mlir::failed(translateToBundle(module, b)) || !b.step)
    return std::nullopt;
  sim::SimOptions o;
  // Clipping is the deferred placement's (the immediate one cannot clip).
  o.clip = !options.stream.immediateOptimizer;
  o.gradBytesPerParam =
      options.stream.gradDType == bundle::GradDType::BF16 ? 2 : 4;
  Expected<sim::SimResult> r = sim::simulateStep(b, gpu, o);
  if (!r)
    return std::nullopt;
  analysis::StepTimeEstimate e;
  auto busy = [&](const char *stream) {
    auto it = r->busy.find(stream);
    return it == r->busy.end() ? 0.0 : it->second;
  };
  e.stepSeconds = r->stepSeconds;
  e.computeSeconds = r->computeSeconds;
  e.h2dSeconds = busy("h2d") + busy("h2d.act");
  e.d2hSeconds = busy("d2h") + busy("d2h.act");
  e.optimizerSeconds = r->optimizerSeconds;
  e.exposedSeconds = r->exposedCopySeconds;
  e.h2dBytes = r->h2dBytes;
  e.d2hBytes = r->d2hBytes;
  e.bound = r->bottleneck;
  return e;
}

/// \p module's candidate plan as `mtc plan` shows it, priced by its
/// predicted step time: simulated on the GPU of \p options, else the
/// closed-form estimate on \p rates.
RecomputeCandidate describeCandidate(mlir::ModuleOp module,
                                     const CompileOptions &options,
                                     const analysis::StepRates &rates) {
  RecomputeCandidate c;
  c.fits = true;
  if (stream::StepOp step = stepOf(module)) {
    c.recompute = stream::stringifyRecomputePolicy(step.getRecompute()).str();
    c.checkpoints =
        stream::stringifyCheckpointPlacement(step.getCheckpoints()).str();
    c.checkpointEvery = step.getCheckpointEvery().value_or(1);
    if (std::optional<uint64_t> sel = step.getSelectiveLayers())
      c.selectiveLayers = static_cast<int64_t>(*sel);
  }
  std::optional<analysis::StepTimeEstimate> e;
  if (options.gpu)
    e = simulateCandidate(module, options, *options.gpu);
  if (!e)
    e = predictStepTime(module, rates);
  if (e)
    c.estimate = *e;
  return c;
}

bool runPipelines(mlir::ModuleOp module, const CompileOptions &options,
                  RecomputePolicy policy, bool quiet, std::string &quietErrors);

/// `--recompute auto` when the full-recompute plan failed with \p errors:
/// if it was short of host memory and no segment length was given, the
/// plan with the smallest `checkpoint-every` k >= 2 that fits into \p out.
/// The host memory a plan needs shrinks as k grows and the device memory
/// grows: when the longest segment (every instance of the largest layer
/// kind) is still short of host memory nothing fits; else the search stops
/// at the first k that fits or whose failure is not host memory.
bool fitSegments(mlir::ModuleOp lowered, const CompileOptions &options,
                 const std::string &errors,
                 mlir::OwningOpRef<mlir::ModuleOp> &out) {
  const char *hostShort = "of host memory";
  if (options.stream.checkpointEvery != 1 ||
      errors.find(hostShort) == std::string::npos)
    return false;
  int64_t longest = 0;
  lowered.walk([&](mt::LayerOp l) {
    longest = std::max<int64_t>(longest, l.getCount());
  });
  auto attempt = [&](int64_t k, mlir::OwningOpRef<mlir::ModuleOp> &m,
                     std::string &why) {
    CompileOptions segmented = options;
    segmented.stream.checkpointEvery = k;
    m = lowered.clone();
    return runPipelines(*m, segmented, RecomputePolicy::Full, /*quiet=*/true,
                        why);
  };
  if (longest < 2)
    return false;
  {
    mlir::OwningOpRef<mlir::ModuleOp> m;
    std::string why;
    if (!attempt(longest, m, why) && why.find(hostShort) != std::string::npos)
      return false;
  }
  for (int64_t k = 2; k <= longest; ++k) {
    mlir::OwningOpRef<mlir::ModuleOp> m;
    std::string why;
    if (attempt(k, m, why)) {
      out = std::move(m);
      return true;
    }
    if (why.find(hostShort) == std::string::npos)
      return false;
  }
  return false;
}

/// `--recompute auto` when selective's plan is short of host memory but
/// full's fits: the mixed plan with the largest `selective-layers` S in
/// [1, N) (N layer instances) that fits, into \p out. Host memory grows
/// with S, so the search is a bisection; false when even S = 1 does not
/// fit. (A candidate like the others: the caller prices it.)
bool fitMixed(mlir::ModuleOp lowered, const CompileOptions &options,
              mlir::OwningOpRef<mlir::ModuleOp> &out) {
  if (options.stream.selectiveLayers >= 0 ||
      options.stream.checkpointEvery != 1)
    return false;
  int64_t instances = 0;
  lowered.walk([&](mt::LayerOp l) { instances += l.getCount(); });
  auto attempt = [&](int64_t s, mlir::OwningOpRef<mlir::ModuleOp> &m) {
    CompileOptions mixed = options;
    mixed.stream.selectiveLayers = s;
    m = lowered.clone();
    std::string why;
    return runPipelines(*m, mixed, RecomputePolicy::Selective, /*quiet=*/true,
                        why);
  };
  int64_t lo = 0, hi = instances; // S = lo fits (or is 0), S = hi does not
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    mlir::OwningOpRef<mlir::ModuleOp> m;
    if (attempt(mid, m)) {
      lo = mid;
      out = std::move(m);
    } else {
      hi = mid;
    }
  }
  return lo > 0;
}

/// Runs the training pipeline (mtc-autodiff keeping what \p policy keeps)
/// and, when streaming, the streaming pipeline with recompute \p policy.
/// With \p quiet the diagnostics are collected in \p quietErrors instead of
/// reported.
bool runPipelines(mlir::ModuleOp module, const CompileOptions &options,
                  RecomputePolicy policy, bool quiet,
                  std::string &quietErrors) {
  mlir::MLIRContext *context = module.getContext();
  std::optional<mlir::ScopedDiagnosticHandler> capture;
  if (quiet)
    capture.emplace(context, [&](mlir::Diagnostic &d) {
      quietErrors += d.str() + "\n";
      return mlir::success();
    });
  mlir::PassManager pm(context);
  TrainingPipelineOptions popts;
  popts.recompute = policy;
  popts.fullBackward = options.stream.enabled &&
                       policy == RecomputePolicy::Selective &&
                       options.stream.selectiveLayers >= 0;
  popts.fuse = options.fuse;
  buildTrainingPipeline(pm, popts);
  if (options.stream.enabled) {
    StreamingPipelineOptions sopts;
    sopts.batch = options.stream.batch;
    sopts.seq = options.stream.seq;
    sopts.microBatches = options.stream.microBatches;
    sopts.prefetchDepth = options.stream.prefetchDepth;
    sopts.checkpointEvery = options.stream.checkpointEvery;
    sopts.selectiveLayers = options.stream.selectiveLayers;
    sopts.recompute = policy;
    sopts.checkpoints = options.stream.checkpoints;
    sopts.budget = options.stream.deviceMemory;
    sopts.precision = options.stream.precision;
    sopts.hostBudget = options.stream.hostMemory;
    sopts.immediateOptimizer = options.stream.immediateOptimizer;
    sopts.gradDType = options.stream.gradDType;
    buildStreamingPipeline(pm, sopts);
  }
  return mlir::succeeded(pm.run(module));
}

} // namespace

bool readModelFile(const std::string &path, std::string &out,
                   std::ostream &errs) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    errs << "mtc: error: cannot open '" << path << "': " << std::strerror(errno)
         << "\n";
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    errs << "mtc: error: '" << path << "' is not a regular file\n";
    return false;
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxSourceBytes) {
    errs << "mtc: error: " << path << ": file is " << st.st_size
         << " bytes; model sources are limited to " << kMaxSourceBytes
         << " bytes\n";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

analysis::StepRates stepRatesFor(const CompileOptions &options) {
  if (options.gpu)
    return analysis::gpuStepRates(*options.gpu, options.stream.precision);
  return analysis::cpuDeviceStepRates();
}

std::optional<analysis::StepTimeEstimate>
predictStepTime(mlir::ModuleOp module, const analysis::StepRates &rates) {
  stream::StepOp step = stepOf(module);
  if (!step)
    return std::nullopt;
  auto model = mlir::dyn_cast_or_null<mt::ModelOp>(
      mlir::SymbolTable::lookupSymbolIn(module, step.getModelAttr()));
  if (!model)
    return std::nullopt;
  llvm::Expected<analysis::ModelCost> cost =
      analysis::analyzeModel(model, steputil::dimsOf(step));
  if (!cost) {
    // Not differentiated (no @backward): there is no step to price.
    llvm::consumeError(cost.takeError());
    return std::nullopt;
  }
  analysis::PlanChoices choices;
  choices.microBatches = static_cast<int64_t>(step.getMicroBatches());
  choices.prefetchDepth = static_cast<int64_t>(step.getPrefetchDepth());
  choices.checkpointsOnHost =
      step.getCheckpoints() == CheckpointPlacement::Host;
  choices.checkpointEvery = step.getCheckpointEvery().value_or(1);
  if (std::optional<uint64_t> sel = step.getSelectiveLayers())
    choices.selectiveLayers = static_cast<int64_t>(*sel);
  choices.forwardLoops = analysis::forwardLoops(*cost);
  return analysis::estimateStepTime(*cost, choices, rates);
}

bool compileModelFile(const std::string &path, const CompileOptions &options,
                      std::ostream &errs, CompileStage stage,
                      mlir::MLIRContext &context, CompiledModel &out) {
  std::string source;
  if (!readModelFile(path, source, errs))
    return false;
  return compileModelSource(source, path, options, errs, stage, context, out);
}

bool importHFModel(const std::string &dirOrConfig, std::string &source,
                   std::string &displayName, std::ostream &errs,
                   HFNameMap *names) {
  std::string config = hfConfigPath(dirOrConfig);
  Expected<HFImportResult> imported = importHFConfig(config);
  if (!imported) {
    errs << "mtc: error: " << imported.message() << "\n";
    return false;
  }
  for (const std::string &w : imported->warnings)
    errs << "mtc: warning: " << w << "\n";
  source = std::move(imported->source);
  if (names)
    *names = std::move(imported->names);
  displayName = config + " (imported)";
  return true;
}

void attachHFNames(bundle::Bundle &b, const HFNameMap &names) {
  auto keep = [&](const std::string &inst) {
    auto it = names.find(inst);
    if (it != names.end())
      b.hfNames[inst] = {it->second.tensor, it->second.transpose};
  };
  b.hfNames.clear();
  for (const bundle::Param &p : b.params)
    keep(p.name);
  for (const bundle::Layer &l : b.layers)
    for (int64_t i = 0; i < l.count; ++i) {
      std::string prefix = l.name + "." + std::to_string(i) + ".";
      for (const bundle::Param &p : l.params)
        keep(prefix + p.name);
      for (const bundle::Expert &x : l.experts)
        for (int64_t e = 0; e < x.count; ++e)
          for (const bundle::Param &p : x.params)
            keep(prefix + x.name + "." + std::to_string(e) + "." + p.name);
    }
}

void attachHFConfig(bundle::Bundle &b, const std::string &dirOrConfig) {
  auto slurp = [](const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return std::string();
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  };
  std::string config = hfConfigPath(dirOrConfig);
  b.hfConfig = slurp(config);
  size_t slash = config.rfind('/');
  std::string dir = slash == std::string::npos ? "." : config.substr(0, slash);
  b.hfTokenizer = slurp(dir + "/tokenizer.json");
}

bool compileHFModel(const std::string &dirOrConfig,
                    const CompileOptions &options, std::ostream &errs,
                    bundle::Bundle &out) {
  std::string source, name;
  HFNameMap names;
  if (!importHFModel(dirOrConfig, source, name, errs, &names) ||
      !compileModelSource(source, name, options, errs, out))
    return false;
  attachHFNames(out, names);
  attachHFConfig(out, dirOrConfig);
  return true;
}

bool compileModelSource(const std::string &source, const std::string &path,
                        const CompileOptions &options, std::ostream &errs,
                        CompileStage stage, mlir::MLIRContext &context,
                        CompiledModel &out) {
  DiagnosticEngine diags(path, source, errs);
  auto finish = [&](bool ok) {
    diags.printSummary();
    return ok && !diags.hasErrors();
  };
  out.ast = parseModel(diags);
  if (!out.ast || !applyConfigOverrides(*out.ast, options.overrides, diags))
    return finish(false);
  if (stage == CompileStage::Parsed)
    return finish(true);
  if (!checkModel(*out.ast, diags, out.checked))
    return finish(false);
  if (stage == CompileStage::Checked)
    return finish(true);

  context.loadDialect<mt::MtDialect, stream::StreamDialect,
                      mlir::func::FuncDialect>();
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    std::string msg;
    llvm::raw_string_ostream ms(msg);
    ms << d;
    SourceLoc loc;
    if (auto fl = llvm::dyn_cast<mlir::FileLineColLoc>(d.getLocation()))
      loc = {fl.getLine(), fl.getColumn()};
    diags.error(loc, msg);
    return mlir::success();
  });
  out.module = mlirGen(context, out.checked, path);
  if (!out.module)
    return finish(false);
  std::string modelHash = loweredModelHash(*out.module);
  if (stage == CompileStage::Lowered)
    return finish(true);
  if (options.stream.enabled &&
      !checkStreamOptions(options, out.checked, diags))
    return finish(false);
  std::string ignored;
  if (options.recompute == RecomputePolicy::Auto && options.stream.enabled &&
      options.stream.selectiveLayers < 0) {
    // Keep every intermediate on the device when that plan fits: nothing is
    // recomputed or copied. Else price the plans that fit by their predicted
    // step time on the target (a GPU: the step simulation of lib/Sim on its
    // profile; the CPU device: analysis::estimateStepTime, compute plus
    // both copy directions) and keep the fastest: selective, full, and, when
    // host checkpoints were asked for, none with every intermediate in host
    // memory. Full must fit (its error is the one reported); ties go to the
    // later candidate of selective, none over full.
    const analysis::StepRates rates = stepRatesFor(options);
    out.pricedOn = options.gpu
                       ? options.gpu->name + ", simulated as by mtc simulate"
                       : rates.name + ", estimated";
    std::vector<RecomputeCandidate> &tried = out.recomputeCandidates;
    mlir::OwningOpRef<mlir::ModuleOp> lowered = out.module->clone();
    bool hostAsked = options.stream.checkpoints == CheckpointPlacement::Host;
    CompileOptions keepAll = options;
    if (keepAll.stream.checkpoints == CheckpointPlacement::Auto)
      keepAll.stream.checkpoints = CheckpointPlacement::Device;
    auto unfit = [&](RecomputePolicy policy, CheckpointPlacement where) {
      RecomputeCandidate c;
      c.recompute = stream::stringifyRecomputePolicy(policy).str();
      c.checkpoints = where == CheckpointPlacement::Auto
                          ? "device or host"
                          : stream::stringifyCheckpointPlacement(where).str();
      tried.push_back(c);
    };
    if (!hostAsked && runPipelines(*out.module, keepAll, RecomputePolicy::None,
                                   /*quiet=*/true, ignored)) {
      tried.push_back(describeCandidate(*out.module, options, rates));
      tried.back().chosen = true;
      tried.back().note = "everything kept on the device, nothing recomputed "
                          "or copied";
    } else {
      if (!hostAsked)
        unfit(RecomputePolicy::None, CheckpointPlacement::Device);
      std::vector<mlir::OwningOpRef<mlir::ModuleOp>> fits;
      bool selectiveHostShort = false;
      std::vector<size_t> fitIndex;
      for (RecomputePolicy policy :
           {RecomputePolicy::Selective, RecomputePolicy::None}) {
        if (policy == RecomputePolicy::None && !hostAsked)
          continue;
        mlir::OwningOpRef<mlir::ModuleOp> m = lowered->clone();
        std::string why;
        if (runPipelines(*m, options, policy, /*quiet=*/true, why)) {
          fitIndex.push_back(tried.size());
          tried.push_back(describeCandidate(*m, options, rates));
          fits.push_back(std::move(m));
        } else {
          unfit(policy, options.stream.checkpoints);
          if (policy == RecomputePolicy::Selective)
            selectiveHostShort =
                why.find("of host memory") != std::string::npos;
        }
      }
      mlir::OwningOpRef<mlir::ModuleOp> full = lowered->clone();
      std::string fullErrors;
      if (!runPipelines(*full, options, RecomputePolicy::Full, /*quiet=*/true,
                        fullErrors)) {
        // Even the layers' inputs exceed the host budget: segment
        // checkpointing with the smallest segment length that fits.
        if (!fitSegments(*lowered, options, fullErrors, full)) {
          full = lowered->clone();
          runPipelines(*full, options, RecomputePolicy::Full, false, ignored);
          return finish(false);
        }
      }
      // Selective where host memory allows, full for the rest: when
      // selective is short of host memory, the first S instances keep their
      // selective checkpoints (a candidate priced like the others).
      bool segmented = false;
      for (auto step : full->getBody()->getOps<stream::StepOp>())
        segmented |= step.getCheckpointEvery().value_or(1) > 1;
      if (selectiveHostShort && !segmented) {
        mlir::OwningOpRef<mlir::ModuleOp> mixed;
        if (fitMixed(*lowered, options, mixed)) {
          fitIndex.push_back(tried.size());
          tried.push_back(describeCandidate(*mixed, options, rates));
          fits.push_back(std::move(mixed));
        }
      }
      size_t chosen = tried.size();
      tried.push_back(describeCandidate(*full, options, rates));
      out.module = std::move(full);
      for (size_t i = 0; i < fits.size(); ++i)
        if (tried[fitIndex[i]].estimate.stepSeconds <=
            tried[chosen].estimate.stepSeconds) {
          out.module = std::move(fits[i]);
          chosen = fitIndex[i];
        }
      tried[chosen].chosen = true;
    }
  } else {
    // Without streaming, auto is full; with a given number of selective
    // layers it is selective (a mixed plan).
    RecomputePolicy policy = options.recompute;
    if (policy == RecomputePolicy::Auto)
      policy = options.stream.enabled && options.stream.selectiveLayers >= 0
                   ? RecomputePolicy::Selective
                   : RecomputePolicy::Full;
    if (!runPipelines(*out.module, options, policy, false, ignored))
      return finish(false);
  }
  if (stage == CompileStage::Differentiated)
    return finish(true);
  // Kernels first: they name the fused regions the bundle then records.
  CpuKernelOptions kopts;
  kopts.cpu = options.cpu;
  llvm::Expected<CpuKernelLibrary> kernels =
      compileCpuKernels(*out.module, kopts);
  if (!kernels) {
    diags.error({}, "compiling the CPU kernels: " +
                        llvm::toString(kernels.takeError()));
    return finish(false);
  }
  if (mlir::failed(translateToBundle(*out.module, out.bundle)))
    return finish(false);
  if (options.stream.enabled) {
    Status st = bundle::checkTokenShapes(out.bundle, options.stream.batch,
                                         options.stream.seq);
    if (!st.ok()) {
      diags.error({}, st.message());
      return finish(false);
    }
  }
  // The deferred placement's host gradients; the immediate placement's
  // ring (grads.host) is fp32 whatever the flag (train refuses bf16 there).
  if (out.bundle.step && !out.bundle.step->buffer("grads.host"))
    out.bundle.step->gradDType =
        bundle::gradDTypeName(options.stream.gradDType);
  out.bundle.modelHash = modelHash;
  out.bundle.cpuKernels = std::move(kernels->sharedObject);
  out.bundle.cpuKernelsTarget = kernels->cpu;
  if (options.cudaKernels) {
    llvm::Expected<bundle::CudaKernels> cuda =
        emitCudaKernels(*out.module, fusedSignatures(out.bundle));
    if (!cuda) {
      diags.error({}, "emitting the CUDA kernels: " +
                          llvm::toString(cuda.takeError()));
      return finish(false);
    }
    out.bundle.cudaKernels = std::move(*cuda);
  }
  // What the runtime checks when it reads a bundle holds for every bundle
  // the compiler builds; a failure here is a compiler bug.
  if (Status valid = bundle::validate(out.bundle); !valid) {
    diags.error({}, "internal error: the compiled bundle does not validate: " +
                        valid.message());
    return finish(false);
  }
  return finish(true);
}

bool compileModelFile(const std::string &path, const CompileOptions &options,
                      std::ostream &errs, bundle::Bundle &out) {
  mlir::MLIRContext context;
  CompiledModel compiled;
  if (!compileModelFile(path, options, errs, CompileStage::Bundled, context,
                        compiled))
    return false;
  out = std::move(compiled.bundle);
  return true;
}

bool compileModelSource(const std::string &source,
                        const std::string &displayName,
                        const CompileOptions &options, std::ostream &errs,
                        bundle::Bundle &out) {
  mlir::MLIRContext context;
  CompiledModel compiled;
  if (!compileModelSource(source, displayName, options, errs,
                          CompileStage::Bundled, context, compiled))
    return false;
  out = std::move(compiled.bundle);
  return true;
}

bool smallestDeviceMemory(const std::string &source,
                          const std::string &displayName,
                          const CompileOptions &options, std::ostream &errs,
                          int64_t &out) {
  CompileOptions frugal = options;
  frugal.stream.enabled = true;
  frugal.stream.deviceMemory = 0;
  frugal.stream.hostMemory = 0; // device memory only
  if (frugal.recompute == RecomputePolicy::Auto)
    frugal.recompute = frugal.stream.selectiveLayers >= 0
                           ? RecomputePolicy::Selective
                           : RecomputePolicy::Full;
  std::vector<CheckpointPlacement> places;
  if (options.stream.checkpoints == CheckpointPlacement::Auto)
    places = {CheckpointPlacement::Device, CheckpointPlacement::Host};
  else
    places = {options.stream.checkpoints};
  out = 0;
  for (CheckpointPlacement place : places) {
    frugal.stream.checkpoints = place;
    mlir::MLIRContext context;
    CompiledModel compiled;
    if (!compileModelSource(source, displayName, frugal, errs,
                            CompileStage::Differentiated, context, compiled))
      return false;
    for (auto step : compiled.module->getBody()->getOps<stream::StepOp>()) {
      int64_t peak = step.getDevicePeak();
      out = out == 0 ? peak : std::min(out, peak);
    }
  }
  return true;
}

bool loadModel(const std::string &path, const CompileOptions &options,
               std::ostream &errs, bundle::Bundle &out) {
  bool isBundle =
      path.size() > 4 && path.compare(path.size() - 4, 4, ".mtb") == 0;
  if (!isBundle)
    return compileModelFile(path, options, errs, out);
  if (!options.overrides.empty() || !options.cpu.empty() ||
      options.recompute != RecomputePolicy::Full) {
    errs << "mtc: error: --set, --cpu and --recompute apply to .mt sources, "
            "not to the compiled bundle '"
         << path << "'\n";
    return false;
  }
  Expected<bundle::Bundle> read = bundle::readFile(path);
  if (!read) {
    errs << "mtc: error: " << read.message() << "\n";
    return false;
  }
  out = std::move(read).value();
  return true;
}

} // namespace mtc
