//===- ParserFuzzer.cpp - libFuzzer target for the .mt frontend -*- C++ -*-===//
//
// Part of mtc. Feeds arbitrary bytes through the parser and Sema. Any crash,
// sanitizer report, leak or hang is a bug: every input must end in either a
// checked model or diagnostics.
//
//===----------------------------------------------------------------------===//

#include "frontend/Parser.h"
#include "frontend/Sema.h"
#include "lib/Support/Diagnostics.h"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string source(reinterpret_cast<const char *>(data), size);
  std::ostringstream sink;
  mtc::DiagnosticEngine diags("fuzz.mt", source, sink);
  mtc::CheckedModel model;
  bool ok = mtc::parseAndCheck(diags, model);
  // A successful check must have produced no errors, and a failed one some.
  if (ok == diags.hasErrors())
    __builtin_trap();
  return 0;
}
