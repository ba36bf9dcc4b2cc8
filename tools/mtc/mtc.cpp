//===- mtc.cpp - The mtc command-line driver --------------------*- C++ -*-===//
//
// Part of mtc. `mtc <command> ...`: one entry point for users. Each command
// parses its own flags; `mtc --help` lists the commands.
//
//===----------------------------------------------------------------------===//

#include "compiler/Analysis/MemoryModel.h"
#include "compiler/Driver/CompileModel.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/BundleWriter.h"
#include "dialects/mt/MtDialect.h"
#include "dialects/stream/StreamDialect.h"
#include "frontend/ASTPrinter.h"
#include "frontend/HFImport.h"
#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"
#include "frontend/Sema.h"
#include "frontend/Summary.h"
#include "lib/Support/Diagnostics.h"
#include "lib/Support/Files.h"
#include "lib/Tokenizer/Instruct.h"
#include "lib/Tokenizer/TokenFile.h"
#include "lib/Tokenizer/Tokenizer.h"
#include "runtime/driver/Checkpoint.h"
#include "runtime/driver/CommandLine.h"
#include "runtime/driver/GradCheck.h"
#include "runtime/driver/HFExport.h"
#include "runtime/driver/HFWeights.h"
#include "runtime/driver/Train.h"
#include "runtime/driver/TrainCommand.h"
#include "tools/mtc/CudaEmit.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

struct Command {
  const char *name;
  std::string usage;
  std::string summary;
  int (*run)(const std::vector<std::string> &args);
  std::string details = ""; ///< more help after the usage, if any
};

/// `train` and `generate` are shared with mtc-run (runtime/driver/
/// TrainCommand.h); here they may also compile a model.
const mtc::driver::Tool kTool = {"mtc", /*compiles=*/true};

int runCompile(const std::vector<std::string> &args);
int runHelp(const std::vector<std::string> &args);
int runGradCheck(const std::vector<std::string> &args);
int runTrain(const std::vector<std::string> &args);
int runGenerate(const std::vector<std::string> &args);
int runImportHF(const std::vector<std::string> &args);
int runPlan(const std::vector<std::string> &args);
int runTokenize(const std::vector<std::string> &args);
int runExportHF(const std::vector<std::string> &args);

const Command kCommands[] = {
    {"compile",
     "mtc compile MODEL.mt|--hf DIR "
     "[--emit=ast|mlir|mlir-grad|summary|bundle|cuda|ptx|kernel-stats] "
     "[-o FILE] [--target cpu|cuda] [--arch sm_XY] [--cpu NAME] [--recompute "
     "full|none|selective|auto] [--set "
     "NAME=VALUE]... [--device-memory SIZE --batch N --seq N "
     "[--micro-batches N] [--prefetch-depth N] [--checkpoints "
     "device|host|auto] [--precision fp32|bf16]] [--device "
     "cpu|cuda|cuda-emu]",
     "check a model; print its AST, IR (mlir-grad: with backward functions) "
     "or parameter summary, or write a bundle (-o model.mtb; with "
     "--device-memory it carries a streaming step plan); with --target cuda, "
     "print its CUDA kernels, their PTX or ptxas statistics",
     runCompile,
     "--device cuda|cuda-emu (or --target cuda) compiles the bundle for the\n"
     "  CUDA backend: its fused regions also as CUDA C (docs/cuda.md).\n"
     "  Default: cpu. With --target cuda, --emit=cuda prints the CUDA C of\n"
     "  every kernel the model needs (library and fused), --emit=ptx their\n"
     "  PTX for --arch (default sm_90) and --emit=kernel-stats ptxas'\n"
     "  registers, spills and shared memory per kernel (both need the CUDA\n"
     "  toolkit's NVRTC)."},
    {"plan",
     "mtc plan MODEL.mt|--hf DIR --batch N --seq N [--device-memory SIZE] "
     "[--micro-batches N] [--prefetch-depth N] [--recompute "
     "auto|full|selective|none] "
     "[--checkpoints device|host|auto] [--precision fp32|bf16] [--set "
     "NAME=VALUE]... [--device cpu|cuda|cuda-emu]",
     "print the streaming memory plan of a model: device buffers, peak, "
     "smallest feasible budget, host bytes per parameter",
     runPlan},
    {"train", mtc::driver::trainUsage(kTool), mtc::driver::trainSummary(kTool),
     runTrain, mtc::driver::trainDetails()},
    {"generate", mtc::driver::generateUsage(kTool),
     mtc::driver::generateSummary(), runGenerate},
    {"gradcheck",
     "mtc gradcheck MODEL.mt|MODEL.mtb|--hf DIR [--batch N] [--seq N] [--seed "
     "N] "
     "[--set NAME=VALUE]... [--tolerance X] [--step X] [--coordinates N] "
     "[--tensors GLOB[,GLOB]...] "
     "[--recompute full|none|selective] [--cpu NAME]",
     "compare the compiled gradients with finite differences on a small "
     "random instance",
     runGradCheck,
     "A tensor fails when its compiled gradient and the finite differences\n"
     "  differ by more than the differences' own error bound (truncation and\n"
     "  the fp32 rounding noise of the loss, both estimated) plus\n"
     "  --tolerance (5e-3) relative.\n"
     "  --tensors checks only the tensors whose names match a glob\n"
     "  ('Block.2.*'). See docs/training.md."},
    {"import-hf", "mtc import-hf DIR|config.json [-o MODEL.mt]",
     "write .mt source for a HuggingFace config.json (docs/hf.md); "
     "compile, train and gradcheck take --hf DIR to import in memory",
     runImportHF},
    {"export-hf",
     "mtc export-hf CHECKPOINT -o DIR [--dtype f32|bf16] [--max-shard-size "
     "SIZE]",
     "write a checkpoint of a HuggingFace-imported model back in HF layout: "
     "model.safetensors (HF names) and config.json (docs/hf.md)",
     runExportHF},
    {"tokenize",
     "mtc tokenize --tokenizer DIR|tokenizer.json INPUT.txt|--text TEXT "
     "[-o OUT.bin] [--print] [--add-special-tokens]\n"
     "       mtc tokenize --tokenizer DIR|tokenizer.json DATA.jsonl "
     "[-o OUT.bin] [--print] [--chat-template FILE.jinja]\n"
     "       mtc tokenize --tokenizer DIR|tokenizer.json --decode "
     "IDS.bin|IDS.txt|--text IDS [-o OUT.txt] [--skip-special-tokens]",
     "encode text with a HuggingFace tokenizer.json into an llm.c token file "
     "for train --data (--print shows the ids, --decode turns ids into text)",
     runTokenize,
     "Encodes exactly as the HuggingFace `tokenizers` library does\n"
     "(Tokenizer.encode(text, add_special_tokens).ids) for byte-level BPE\n"
     "(GPT-2, Llama 3, Qwen2) and SentencePiece-style BPE (Llama 2, Mistral,\n"
     "Gemma); see docs/hf.md. The whole input is one text (UTF-8).\n"
     "-o OUT.bin writes the llm.c layout mtc train --data reads: a 256-int32\n"
     "  header (magic 20240520, version 1: uint16 tokens, or 2: uint32 when\n"
     "  the vocabulary exceeds 65536), then the tokens.\n"
     "--print writes the ids to stdout, separated by spaces.\n"
     "--add-special-tokens applies the post-processor (e.g. BOS first).\n"
     "--decode reads ids (an llm.c .bin, or integers separated by spaces,\n"
     "  commas or newlines) and writes the text; --skip-special-tokens\n"
     "  leaves out special tokens.\n"
     "A .jsonl input is instruction data: one example a line,\n"
     "  {\"prompt\": ..., \"response\": ...[, \"system\": ...]} or\n"
     "  {\"messages\": [{\"role\": ..., \"content\": ...}, ...]}, rendered "
     "with\n"
     "  the tokenizer's chat template (chat_template.jinja or\n"
     "  tokenizer_config.json beside tokenizer.json; --chat-template FILE\n"
     "  overrides it) or mtc's default template (docs/hf.md). -o also writes\n"
     "  OUT.bin.mask, the loss mask: only assistant tokens are trained.\n"
     "  --print shows one example a line, masked ids in brackets."},
    {"help", "mtc help [COMMAND]", "show this list, or one command's usage",
     runHelp},
};

