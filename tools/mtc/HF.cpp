//===- HF.cpp - mtc import-hf and export-hf ---------------------*- C++ -*-===//
//
// Part of mtc. `mtc import-hf DIR` (config.json to the DSL) and
// `mtc export-hf CHECKPOINT` (a checkpoint as a HuggingFace directory).
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/Tool.h"

#include "frontend/HFImport.h"
#include "lib/Support/Files.h"
#include "runtime/hf/HFExport.h"

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

namespace mtc::cli {

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

} // namespace mtc::cli
