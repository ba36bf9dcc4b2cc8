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
// Loss masks (instruction data, docs/hf.md "Instruction data and chat
// templates") live beside the token file as `<file>.mask`, so that plain
// readers of the .bin are unaffected:
//
//   16-byte header: [0..4) magic "MASK" (int32 0x4B53414D little-endian),
//   [4..8) int32 version 1, [8..16) int64 token count; then one byte per
//   token: 1 = the token is trained (it counts in the loss as a target),
//   0 = masked (prompt, system text, template scaffolding)
//
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

constexpr int32_t kLossMaskMagic = 0x4B53414D; // "MASK"
constexpr size_t kLossMaskHeaderBytes = 16;

/// The loss-mask companion of token file \p tokenPath: tokenPath + ".mask".
std::string lossMaskPath(const std::string &tokenPath);
/// Writes \p mask (one 0/1 byte per token) to \p path, atomically.
Status writeLossMask(const std::string &path, const std::vector<uint8_t> &mask);
/// Reads a loss mask; errors: bad magic or version, truncated, a count that
/// disagrees with the size, a byte other than 0 and 1.
Expected<std::vector<uint8_t>> readLossMask(const std::string &path);

} // namespace mtc::tok

#endif // MTC_LIB_TOKENIZER_TOKENFILE_H