const Command *findCommand(const std::string &name) {
  for (const Command &c : kCommands)
    if (name == c.name)
      return &c;
  return nullptr;
}

void printUsage(std::ostream &os) {
  os << "mtc - compile and train transformer models larger than device "
        "memory\n\n"
        "usage: mtc <command> [options]\n\ncommands:\n";
  for (const Command &c : kCommands)
    os << "  " << c.name << std::string(11 - std::strlen(c.name), ' ')
       << c.summary << "\n";
  os << "\nRun 'mtc help COMMAND' for a command's options.\n";
}

int error(const std::string &message) {
  std::cerr << "mtc: error: " << message << "\n";
  return 1;
}

/// Opens the regular file \p path into \p in; on failure returns what went
/// wrong ("cannot open 'x': reason" / "cannot read 'x'"), else "".
std::string openRegularFile(const std::string &path, std::ifstream &in) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return "cannot open '" + path + "': " + std::strerror(errno);
  in.open(path, std::ios::binary);
  if (!S_ISREG(st.st_mode) || !in)
    return "cannot read '" + path + "'";
  return "";
}

/// Writes \p text to \p path atomically (a temporary file, then rename), or to
/// stdout when \p path is empty or "-".
bool writeOutput(const std::string &path, const std::string &text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return true;
  }
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      error("cannot write '" + tmp + "': " + std::strerror(errno));
      return false;
    }
    out << text;
    out.flush();
    if (!out) {
      error("cannot write '" + tmp + "': " + std::strerror(errno));
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error("cannot rename '" + tmp + "' to '" + path +
          "': " + std::strerror(errno));
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

using mtc::driver::Flag;

/// driver::parseFlags, printing the error; returns false on bad input.
bool parseArgs(const char *command, const std::vector<std::string> &args,
               const std::vector<Flag> &flags,
               std::vector<std::string> &positional,
               std::set<std::string> *given = nullptr) {
  mtc::Status st =
      mtc::driver::parseFlags(command, args, flags, positional, given);
  if (!st.ok())
    error(st.message());
  return st.ok();
}

/// The values of `--set NAME=VALUE` (a List flag) into \p overrides. Prints
/// the error and returns false on a malformed entry.
bool parseOverrides(const char *command, const std::vector<std::string> &sets,
                    mtc::ConfigOverrides &overrides) {
  for (const std::string &value : sets) {
    auto entry = mtc::parseConfigOverride(value);
    if (!entry) {
      error(std::string(command) +
            ": --set: " + llvm::toString(entry.takeError()));
      return false;
    }
    overrides.push_back(std::move(*entry));
  }
  return true;
}

/// Exactly one positional argument (the model or checkpoint).
bool onePositional(const char *command, const std::vector<std::string> &pos,
                   std::string &out) {
  mtc::Expected<std::string> one =
      mtc::driver::onePositional(command, pos, findCommand(command)->usage);
  if (!one) {
    error(one.message());
    return false;
  }
  out = *one;
  return true;
}

bool wantsHelp(const char *command, const std::vector<std::string> &args) {
  if (!mtc::driver::wantsHelp(args))
    return false;
  const Command *c = findCommand(command);
  std::cout << "usage: " << c->usage << "\n";
  if (!c->details.empty())
    std::cout << "\n" << c->details << "\n";
  return true;
}

/// The model of train/gradcheck: one positional MODEL.mt|MODEL.mtb, or
/// `--hf DIR` (imported and compiled in memory).
bool modelInput(const char *command, const std::vector<std::string> &pos,
                const std::string &hf, std::string &input) {
  if (hf.empty())
    return onePositional(command, pos, input);
  if (!pos.empty()) {
    error(std::string(command) +
          ": give either a model file or --hf DIR, not both");
    return false;
  }
  return true;
}

/// The files a model is read from: \p input, or every file of the HF
/// directory (config.json, weights, tokenizer).
std::vector<std::string> modelFiles(const std::string &input,
                                    const std::string &hf) {
  if (hf.empty())
    return {input};
  std::vector<std::string> files = {mtc::hfConfigPath(hf)};
  std::error_code ec;
  std::string dir = std::filesystem::is_directory(hf, ec)
                        ? hf
                        : std::filesystem::path(hf).parent_path().string();
  for (const auto &entry : std::filesystem::directory_iterator(
           dir.empty() ? "." : dir,
           std::filesystem::directory_options::skip_permission_denied, ec))
    if (entry.is_regular_file(ec))
      files.push_back(entry.path().string());
  return files;
}

bool loadInput(const std::string &input, const std::string &hf,
               const mtc::CompileOptions &copts, mtc::bundle::Bundle &b) {
  if (hf.empty())
    return mtc::loadModel(input, copts, std::cerr, b);
  return mtc::compileHFModel(hf, copts, std::cerr, b);
}

/// `--precision fp32|bf16` (empty: not given, fp32) into \p stream. Prints
/// the error and returns false on another value.
bool parsePrecisionFlag(const char *command, const std::string &text,
                        mtc::StreamOptions &stream) {
  if (text.empty() || mtc::bundle::parsePrecision(text, stream.precision))
    return true;
  error(std::string(command) + ": --precision expects fp32 or bf16, got '" +
        text + "'");
  return false;
}

/// The streaming flags of compile and plan.
void addStreamFlags(std::vector<Flag> &flags, mtc::StreamOptions &stream,
                    std::string &deviceMemory, std::string &checkpoints) {
  flags.push_back({Flag::String, "--device-memory", &deviceMemory});
  flags.push_back({Flag::Int, "--batch", &stream.batch, 1});
  flags.push_back({Flag::Int, "--seq", &stream.seq, 1});
  flags.push_back({Flag::Int, "--micro-batches", &stream.microBatches, 1});
  flags.push_back({Flag::Int, "--prefetch-depth", &stream.prefetchDepth, 1});
  flags.push_back({Flag::String, "--checkpoints", &checkpoints});
}

/// `--device cpu|cuda|cuda-emu` of compile and plan: the device the bundle
/// will run on. For the CUDA backend the fused regions are also emitted as
/// CUDA C (the bundle's cuda_kernels, docs/cuda.md). Prints the error and
/// returns false on an unknown device.
bool parseDeviceFlag(const char *command, const std::string &device,
                     mtc::CompileOptions &copts) {
  if (device != "cpu" && device != "cuda" && device != "cuda-emu") {
    error(std::string(command) +
          ": --device expects cpu, cuda or cuda-emu, got '" + device + "'");
    return false;
  }
  copts.cudaKernels = device != "cpu";
  return true;
}

/// `--recompute` and `--checkpoints` (empty: not given, the defaults stay)
/// into \p copts. Prints the error and returns false on an unknown value.
bool parsePolicyFlags(const std::string &recompute,
                      const std::string &checkpoints,
                      mtc::CompileOptions &copts) {
  if (!recompute.empty()) {
    llvm::Expected<mtc::RecomputePolicy> policy =
        mtc::parseRecomputePolicy(recompute);
    if (!policy) {
      error(llvm::toString(policy.takeError()));
      return false;
    }
    copts.recompute = *policy;
  }
  if (!checkpoints.empty()) {
    llvm::Expected<mtc::CheckpointPlacement> placement =
        mtc::parseCheckpointPlacement(checkpoints);
    if (!placement) {
      error(llvm::toString(placement.takeError()));
      return false;
    }
    copts.stream.checkpoints = *placement;
  }
  return true;
}

/// Parses --device-memory, turns streaming on when it is given (or \p
/// always), and picks the recompute default (auto with streaming, else
/// full). Prints the error and returns false on bad input.
bool finishStreamFlags(const char *command, const std::string &deviceMemory,
                       mtc::StreamOptions &stream, std::string &recompute,
                       bool always = false) {
  if (!deviceMemory.empty()) {
    llvm::Expected<int64_t> bytes = mtc::parseDeviceMemory(deviceMemory);
    if (!bytes) {
      error(std::string(command) +
            ": --device-memory: " + llvm::toString(bytes.takeError()));
      return false;
    }
    stream.deviceMemory = *bytes;
  }
  stream.enabled = always || !deviceMemory.empty();
  if (recompute.empty())
    recompute = stream.enabled ? "auto" : "full";
  if (recompute == "auto" && !stream.enabled) {
    error(std::string(command) +
          ": --recompute auto needs --device-memory (a streaming plan)");
    return false;
  }
  if (stream.enabled && (stream.batch < 1 || stream.seq < 1)) {
    error(std::string(command) + ": a streaming plan needs --batch N and "
                                 "--seq N");
    return false;
  }
  return true;
}

std::string withCommas(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

int runPlan(const std::vector<std::string> &args) {
  if (wantsHelp("plan", args))
    return 0;
  std::string recompute, hf, input, deviceMemory, checkpoints;
  mtc::CompileOptions copts;
  std::vector<std::string> pos, sets;
  std::string device = "cpu", precision;
  std::vector<Flag> flags = {{Flag::String, "--recompute", &recompute},
                             {Flag::String, "--hf", &hf},
                             {Flag::List, "--set", &sets},
                             {Flag::String, "--device", &device},
                             {Flag::String, "--precision", &precision}};
  addStreamFlags(flags, copts.stream, deviceMemory, checkpoints);
  if (!parseArgs("plan", args, flags, pos) ||
      !parseOverrides("plan", sets, copts.overrides) ||
      !parseDeviceFlag("plan", device, copts) ||
      !parsePrecisionFlag("plan", precision, copts.stream) ||
      !modelInput("plan", pos, hf, input) ||
      !finishStreamFlags("plan", deviceMemory, copts.stream, recompute,
                         /*always=*/true) ||
      !parsePolicyFlags(recompute, checkpoints, copts))
    return 1;
  std::string source, name;
  if (!hf.empty()) {
    if (!mtc::importHFModel(hf, source, name, std::cerr))
      return 1;
  } else {
    std::ifstream in;
    if (std::string why = openRegularFile(input, in); !why.empty())
      return error("plan: " + why);
    std::ostringstream ss;
    ss << in.rdbuf();
    source = ss.str();
    name = input;
  }
  mlir::MLIRContext context;
  mtc::CompiledModel compiled;
  if (!mtc::compileModelSource(source, name, copts, std::cerr,
                               mtc::CompileStage::Differentiated, context,
                               compiled))
    return 1;
  int64_t smallest = 0;
  if (!mtc::smallestDeviceMemory(source, name, copts, std::cerr, smallest))
    return 1;
  mtc::bundle::Bundle b;
  if (mlir::failed(mtc::translateToBundle(*compiled.module, b)) || !b.step)
    return error("plan: no step plan was built");
  if (mtc::Status st =
          mtc::bundle::checkTokenShapes(b, b.step->batch, b.step->seq);
      !st.ok())
    return error("plan: " + st.message());
  const mtc::bundle::StepPlan &step = *b.step;
  auto model = *compiled.module->getBody()->getOps<mtc::mt::ModelOp>().begin();
  llvm::Expected<mtc::analysis::ModelCost> analyzed =
      mtc::analysis::analyzeModel(
          model, {step.batch, step.seq, copts.stream.precision});
  if (!analyzed)
    return error("plan: " + llvm::toString(analyzed.takeError()));
  const mtc::analysis::ModelCost &cost = *analyzed;
  using mtc::analysis::formatByteSize;
  std::ostream &os = std::cout;
  int64_t params = cost.totalParams();
  os << "model " << cost.name << ": " << withCommas(params) << " parameters ("
     << withCommas(cost.modelParams) << " model-level)\n";
  for (const mtc::analysis::LayerCost &l : cost.layers)
    os << "  layer " << l.name << " x " << l.count << ": "
       << withCommas(l.params) << " parameters, "
       << formatByteSize(l.weightBytes) << " of weights per instance; per "
       << "micro-batch: checkpoint " << formatByteSize(l.checkpointBytes)
       << ", workspace " << formatByteSize(l.workspaceBytes) << ", forward "
       << withCommas(l.forwardFlops) << " FLOPs, recomputed "
       << withCommas(l.recomputeFlops) << " FLOPs\n";
  os << "step: " << step.microBatches << " micro-batch"
     << (step.microBatches == 1 ? "" : "es") << " of [" << step.batch << ", "
     << step.seq << "] tokens, prefetch depth " << step.prefetchDepth
     << ", recompute " << step.recompute << ", checkpoints "
     << step.checkpoints;
  if (step.precision != "fp32")
    os << ", precision " << step.precision
       << " (weights and activations bf16 on the device, gradients fp32)";
  os << "\n";
  {
    // What the policy costs by the cost model `--recompute auto` uses.
    mtc::analysis::PlanChoices choices;
    choices.microBatches = step.microBatches;
    choices.checkpointsOnHost = step.checkpoints == "host";
    choices.forwardLoops = mtc::analysis::forwardLoops(cost);
    mtc::analysis::DeviceRates rates;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "recompute cost: %.1f ms per step (cost model: %.0f "
                  "GFLOP/s, copies at %.0f GB/s)\n",
                  1e3 *
                      mtc::analysis::recomputeCostSeconds(cost, choices, rates),
                  rates.flopsPerSecond / 1e9, rates.copyBytesPerSecond / 1e9);
    os << buf;
  }
  os << "device budget: "
     << (step.deviceBudget ? formatByteSize(step.deviceBudget) + " (" +
                                 std::to_string(step.deviceBudget) + " bytes)"
                           : std::string("none given"))
     << "\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-18s %-14s %-7s %12s %12s  %s\n", "buffer",
                "kind", "space", "offset", "bytes", "size");
  os << line;
  for (const mtc::bundle::PlanBuffer &buf : step.buffers) {
    std::string offset =
        buf.space == "device" ? std::to_string(buf.offset) : "-";
    std::snprintf(line, sizeof line, "%-18s %-14s %-7s %12s %12lld  %s\n",
                  buf.name.c_str(), buf.kind.c_str(), buf.space.c_str(),
                  offset.c_str(), (long long)buf.bytes,
                  formatByteSize(buf.bytes).c_str());
    os << line;
  }
  os << "device peak: " << formatByteSize(step.devicePeak, true) << " ("
     << step.devicePeak << " bytes)";
  if (step.deviceBudget)
    os << " of " << formatByteSize(step.deviceBudget);
  os << "\n";
  int64_t n = cost.totalInstances();
  int64_t resident = std::min<int64_t>(step.prefetchDepth, n);
  int64_t loads = 2 * n - resident;
  int64_t loadBytes = 0;
  for (const mtc::analysis::LayerCost &l : cost.layers)
    loadBytes += 2 * l.count * l.weightBytes;
  // The last `resident` instances of the forward stay for the backward;
  // approximate their bytes with the largest layer's.
  int64_t largest = 0;
  for (const mtc::analysis::LayerCost &l : cost.layers)
    largest = std::max(largest, l.weightBytes);
  loadBytes -= resident * largest;
  os << "weight loads per step: " << loads << " layer instances (2 x " << n
     << " - " << resident << " resident at the forward/backward turnaround), "
     << formatByteSize(loadBytes) << " host to device, + "
     << formatByteSize(cost.modelWeightBytes) << " model-level\n";
  const mtc::bundle::PlanBuffer *host = step.buffer("checkpoints.host");
  int64_t hostCkpt = host ? host->bytes : 0;
  os << "host memory: 16 B/param (fp32 value, gradient, AdamW m and v) x "
     << withCommas(params) << " = " << formatByteSize(16 * params)
     << "; checkpoints.host " << formatByteSize(hostCkpt) << " ("
     << formatByteSize(hostCkpt / step.microBatches) << " per micro-batch)";
  if (const mtc::bundle::PlanBuffer *acts = step.buffer("activations.host"))
    os << "; activations.host " << formatByteSize(acts->bytes)
       << " (the boundary activations of every micro-batch wait there)";
  os << "\n";
  os << "smallest feasible device memory with these options: "
     << formatByteSize(smallest, true) << "\n\n";
  os << "device_peak_bytes: " << step.devicePeak << "\n";
  os << "min_device_memory: " << smallest << "\n";
  os << "host_bytes_per_param: 16\n";
  os << "host_checkpoint_bytes: " << hostCkpt << "\n";
  return 0;
}

