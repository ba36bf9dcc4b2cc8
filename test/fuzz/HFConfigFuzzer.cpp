//===- HFConfigFuzzer.cpp - libFuzzer target for import-hf ------*- C++ -*-===//
//
// Part of mtc. Feeds arbitrary text to importHFConfigText (the HuggingFace
// config.json importer). Every input must end in .mt source or an error
// message, and source the importer produces must parse and check without
// errors: an import that succeeds with invalid source is a bug.
//
//===----------------------------------------------------------------------===//

#include "frontend/HFImport.h"
#include "frontend/Parser.h"
#include "frontend/Sema.h"
#include "lib/Support/Diagnostics.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  mtc::Expected<mtc::HFImportResult> imported =
      mtc::importHFConfigText(text, "fuzz/config.json");
  if (!imported) {
    if (imported.message().empty()) {
      std::fprintf(stderr,
                   "hfconfig fuzzer: import failed without a message\n");
      __builtin_trap();
    }
    return 0;
  }
  std::ostringstream sink;
  const std::string &source = imported->source;
  mtc::DiagnosticEngine diags("imported.mt", source, sink);
  mtc::CheckedModel model;
  bool ok = mtc::parseAndCheck(diags, model);
  if (!ok || diags.hasErrors()) {
    std::fprintf(stderr,
                 "hfconfig fuzzer: the importer accepted the config but its "
                 ".mt source does not check:\n%s\n--- source ---\n%s\n",
                 sink.str().c_str(), source.c_str());
    __builtin_trap();
  }
  return 0;
}
