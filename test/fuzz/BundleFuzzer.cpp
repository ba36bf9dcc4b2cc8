//===- BundleFuzzer.cpp - libFuzzer target for .mtb bundles -----*- C++ -*-===//
//
// Part of mtc. Feeds arbitrary text to bundle::fromJson. Every input must end
// in a bundle or an error message, and an accepted bundle must round-trip:
// toJson of it parses again, and the second toJson is the same text.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Bundle.h"

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
  Bundle b;
  std::string err;
  if (!fromJson(text, b, err)) {
    if (err.empty())
      bug("fromJson failed without a message", "");
    return 0;
  }
  // The accessors the runtime calls first.
  (void)b.vocabulary();
  for (const Layer &l : b.layers)
    for (const Expert &e : l.experts)
      if (l.expert(e.name) == nullptr)
        bug("Layer::expert does not find a listed expert", e.name);

  std::string once = toJson(b);
  Bundle again;
  std::string err2;
  if (!fromJson(once, again, err2))
    bug("toJson of an accepted bundle does not parse again", err2);
  std::string twice = toJson(again);
  if (once != twice)
    bug("toJson -> fromJson -> toJson is not the identity", once);
  return 0;
}