int runImportHF(const std::vector<std::string> &args) {
  if (wantsHelp("import-hf", args))
    return 0;
  std::string output, input;
  std::vector<std::string> pos, normalized;
  for (const std::string &a : args)
    normalized.push_back(a == "-o" ? "--output" : a);
  if (!parseArgs("import-hf", normalized, {{Flag::String, "--output", &output}},
                 pos) ||
      !onePositional("import-hf", pos, input))
    return 1;
  if (mtc::Status st = mtc::checkOutputs(
          {{"-o", output}}, {{"the config", mtc::hfConfigPath(input)}});
      !st.ok())
    return error("import-hf: " + st.message());
  mtc::Expected<mtc::HFImportResult> imported =
      mtc::importHFConfig(mtc::hfConfigPath(input));
  if (!imported)
    return error(imported.message());
  for (const std::string &w : imported->warnings)
    std::cerr << "mtc: warning: " << w << "\n";
  return writeOutput(output, imported->source) ? 0 : 1;
}

int runExportHF(const std::vector<std::string> &args) {
  if (wantsHelp("export-hf", args))
    return 0;
  std::string output, input, dtype = "f32", shard;
  std::vector<std::string> pos, normalized;
  for (const std::string &a : args)
    normalized.push_back(a == "-o" ? "--output" : a);
  if (!parseArgs("export-hf", normalized,
                 {{Flag::String, "--output", &output},
                  {Flag::String, "--dtype", &dtype},
                  {Flag::String, "--max-shard-size", &shard}},
                 pos) ||
      !onePositional("export-hf", pos, input))
    return 1;
  if (output.empty())
    return error("export-hf: -o DIR is required");
  mtc::driver::HFExportOptions opts;
  if (dtype == "f32")
    opts.dtype = mtc::TensorDType::F32;
  else if (dtype == "bf16")
    opts.dtype = mtc::TensorDType::BF16;
  else
    return error("export-hf: --dtype expects f32 or bf16, got '" + dtype + "'");
  if (!shard.empty()) {
    // parseDeviceMemory refuses sizes that are not positive.
    llvm::Expected<int64_t> bytes = mtc::parseDeviceMemory(shard);
    if (!bytes)
      return error("export-hf: --max-shard-size: " +
                   llvm::toString(bytes.takeError()));
    opts.maxShardBytes = static_cast<uint64_t>(*bytes);
  }
  std::vector<std::string> written;
  if (mtc::Status st = mtc::driver::exportHF(input, output, opts, &written);
      !st.ok())
    return error(st.message());
  for (const std::string &f : written)
    std::cout << "wrote " << f << "\n";
  return 0;
}

