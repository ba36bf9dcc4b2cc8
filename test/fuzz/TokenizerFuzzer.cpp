//===- TokenizerFuzzer.cpp - libFuzzer target for tokenizer.json -*- C++
//-*-===//
//
// Part of mtc. Feeds arbitrary bytes to Tokenizer::fromJson (lib/Tokenizer).
// The input is a tokenizer.json, optionally followed by a NUL byte and a text
// to encode (otherwise a few fixed strings are encoded). Every input must
// load or fail with a message; a loaded tokenizer must encode every text to
// ids below vocabSize() (or fail with a message: invalid UTF-8, a regex over
// its step budget), and decode any ids without crashing.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/Tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

[[noreturn]] void bug(const char *what) {
  std::fprintf(stderr, "tokenizer fuzzer: %s\n", what);
  __builtin_trap();
}

void exercise(const mtc::tok::Tokenizer &tok, const std::string &text) {
  for (bool special : {false, true}) {
    mtc::Expected<std::vector<uint32_t>> ids = tok.encode(text, special);
    if (!ids) {
      if (ids.message().empty())
        bug("encode failed without a message");
      continue;
    }
    for (uint32_t id : *ids)
      if (id >= tok.vocabSize())
        bug("encode produced an id outside the vocabulary");
    mtc::Expected<std::string> back = tok.decodeChecked(*ids, special);
    if (!back && back.message().empty())
      bug("decode failed without a message");
    (void)tok.decode(*ids, !special);
  }
  // Arbitrary ids, in and out of the vocabulary.
  std::vector<uint32_t> ids;
  for (unsigned char c : text)
    ids.push_back(c % (tok.vocabSize() + 3));
  (void)tok.decode(ids, false);
  (void)tok.decode(ids, true);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string input(reinterpret_cast<const char *>(data), size);
  size_t nul = input.find('\0');
  std::string json = input.substr(0, nul);
  mtc::Expected<mtc::tok::Tokenizer> tok =
      mtc::tok::Tokenizer::fromJson(json, "fuzz/tokenizer.json");
  if (!tok) {
    if (tok.message().empty())
      bug("load failed without a message");
    return 0;
  }
  if (nul != std::string::npos) {
    exercise(*tok, input.substr(nul + 1));
    return 0;
  }
  for (const char *text :
       {"Hello world! It's 2024.\n  Caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC "
        "\xF0\x9F\x98\x80 <|endoftext|><s>end</s>",
        "", " ", "a\n\n\tb  c", "\xFF invalid"})
    exercise(*tok, text);
  return 0;
}
