//===- BundleFuzzer.cpp - libFuzzer target for .mtb bundles -----*- C++ -*-===//
//
// Part of mtc. Feeds arbitrary text to bundle::fromJson, which parses and then
// validates (lib/Bundle/Validate.h), so the validator is fuzzed on every input
// that parses. Every input must end in a bundle or an error message. An
// accepted bundle must pass bundle::validate again, what the runtime computes
// from a bundle before running it (the vocabulary, the workspace plan of
// every layer function) must not crash, and it must round-trip: toJson of it
// parses again, and the second toJson is the same text.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Bundle.h"
#include "lib/Bundle/Plan.h"
#include "lib/Bundle/Validate.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

using namespace mtc::bundle;

[[noreturn]] static void bug(const char *what, const std::string &detail) {
  std::fprintf(stderr, "bundle fuzzer: %s\n%s\n", what, detail.c_str());
  __builtin_trap();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  mtc::Expected<Bundle> read = fromJson(text);
  if (!read) {
    if (read.message().empty())
      bug("fromJson failed without a message", "");
    return 0;
  }
  const Bundle &b = *read;
  // fromJson validated it: validating again must agree.
  if (mtc::Status valid = validate(b); !valid)
    bug("fromJson accepted a bundle that does not validate", valid.message());

  // The accessors and the planning the runtime runs first.
  (void)b.vocabulary();
  for (const Layer &l : b.layers) {
    for (const Expert &e : l.experts)
      if (l.expert(e.name) == nullptr)
        bug("Layer::expert does not find a listed expert", e.name);
    for (const auto &[name, fn] : l.functions)
      (void)planLayerFunction(b, l.name, fn, 2, 3);
  }

  std::string once = toJson(b);
  mtc::Expected<Bundle> again = fromJson(once);
  if (!again)
    bug("toJson of an accepted bundle does not parse again", again.message());
  std::string twice = toJson(*again);
  if (once != twice)
    bug("toJson -> fromJson -> toJson is not the identity", once);
  return 0;
}