/// The ids of --decode's input: an llm.c token file, or integers separated
/// by whitespace or commas.
bool parseIds(const std::string &name, const std::string &bytes,
              std::vector<uint32_t> &ids) {
  size_t pos = 0, n = bytes.size();
  while (pos < n) {
    char c = bytes[pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
      ++pos;
      continue;
    }
    size_t start = pos;
    uint64_t v = 0;
    while (pos < n && bytes[pos] >= '0' && bytes[pos] <= '9' &&
           v <= 0xFFFFFFFFull)
      v = v * 10 + static_cast<uint64_t>(bytes[pos++] - '0');
    bool sep = pos == n || bytes[pos] == ' ' || bytes[pos] == '\t' ||
               bytes[pos] == '\n' || bytes[pos] == '\r' || bytes[pos] == ',';
    if (pos == start || !sep || v > 0xFFFFFFFFull) {
      size_t end = bytes.find_first_of(" \t\r\n,", start);
      error("tokenize: " + name + ": '" +
            bytes.substr(start, std::min<size_t>(end - start, 20)) +
            "' at byte " + std::to_string(start) + " is not a token id");
      return false;
    }
    ids.push_back(static_cast<uint32_t>(v));
  }
  return true;
}

/// `mtc tokenize` of instruction data (a .jsonl): ids and a loss mask.
int tokenizeInstructions(const mtc::tok::Tokenizer &tok,
                         const std::string &tokPath,
                         const std::string &chatTemplate,
                         const std::string &input, const std::string &output,
                         bool print) {
  mtc::Expected<mtc::tok::ChatFormat> fmt =
      mtc::tok::loadChatFormat(tok, tokPath, chatTemplate);
  if (!fmt)
    return error("tokenize: " + fmt.message());
  std::ifstream in;
  if (std::string why = openRegularFile(input, in); !why.empty())
    return error("tokenize: " + why);
  std::vector<uint32_t> ids;
  std::vector<uint8_t> mask;
  std::string line;
  size_t lineNo = 0, examples = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;
    std::string where = input + ":" + std::to_string(lineNo) + ": ";
    mtc::Expected<std::vector<mtc::tok::ChatMessage>> msgs =
        mtc::tok::parseInstructionLine(line);
    if (!msgs)
      return error("tokenize: " + where + msgs.message());
    mtc::Expected<mtc::tok::EncodedConversation> enc =
        mtc::tok::encodeConversation(tok, *fmt, *msgs);
    if (!enc)
      return error("tokenize: " + where + enc.message());
    if (print) {
      std::string out;
      for (size_t i = 0; i < enc->ids.size(); ++i) {
        if (i)
          out += ' ';
        std::string id = std::to_string(enc->ids[i]);
        out += enc->mask[i] ? id : "[" + id + "]";
      }
      std::cout << out << "\n";
    }
    ids.insert(ids.end(), enc->ids.begin(), enc->ids.end());
    mask.insert(mask.end(), enc->mask.begin(), enc->mask.end());
    ++examples;
  }
  if (examples == 0)
    return error("tokenize: " + input + ": no examples");
  size_t trained = 0;
  for (uint8_t m : mask)
    trained += m;
  if (!output.empty()) {
    int version = 0;
    mtc::Status s =
        mtc::tok::writeTokenFile(output, ids, tok.vocabSize(), &version);
    if (s.ok())
      s = mtc::tok::writeLossMask(mtc::tok::lossMaskPath(output), mask);
    if (!s)
      return error(s.message());
    (print ? std::cerr : std::cout)
        << "wrote " << output << ": " << ids.size() << " tokens ("
        << (version == 1 ? "uint16" : "uint32") << ", llm.c version " << version
        << ") from " << examples << " examples, " << trained
        << " trained; loss mask " << mtc::tok::lossMaskPath(output)
        << "; chat template: " << fmt->origin << "\n";
  }
  return 0;
}

