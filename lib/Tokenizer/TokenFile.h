//===- TokenFile.h - llm.c token files --------------------------*- C++ -*-===//
//
// Part of mtc. Writing and reading the llm.c token files that `mtc train
// --data` reads (runtime/train/Data.h):
//
//   256 int32 header: [0] magic 20240520, [1] version (1: uint16 tokens,
//   2: uint32 tokens), [2] token count; then the tokens, little-endian
//
// writeTokenFile picks version 1 when every id fits in 16 bits
// (vocabulary <= 65536) and version 2 otherwise. Writes are atomic.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_TOKENIZER_TOKENFILE_H
#define MTC_LIB_TOKENIZER_TOKENFILE_H

#include "lib/Support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mtc::tok {

constexpr int32_t kTokenFileMagic = 20240520;
constexpr size_t kTokenFileHeaderInts = 256;

/// Writes \p ids to \p path; uint16 tokens when \p vocabSize <= 65536 (and
/// every id is below 65536), else uint32. \p version receives the version
/// written (1 or 2) when not null.
Status writeTokenFile(const std::string &path, const std::vector<uint32_t> &ids,
                      uint32_t vocabSize, int *version = nullptr);

/// Reads an llm.c token file written by writeTokenFile (or llm.c).
Expected<std::vector<uint32_t>> readTokenFile(const std::string &path);

} // namespace mtc::tok

#endif // MTC_LIB_TOKENIZER_TOKENFILE_H
