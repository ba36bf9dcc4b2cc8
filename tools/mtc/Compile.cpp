//===- Compile.cpp - mtc compile --------------------------------*- C++ -*-===//
//
// Part of mtc. `mtc compile MODEL ...`: a model (.mt or --hf DIR) to a
// bundle, or any stage of the pipeline printed.
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/CudaEmit.h"
#include "tools/mtc/Tool.h"

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/BundleWriter.h"
#include "frontend/ASTPrinter.h"
#include "frontend/Summary.h"
#include "lib/Support/Files.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace mtc::cli {

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
  std::string device = "cpu", gpu;
  mtc::driver::DeviceKind kind = mtc::driver::DeviceKind::Cpu;
  mtc::CompileOptions copts;
  std::vector<Flag> flags = {{Flag::String, "--emit", &emit},
                             {Flag::String, "--output", &output},
                             {Flag::String, "--cpu", &cpu},
                             {Flag::String, "--recompute", &recompute},
                             {Flag::String, "--hf", &hf},
                             {Flag::List, "--set", &sets},
                             {Flag::String, "--device", &device},
                             {Flag::String, "--gpu", &gpu},
                             {Flag::String, "--target", &target},
                             {Flag::String, "--arch", &arch}};
  std::string deviceMemory, checkpoints, precision, hostMemory;
  flags.push_back({Flag::String, "--precision", &precision});
  OptimizerFlags optimizer;
  addStreamFlags(flags, stream, deviceMemory, checkpoints, hostMemory,
                 optimizer);
  if (!parseArgs("compile", normalized, flags, pos) ||
      !parseOverrides("compile", sets, overrides) ||
      !parsePrecisionFlag("compile", precision, stream) ||
      !parseDeviceFlag("compile", device, kind, copts) ||
      !resolveAutoDeviceMemory("compile", kind, deviceMemory) ||
      !finishStreamFlags("compile", deviceMemory, hostMemory, stream,
                         recompute) ||
      !finishOptimizerFlags("compile", optimizer, stream))
    return 1;
  if (!parseGpuFlag("compile", kind, gpu, copts))
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

} // namespace mtc::cli