int runTokenize(const std::vector<std::string> &args) {
  if (wantsHelp("tokenize", args))
    return 0;
  bool print = false, decode = false, addSpecial = false, skipSpecial = false;
  std::vector<std::string> normalized, pos;
  for (const std::string &a : args) {
    if (a == "--print")
      print = true;
    else if (a == "--decode")
      decode = true;
    else if (a == "--add-special-tokens")
      addSpecial = true;
    else if (a == "--skip-special-tokens")
      skipSpecial = true;
    else
      normalized.push_back(a == "-o" ? "--output" : a);
  }
  std::string tokPath, output, text, chatTemplate;
  std::set<std::string> given;
  if (!parseArgs("tokenize", normalized,
                 {{Flag::String, "--tokenizer", &tokPath},
                  {Flag::String, "--output", &output},
                  {Flag::Text, "--text", &text},
                  {Flag::String, "--chat-template", &chatTemplate}},
                 pos, &given))
    return 1;
  if (tokPath.empty())
    return error("tokenize: --tokenizer DIR|tokenizer.json is required\n"
                 "usage: " +
                 std::string(findCommand("tokenize")->usage));
  bool fromText = given.count("--text") != 0;
  std::string input;
  if (fromText) {
    if (!pos.empty())
      return error("tokenize: give either an input file or --text, not both");
    input = "--text";
  } else if (!onePositional("tokenize", pos, input)) {
    return 1;
  }
  if (decode && addSpecial)
    return error("tokenize: --add-special-tokens is for encoding; --decode "
                 "takes --skip-special-tokens");
  if (!decode && skipSpecial)
    return error("tokenize: --skip-special-tokens needs --decode");
  if (!decode && output.empty() && !print)
    return error("tokenize: nothing to do: give -o OUT.bin and/or --print");

  bool jsonl = !fromText && input.size() > 6 &&
               input.compare(input.size() - 6, 6, ".jsonl") == 0;
  if (given.count("--chat-template") && !jsonl)
    return error("tokenize: --chat-template is for instruction data "
                 "(a .jsonl input)");
  if (jsonl && (decode || addSpecial))
    return error(std::string("tokenize: ") +
                 (decode ? "--decode" : "--add-special-tokens") +
                 " does not apply to instruction data (.jsonl): the chat "
                 "template places the special tokens");

  {
    std::vector<mtc::NamedPath> inputs = {
        {"--tokenizer", mtc::tok::tokenizerJsonPath(tokPath)},
        {"--chat-template", chatTemplate}};
    if (!fromText)
      inputs.push_back({"the input", input});
    std::vector<mtc::NamedPath> outputs = {{"-o", output}};
    if (jsonl && !output.empty())
      outputs.push_back({"the loss mask", mtc::tok::lossMaskPath(output)});
    if (mtc::Status st = mtc::checkOutputs(outputs, inputs); !st.ok())
      return error("tokenize: " + st.message());
  }
  mtc::Expected<mtc::tok::Tokenizer> tok = mtc::tok::Tokenizer::load(tokPath);
  if (!tok)
    return error(tok.message());
  if (jsonl)
    return tokenizeInstructions(*tok, tokPath, chatTemplate, input, output,
                                print);

  std::string bytes;
  if (fromText) {
    bytes = text;
  } else {
    std::ifstream in;
    if (std::string why = openRegularFile(input, in); !why.empty())
      return error("tokenize: " + why);
    std::ostringstream ss;
    ss << in.rdbuf();
    bytes = ss.str();
  }

  if (decode) {
    std::vector<uint32_t> ids;
    int32_t magic = 0;
    if (bytes.size() >= 4)
      std::memcpy(&magic, bytes.data(), 4);
    if (!fromText && magic == mtc::tok::kTokenFileMagic) {
      mtc::Expected<std::vector<uint32_t>> r = mtc::tok::readTokenFile(input);
      if (!r)
        return error(r.message());
      ids = std::move(*r);
    } else if (!parseIds(input, bytes, ids)) {
      return 1;
    }
    uint32_t vocab = tok->vocabSize();
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= vocab || !tok->idToToken(ids[i]))
        return error("tokenize: " + input + ": token " +
                     std::to_string(ids[i]) + " at position " +
                     std::to_string(i) + " is not in the vocabulary of " +
                     tok->name() + " (size " + std::to_string(vocab) + ")");
    mtc::Expected<std::string> out = tok->decodeChecked(ids, skipSpecial);
    if (!out)
      return error("tokenize: " + input + ": " + out.message());
    return writeOutput(output, *out) ? 0 : 1;
  }

  mtc::Expected<std::vector<uint32_t>> ids = tok->encode(bytes, addSpecial);
  if (!ids)
    return error("tokenize: " + input + ": " + ids.message());
  if (print) {
    std::string line;
    for (size_t i = 0; i < ids->size(); ++i) {
      if (i)
        line += ' ';
      line += std::to_string((*ids)[i]);
    }
    std::cout << line << "\n";
  }
  if (!output.empty()) {
    int version = 0;
    mtc::Status s =
        mtc::tok::writeTokenFile(output, *ids, tok->vocabSize(), &version);
    if (!s)
      return error(s.message());
    (print ? std::cerr : std::cout)
        << "wrote " << output << ": " << ids->size() << " tokens ("
        << (version == 1 ? "uint16" : "uint32") << ", llm.c version " << version
        << ") from " << bytes.size() << " bytes; vocabulary "
        << tok->vocabSize() << " (" << tok->describe() << ")\n";
  }
  return 0;
}

