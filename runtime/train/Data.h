//===- Data.h - Token datasets, batch sampling, validation split -*- C++
//-*-===//
//
// Part of mtc. A token file is memory-mapped once and validated at open:
//
//   llm.c .bin   256 int32 header (magic 20240520, version 1 = uint16 tokens,
//                version 2 = uint32 tokens, token count), then the tokens
//   text         UTF-8 text: a .txt file, or any file without the llm.c
//                magic whose first MiB is UTF-8 without NUL bytes; tokenised
//                by the model's tokenizer, else by bytes (vocabulary 256:
//                token = byte value)
//   raw uint16   headerless little-endian uint16 tokens (nanoGPT's layout):
//                only when asked for (format "raw-u16"), never guessed
//
// A file that is none of these (a damaged llm.c header, binary data) is an
// error naming what was expected and how to ask for raw tokens.
//
// Errors name the file: missing, empty, size not a multiple of the token size,
// header count disagreeing with the file size, fewer tokens than seqLen + 1,
// a token id >= vocab (the first offending position is reported).
//
// Loss mask: when `<file>.mask` exists beside the file (written by `mtc
// tokenize` for instruction data; layout in lib/Tokenizer/TokenFile.h: 16-byte
// header "MASK", version 1, int64 token count, then one byte per token, 1 =
// trained, 0 = masked), targets whose token is masked are set to
// ignoreIndex, so the loss skips them. Errors name the mask file: bad header,
// a count other than the token file's, a byte other than 0/1, no trained
// target in the training split (or in the validation split when there is
// one). Training rows are redrawn (up to 64 times, deterministically) when
// their window has no trained target.
//
// Split: the last valFraction of the tokens (at least seqLen + 1 of them when
// valFraction > 0) is validation, the rest training.
//
// Sampling: BatchSampler::sample(step, micro) draws B training windows of S + 1
// tokens at offsets that depend only on (seed, step, micro, row), so resuming
// at a step reproduces the data exactly. ValIterator walks validation windows
// in order.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_TRAIN_DATA_H
#define MTC_RUNTIME_TRAIN_DATA_H

#include "lib/Format/MappedFile.h"
#include "lib/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::train {

enum class TokenFileFormat { LlmcBin, RawU16, Text, TokenizedText };
const char *tokenFileFormatName(TokenFileFormat f);

constexpr int32_t kLlmcMagic = 20240520;
constexpr size_t kLlmcHeaderBytes = 256 * 4;

struct TokenDatasetOptions {
  uint32_t vocabSize = 256;
  int64_t seqLen = 256;
  double valFraction = 0.1;
  /// Token ids are checked against vocabSize at open for files up to this
  /// many bytes (larger ones are not scanned; 0 = always scan).
  uint64_t validateUpToBytes = uint64_t(8) << 30;
  /// A .txt file is tokenised with this (the model's tokenizer) instead of
  /// taking its bytes as tokens; errors name the file.
  std::function<Expected<std::vector<uint32_t>>(std::string_view)> tokenize;
  /// The target written for a masked token: the model loss's ignore_index.
  int32_t ignoreIndex = -1;
  /// Read `<path>.mask` when it exists.
  bool useMask = true;
  /// How the file is read (`mtc train --data-format`): "auto" (llm.c by its
  /// magic, else text when it is UTF-8 text), "text", "llmc" or "raw-u16".
  std::string format = "auto";
};

/// The values of TokenDatasetOptions::format.
constexpr const char *kDataFormats[] = {"auto", "text", "llmc", "raw-u16"};

constexpr int32_t kLossMaskMagic = 0x4B53414D; // "MASK"
constexpr size_t kLossMaskHeaderBytes = 16;

class TokenDataset {
public:
  static Expected<TokenDataset> open(const std::string &path,
                                     const TokenDatasetOptions &opts);

  const std::string &path() const { return file.path(); }
  TokenFileFormat format() const { return fmt; }
  /// Bytes per token in the file (1, 2 or 4).
  size_t tokenBytes() const { return tokBytes; }
  uint64_t numTokens() const { return count; }
  /// Training tokens are [0, trainTokens()), validation the rest.
  uint64_t trainTokens() const { return count - valCount; }
  uint64_t valTokens() const { return valCount; }
  int64_t seqLen() const { return opts.seqLen; }
  uint32_t vocabSize() const { return opts.vocabSize; }
  /// True when token ids were checked at open.
  bool validated() const { return checked; }

  uint32_t token(uint64_t i) const;
  /// dst[k] = token(offset + k) for k < n.
  void read(uint64_t offset, size_t n, int32_t *dst) const;

  /// True when a loss mask was read (maskPath()).
  bool hasMask() const { return mask != nullptr; }
  const std::string &maskPath() const { return maskFile.path(); }
  /// Whether token \p i is trained (always true without a mask).
  bool trained(uint64_t i) const { return !mask || mask[i]; }
  /// Tokens marked trained in [begin, end).
  uint64_t trainedTokens(uint64_t begin, uint64_t end) const;
  int32_t ignoreIndex() const { return opts.ignoreIndex; }
  /// Fills a window's inputs and targets from tokens [offset, offset + S]:
  /// inputs[k] = token(offset + k), targets[k] = token(offset + k + 1), or
  /// ignoreIndex where that token is masked.
  void window(uint64_t offset, int32_t *inputs, int32_t *targets) const;

private:
  TokenDataset() = default;
  /// The loss mask \p maskPath (PATH.mask) of these tokens, checked
  /// against them and the splits.
  Status attachMask(const std::string &maskPath, const std::string &path);
  /// The tokens of the llm.c file \p base of \p size bytes (header
  /// checked).
  Status readLlmc(const std::string &path, const uint8_t *base, uint64_t size);
  MappedFile file;
  TokenDatasetOptions opts;
  TokenFileFormat fmt = TokenFileFormat::RawU16;
  const uint8_t *tokens = nullptr;
  size_t tokBytes = 2;
  uint64_t count = 0;
  uint64_t valCount = 0;
  bool checked = false;
  /// The ids of a tokenised .txt file (tokens points into it).
  std::shared_ptr<std::vector<uint32_t>> owned;
  MappedFile maskFile;
  const uint8_t *mask = nullptr;
};

/// Random training windows. inputs and targets are [B, S] row-major int32:
/// row b is window w_b: inputs = w_b[0, S), targets = w_b[1, S + 1).
class BatchSampler {
public:
  BatchSampler(const TokenDataset &data, int64_t batch, uint64_t seed);

  /// The window offset of row \p row of micro-batch \p micro at step \p step:
  /// uniform in [0, trainTokens - S - 1].
  uint64_t offset(int64_t step, int64_t micro, int64_t row) const;
  void sample(int64_t step, int64_t micro, int32_t *inputs,
              int32_t *targets) const;

  int64_t batch() const { return B; }
  uint64_t seed() const { return seed_; }

private:
  const TokenDataset &data;
  int64_t B;
  uint64_t seed_;
};

/// Validation windows in order: window k starts at trainTokens + k * S (windows
/// share one token), as many as fit; batches of up to B rows.
class ValIterator {
public:
  ValIterator(const TokenDataset &data, int64_t batch);

  uint64_t numWindows() const { return windows; }
  /// Fills the next batch; returns the number of rows filled (0 at the end;
  /// the last batch may be short).
  int64_t next(int32_t *inputs, int32_t *targets);
  void reset() { pos = 0; }

private:
  const TokenDataset &data;
  int64_t B;
  uint64_t windows;
  uint64_t pos = 0;
};

} // namespace mtc::train

#endif // MTC_RUNTIME_TRAIN_DATA_H