int runCompile(const std::vector<std::string> &args) {
  if (wantsHelp("compile", args))
    return 0;
  std::string emit, output, input, cpu, recompute, hf, target = "cpu",
                                                       arch = "sm_90";
  mtc::ConfigOverrides overrides;
  mtc::StreamOptions stream;
  std::vector<std::string> pos;
  std::vector<std::string> normalized;
  for (const std::string &a : args) // `-o FILE` is the one short flag
    normalized.push_back(a == "-o" ? "--output" : a);
  std::vector<std::string> sets;
  std::string device = "cpu";
  mtc::CompileOptions copts;
  std::vector<Flag> flags = {{Flag::String, "--emit", &emit},
                             {Flag::String, "--output", &output},
                             {Flag::String, "--cpu", &cpu},
                             {Flag::String, "--recompute", &recompute},
                             {Flag::String, "--hf", &hf},
                             {Flag::List, "--set", &sets},
                             {Flag::String, "--device", &device},
                             {Flag::String, "--target", &target},
                             {Flag::String, "--arch", &arch}};
  std::string deviceMemory, checkpoints, precision;
  flags.push_back({Flag::String, "--precision", &precision});
  addStreamFlags(flags, stream, deviceMemory, checkpoints);
  if (!parseArgs("compile", normalized, flags, pos) ||
      !parseOverrides("compile", sets, overrides) ||
      !parsePrecisionFlag("compile", precision, stream) ||
      !finishStreamFlags("compile", deviceMemory, stream, recompute))
    return 1;
  if (!parseDeviceFlag("compile", device, copts))
    return 1;
  if (target != "cpu" && target != "cuda")
    return error("compile: --target expects cpu or cuda, got '" + target + "'");
  if (target == "cuda")
    copts.cudaKernels = true;
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0 ||
      arch.find_first_not_of("0123456789", 3) != std::string::npos)
    return error("compile: --arch expects sm_XY (sm_80, sm_90), got '" + arch +
                 "'");
  if (!hf.empty() && !pos.empty())
    return error("compile: give either a model file or --hf DIR, not both");
  if (!hf.empty())
    pos.push_back(hf);
  if (pos.empty())
    return error("compile: no input file\nusage: " +
                 std::string(findCommand("compile")->usage));
  if (pos.size() > 1)
    return error("compile: more than one input file ('" + pos[0] + "', '" +
                 pos[1] + "')");
  input = pos[0];
  {
    std::vector<mtc::NamedPath> inputs;
    for (const std::string &f : modelFiles(input, hf))
      inputs.push_back({"the model", f});
    if (mtc::Status st = mtc::checkOutputs({{"-o", output}}, inputs); !st.ok())
      return error("compile: " + st.message());
  }
  if (emit.empty()) {
    bool toBundle =
        output.size() > 4 && output.compare(output.size() - 4, 4, ".mtb") == 0;
    emit = toBundle ? "bundle" : "summary";
  }
  using Stage = mtc::CompileStage;
  const std::pair<const char *, Stage> stages[] = {
      {"ast", Stage::Parsed},     {"summary", Stage::Checked},
      {"mlir", Stage::Lowered},   {"mlir-grad", Stage::Differentiated},
      {"bundle", Stage::Bundled}, {"cuda", Stage::Bundled},
      {"ptx", Stage::Bundled},    {"kernel-stats", Stage::Bundled}};
  const Stage *stage = nullptr;
  for (const auto &[name, st] : stages)
    if (emit == name)
      stage = &st;
  if (!stage)
    return error("compile: unknown --emit value '" + emit +
                 "' (expected ast, mlir, mlir-grad, summary, bundle, cuda, "
                 "ptx or kernel-stats)");
  bool cudaEmit = emit == "cuda" || emit == "ptx" || emit == "kernel-stats";
  if (cudaEmit && !copts.cudaKernels)
    return error("compile: --emit=" + emit +
                 " prints the CUDA kernels: give --target cuda");

  mlir::MLIRContext context;
  mtc::CompiledModel compiled;
  copts.overrides = overrides;
  copts.cpu = cpu;
  copts.stream = stream;
  if (!parsePolicyFlags(recompute, checkpoints, copts))
    return 1;
  if (!hf.empty()) {
    std::string source, name;
    mtc::HFNameMap names;
    if (!mtc::importHFModel(hf, source, name, std::cerr, &names) ||
        !mtc::compileModelSource(source, name, copts, std::cerr, *stage,
                                 context, compiled))
      return 1;
    if (*stage == Stage::Bundled) {
      mtc::attachHFNames(compiled.bundle, names);
      mtc::attachHFConfig(compiled.bundle, hf);
    }
  } else if (!mtc::compileModelFile(input, copts, std::cerr, *stage, context,
                                    compiled)) {
    return 1;
  }
  std::ostringstream os;
  switch (*stage) {
  case Stage::Parsed:
    mtc::printAST(*compiled.ast, os);
    break;
  case Stage::Checked:
    mtc::printSummary(compiled.checked, os);
    break;
  case Stage::Lowered:
  case Stage::Differentiated: {
    std::string text;
    llvm::raw_string_ostream ts(text);
    compiled.module->print(ts);
    ts.flush();
    os << text;
    break;
  }
  case Stage::Bundled:
    if (cudaEmit) {
      if (mtc::Status st = mtc::emitCuda(compiled.bundle, emit, arch, os);
          !st.ok())
        return error("compile: " + st.message());
      break;
    }
    os << mtc::bundle::toJson(compiled.bundle);
    break;
  }
  return writeOutput(output, os.str()) ? 0 : 1;
}

int runGradCheck(const std::vector<std::string> &args) {
  if (wantsHelp("gradcheck", args))
    return 0;
  mtc::CompileOptions copts;
  mtc::driver::GradCheckOptions opts;
  int64_t coords = opts.coordinates;
  std::vector<std::string> pos;
  std::string input, hf, recompute;
  std::vector<std::string> sets;
  if (!parseArgs("gradcheck", args,
                 {{Flag::Int, "--batch", &opts.batch, 1},
                  {Flag::Int, "--seq", &opts.seq, 1},
                  {Flag::Uint, "--seed", &opts.seed, 0},
                  {Flag::Double, "--tolerance", &opts.tolerance, 0},
                  {Flag::Double, "--step", &opts.step, 1e-12},
                  {Flag::Int, "--coordinates", &coords, 0},
                  {Flag::String, "--tensors", &opts.tensors},
                  {Flag::List, "--set", &sets},
                  {Flag::String, "--recompute", &recompute},
                  {Flag::String, "--cpu", &copts.cpu},
                  {Flag::String, "--hf", &hf}},
                 pos) ||
      !parseOverrides("gradcheck", sets, copts.overrides) ||
      !modelInput("gradcheck", pos, hf, input) ||
      !parsePolicyFlags(recompute, "", copts))
    return 1;
  opts.coordinates = static_cast<int>(coords);
  mtc::bundle::Bundle b;
  if (!loadInput(input, hf, copts, b))
    return 1;
  if (mtc::Status st = mtc::bundle::checkTokenShapes(b, opts.batch, opts.seq);
      !st.ok())
    return error("gradcheck: " + st.message());
  if (!hf.empty())
    opts.hfWeights = mtc::driver::hfWeightsPath(hf);
  int failures = mtc::driver::gradCheck(b, opts, std::cout, std::cerr);
  return failures == 0 ? 0 : 1;
}

int runTrain(const std::vector<std::string> &args) {
  if (wantsHelp("train", args))
    return 0;
  mtc::driver::TrainCommand cmd;
  if (mtc::Status st = mtc::driver::parseTrainCommand(kTool, args, cmd);
      !st.ok())
    return error(st.message());
  mtc::driver::TrainOptions &opts = cmd.opts;
  const std::string &input = cmd.input, &hf = cmd.hf;
  // A bundle (MODEL.mtb, or the checkpoint's with --resume) runs as mtc-run
  // runs it; what follows compiles .mt source or --hf DIR for this run.
  if (hf.empty() && mtc::driver::isBundlePath(input))
    return mtc::driver::trainBundle(kTool, cmd, std::cout, std::cerr);
  mtc::CompileOptions copts;
  copts.cpu = cmd.cpu;
  copts.stream.prefetchDepth = cmd.prefetchDepth;
  if (!parseOverrides("train", cmd.sets, copts.overrides))
    return 1;
  std::string deviceMemory = cmd.deviceMemory, recompute = cmd.recompute;
  if (!parsePrecisionFlag("train", cmd.precision, copts.stream))
    return 1;
  if (copts.stream.precision == mtc::bundle::Precision::BF16 &&
      opts.device == "cpu")
    return error("train: --precision bf16 runs on --device cuda or cuda-emu; "
                 "the CPU device computes and stores fp32 (--precision fp32)");
  if (opts.device != "cpu") {
    if (deviceMemory.empty())
      return error("train: --device " + opts.device +
                   " runs a streaming step plan: give its budget with "
                   "--device-memory SIZE");
    // The CUDA backend runs the fused regions as CUDA C (docs/cuda.md).
    copts.cudaKernels = true;
  }
  // Streaming: the step plan is compiled for this run's micro-batch shape.
  copts.stream.batch = opts.batch;
  copts.stream.seq = opts.seq;
  copts.stream.microBatches = opts.microBatches;
  // Without a device budget and without --recompute, keep the activations
  // (recompute none: no forward recomputed in the backward, as PyTorch eager
  // does) when that fits comfortably in host memory; else keep the matmul
  // and attention results (selective) when those fit; else recompute whole
  // layers.
  bool keepActivations = recompute.empty() && deviceMemory.empty();
  if (keepActivations)
    recompute = "none";
  if (!finishStreamFlags("train", deviceMemory, copts.stream, recompute))
    return 1;
  opts.deviceMemory = copts.stream.deviceMemory;
  if (!parsePolicyFlags(recompute, cmd.checkpoints, copts))
    return 1;
  mtc::bundle::Bundle b;
  if (!loadInput(input, hf, copts, b))
    return 1;
  if (keepActivations) {
    double need = mtc::driver::trainingHostBytes(b, opts.batch, opts.seq);
    double avail = mtc::driver::hostMemoryAvailable();
    auto mib = [](double bytes) {
      return std::to_string(static_cast<int64_t>(bytes / (1 << 20)));
    };
    if (avail > 0 && need > 0.5 * avail) {
      copts.recompute = mtc::RecomputePolicy::Selective;
      mtc::bundle::Bundle selective;
      if (!loadInput(input, hf, copts, selective))
        return 1;
      double some =
          mtc::driver::trainingHostBytes(selective, opts.batch, opts.seq);
      std::cout << "note: keeping every activation would need " << mib(need)
                << " MiB of the " << mib(avail) << " MiB available; ";
      if (some <= 0.5 * avail) {
        std::cout << "keeping the matmul and attention results (" << mib(some)
                  << " MiB) and recomputing the rest (--recompute "
                     "selective)\n";
        b = std::move(selective);
      } else {
        std::cout << "recomputing layers in the backward (--recompute "
                     "full)\n";
        copts.recompute = mtc::RecomputePolicy::Full;
        mtc::bundle::Bundle full;
        if (!loadInput(input, hf, copts, full))
          return 1;
        b = std::move(full);
      }
    }
  }
  if (!b.step && (!deviceMemory.empty() || !opts.trace.empty()))
    return error("train: --device-memory and --trace need a step plan; '" +
                 input +
                 "' is a bundle without one (compile it with "
                 "mtc compile --device-memory ...)");
  if (!hf.empty())
    opts.hfWeights = mtc::driver::hfWeightsPath(hf);
  opts.modelFiles = modelFiles(input, hf);
  return mtc::driver::train(b, opts, std::cout, std::cerr);
}

int runGenerate(const std::vector<std::string> &args) {
  if (wantsHelp("generate", args))
    return 0;
  return mtc::driver::runGenerateCommand(kTool, args, std::cout, std::cerr);
}

int runHelp(const std::vector<std::string> &args) {
  if (args.empty()) {
    printUsage(std::cout);
    return 0;
  }
  const Command *c = findCommand(args[0]);
  if (!c)
    return error("unknown command '" + args[0] + "'");
  std::cout << "usage: " << c->usage << "\n" << c->summary << "\n";
  if (!c->details.empty())
    std::cout << "\n" << c->details << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    printUsage(std::cerr);
    return 1;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h") {
    printUsage(std::cout);
    return 0;
  }
  const Command *command = findCommand(name);
  if (!command) {
    std::cerr << "mtc: error: unknown command '" << name << "'\n\n";
    printUsage(std::cerr);
    return 1;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  return command->run(args);
}
