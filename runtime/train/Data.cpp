//===- Data.cpp - Token datasets, batch sampling, validation split --------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Data.h"

#include "lib/Tokenizer/Unicode.h"
#include "runtime/train/Random.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sys/stat.h>
#include <vector>

namespace mtc::train {

const char *tokenFileFormatName(TokenFileFormat f) {
  switch (f) {
  case TokenFileFormat::LlmcBin:
    return "llm.c .bin";
  case TokenFileFormat::RawU16:
    return "raw uint16 tokens";
  case TokenFileFormat::Text:
    return "text (byte tokens)";
  case TokenFileFormat::TokenizedText:
    return "text (the model's tokenizer)";
  }
  return "?";
}

static int32_t readI32(const uint8_t *p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

static bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

/// Whether the file reads as UTF-8 text: no NUL byte and valid UTF-8 in its
/// first MiB (a multi-byte character cut by that window's end is fine).
static bool looksLikeText(const uint8_t *base, uint64_t size) {
  size_t n = static_cast<size_t>(std::min<uint64_t>(size, 1u << 20));
  std::string_view head(reinterpret_cast<const char *>(base), n);
  if (head.find('\0') != std::string_view::npos)
    return false;
  size_t bad = tok::findInvalidUtf8(head);
  return bad == std::string_view::npos || (n < size && bad + 4 > n);
}

// The first index in [0, n) whose token is >= vocab, or n.
template <typename T>
static uint64_t firstOutOfRange(const uint8_t *base, uint64_t n,
                                uint32_t vocab) {
  constexpr uint64_t kChunk = 1u << 16;
  for (uint64_t b = 0; b < n; b += kChunk) {
    uint64_t e = std::min(n, b + kChunk);
    T mx = 0;
    for (uint64_t i = b; i < e; ++i) {
      T v;
      std::memcpy(&v, base + i * sizeof(T), sizeof(T));
      mx = v > mx ? v : mx;
    }
    if (mx < vocab)
      continue;
    for (uint64_t i = b; i < e; ++i) {
      T v;
      std::memcpy(&v, base + i * sizeof(T), sizeof(T));
      if (v >= vocab)
        return i;
    }
  }
  return n;
}

Status TokenDataset::readLlmc(const std::string &path, const uint8_t *base,
                              uint64_t size) {
  fmt = TokenFileFormat::LlmcBin;
  if (size < kLlmcHeaderBytes)
    return Status::error(path + ": llm.c header is truncated (" +
                         std::to_string(size) + " bytes, the header is " +
                         std::to_string(kLlmcHeaderBytes) + ")");
  int32_t version = readI32(base + 4);
  int32_t declared = readI32(base + 8);
  if (version != 1 && version != 2)
    return Status::error(path + ": unsupported llm.c version " +
                         std::to_string(version) +
                         " (1: uint16 tokens, 2: uint32 tokens)");
  tokBytes = version == 1 ? 2 : 4;
  uint64_t body = size - kLlmcHeaderBytes;
  if (body % tokBytes)
    return Status::error(path + ": " + std::to_string(body) +
                         " bytes of tokens is not a multiple of the token "
                         "size (" +
                         std::to_string(tokBytes) + " bytes)");
  count = body / tokBytes;
  if (declared < 0 || static_cast<uint64_t>(declared) != count)
    return Status::error(path + ": header says " + std::to_string(declared) +
                         " tokens but the file holds " + std::to_string(count));
  tokens = base + kLlmcHeaderBytes;
  return Status::success();
}

Status TokenDataset::attachMask(const std::string &maskPath,
                                const std::string &path) {
  Expected<MappedFile> mm = MappedFile::open(maskPath);
  if (!mm)
    return mm.status();
  const uint8_t *mb = mm->data();
  uint64_t msize = mm->size();
  if (msize < 4 || readI32(mb) != kLossMaskMagic)
    return Status::error(maskPath + ": not a loss mask (no magic 'MASK')");
  if (msize < kLossMaskHeaderBytes)
    return Status::error(maskPath + ": loss mask header is truncated");
  int32_t version = readI32(mb + 4);
  int64_t declared;
  std::memcpy(&declared, mb + 8, 8);
  if (version != 1)
    return Status::error(maskPath + ": unsupported loss mask version " +
                         std::to_string(version) + " (1)");
  uint64_t body = msize - kLossMaskHeaderBytes;
  if (declared < 0 || static_cast<uint64_t>(declared) != body)
    return Status::error(maskPath + ": header says " +
                         std::to_string(declared) +
                         " tokens but the file holds " + std::to_string(body));
  if (body != count)
    return Status::error(maskPath + ": " + std::to_string(body) +
                         " mask bytes for the " + std::to_string(count) +
                         " tokens of " + path);
  mask = mb + kLossMaskHeaderBytes;
  for (uint64_t i = 0; i < count; ++i)
    if (mask[i] > 1)
      return Status::error(maskPath + ": byte " + std::to_string(mask[i]) +
                           " at token " + std::to_string(i) +
                           " is neither 0 (masked) nor 1 (trained)");
  maskFile = std::move(mm.value());
  // Targets are tokens 1.. of a window.
  if (trainedTokens(1, trainTokens()) == 0)
    return Status::error(maskPath + ": no trainable tokens in the training "
                                    "split (every target is masked)");
  if (valCount > 0 && trainedTokens(trainTokens() + 1, count) == 0)
    return Status::error(maskPath +
                         ": no trainable tokens in the validation split (the "
                         "last " +
                         std::to_string(valCount) +
                         " tokens); use --val-fraction 0 or a larger one");
  return Status::success();
}

Expected<TokenDataset> TokenDataset::open(const std::string &path,
                                          const TokenDatasetOptions &opts) {
  if (opts.seqLen <= 0)
    return Status::error(path + ": sequence length must be positive");
  if (!(opts.valFraction >= 0.0 && opts.valFraction < 1.0))
    return Status::error(path + ": val_fraction must be in [0, 1)");
  if (opts.vocabSize == 0)
    return Status::error(path + ": vocabulary size must be positive");
  Expected<MappedFile> mf = MappedFile::open(path);
  if (!mf)
    return mf.status();
  TokenDataset d;
  d.opts = opts;
  const uint8_t *base = mf->data();
  uint64_t size = mf->size();
  if (size == 0)
    return Status::error(path + ": file is empty");

  const std::string &want = opts.format;
  if (std::find(std::begin(kDataFormats), std::end(kDataFormats), want) ==
      std::end(kDataFormats))
    return Status::error(path + ": unknown data format '" + want +
                         "' (expected auto, text, llmc or raw-u16)");
  bool magic = size >= 4 && readI32(base) == kLlmcMagic;
  bool text =
      want == "text" || (want == "auto" && !magic &&
                         (endsWith(path, ".txt") || looksLikeText(base, size)));
  if (want == "llmc" && !magic)
    return Status::error(path +
                         ": not an llm.c token file (its first int32 "
                         "is " +
                         std::to_string(size >= 4 ? readI32(base) : 0) +
                         ", the llm.c magic is " + std::to_string(kLlmcMagic) +
                         ")");
  if (want == "auto" && !magic && !text)
    return Status::error(
        path + ": neither an llm.c token file (its first int32 is " +
        std::to_string(size >= 4 ? readI32(base) : 0) + ", the magic is " +
        std::to_string(kLlmcMagic) +
        ") nor UTF-8 text; for headerless uint16 tokens pass --data-format "
        "raw-u16, for text in another encoding convert it to UTF-8 first");

  if (text && opts.tokenize) {
    d.fmt = TokenFileFormat::TokenizedText;
    Expected<std::vector<uint32_t>> ids = opts.tokenize(
        std::string_view(reinterpret_cast<const char *>(base), size));
    if (!ids)
      return Status::error(path + ": " + ids.message());
    d.owned = std::make_shared<std::vector<uint32_t>>(std::move(*ids));
    d.tokBytes = 4;
    d.tokens = reinterpret_cast<const uint8_t *>(d.owned->data());
    d.count = d.owned->size();
  } else if (text) {
    d.fmt = TokenFileFormat::Text;
    d.tokBytes = 1;
    d.tokens = base;
    d.count = size;
  } else if (want != "raw-u16") {
    if (Status st = d.readLlmc(path, base, size); !st)
      return st;
  } else {
    d.fmt = TokenFileFormat::RawU16;
    d.tokBytes = 2;
    if (size % 2)
      return Status::error(path + ": size " + std::to_string(size) +
                           " bytes is not a multiple of the token size (2 "
                           "bytes, raw uint16 tokens)");
    d.count = size / 2;
    d.tokens = base;
  }

  uint64_t window = static_cast<uint64_t>(opts.seqLen) + 1;
  if (d.count < window)
    return Status::error(
        path + ": " + std::to_string(d.count) +
        " tokens, fewer than seq_len + 1 = " + std::to_string(window));
  if (opts.valFraction > 0) {
    uint64_t nval = static_cast<uint64_t>(
        std::floor(static_cast<double>(d.count) * opts.valFraction));
    d.valCount = std::max(nval, window);
    if (d.count < d.valCount + window)
      return Status::error(
          path + ": " + std::to_string(d.count) +
          " tokens are too few for a training and a validation window of " +
          std::to_string(window) + " tokens each (val_fraction " +
          std::to_string(opts.valFraction) + ")");
  }

  if (opts.validateUpToBytes == 0 || size <= opts.validateUpToBytes) {
    uint64_t bad = d.count;
    uint32_t vocab = opts.vocabSize;
    if (d.tokBytes == 1)
      bad = vocab >= 256 ? d.count
                         : firstOutOfRange<uint8_t>(d.tokens, d.count, vocab);
    else if (d.tokBytes == 2)
      bad = vocab >= 65536
                ? d.count
                : firstOutOfRange<uint16_t>(d.tokens, d.count, vocab);
    else
      bad = firstOutOfRange<uint32_t>(d.tokens, d.count, vocab);
    if (bad != d.count)
      return Status::error(path + ": token " + std::to_string(d.token(bad)) +
                           " at position " + std::to_string(bad) +
                           " is outside the vocabulary (size " +
                           std::to_string(vocab) + ")");
    d.checked = true;
  }
  std::string maskPath = path + ".mask";
  struct stat st;
  if (opts.useMask && ::stat(maskPath.c_str(), &st) == 0)
    if (Status masked = d.attachMask(maskPath, path); !masked)
      return masked;
  d.file = std::move(mf.value());
  return Expected<TokenDataset>(std::move(d));
}

uint32_t TokenDataset::token(uint64_t i) const {
  const uint8_t *p = tokens + i * tokBytes;
  if (tokBytes == 1)
    return *p;
  if (tokBytes == 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void TokenDataset::read(uint64_t offset, size_t n, int32_t *dst) const {
  const uint8_t *p = tokens + offset * tokBytes;
  if (tokBytes == 1) {
    for (size_t k = 0; k < n; ++k)
      dst[k] = p[k];
  } else if (tokBytes == 2) {
    for (size_t k = 0; k < n; ++k) {
      uint16_t v;
      std::memcpy(&v, p + 2 * k, 2);
      dst[k] = v;
    }
  } else {
    for (size_t k = 0; k < n; ++k) {
      uint32_t v;
      std::memcpy(&v, p + 4 * k, 4);
      dst[k] = static_cast<int32_t>(v);
    }
  }
}

uint64_t TokenDataset::trainedTokens(uint64_t begin, uint64_t end) const {
  if (end <= begin)
    return 0;
  if (!mask)
    return end - begin;
  uint64_t n = 0;
  for (uint64_t i = begin; i < end; ++i)
    n += mask[i];
  return n;
}

void TokenDataset::window(uint64_t offset, int32_t *inputs,
                          int32_t *targets) const {
  size_t S = static_cast<size_t>(opts.seqLen);
  read(offset, S, inputs);
  read(offset + 1, S, targets);
  if (mask)
    for (size_t k = 0; k < S; ++k)
      if (!mask[offset + 1 + k])
        targets[k] = opts.ignoreIndex;
}

//===----------------------------------------------------------------------===//
// Sampling
//===----------------------------------------------------------------------===//

BatchSampler::BatchSampler(const TokenDataset &data, int64_t batch,
                           uint64_t seed)
    : data(data), B(batch), seed_(seed) {}

uint64_t BatchSampler::offset(int64_t step, int64_t micro, int64_t row) const {
  uint64_t S = static_cast<uint64_t>(data.seqLen());
  uint64_t range = data.trainTokens() - S; // offsets in [0, range)
  // One independent stream per (step, micro, row): stream = step, the
  // generator position starts at a block reserved for (micro, row).
  Rng rng(seed_ ^ 0x6d74632d64617461ull /* "mtc-data" */,
          static_cast<uint64_t>(step));
  rng.setPosition((static_cast<uint64_t>(micro) * static_cast<uint64_t>(B) +
                   static_cast<uint64_t>(row)) *
                  (uint64_t(1) << 20));
  uint64_t off = rng.below(range);
  // With a loss mask, a window without a trained target is redrawn (the
  // same stream continues, so this stays a function of (seed, step, micro,
  // row)).
  for (int tries = 0; data.hasMask() && tries < 64 &&
                      data.trainedTokens(off + 1, off + S + 1) == 0;
       ++tries)
    off = rng.below(range);
  return off;
}

void BatchSampler::sample(int64_t step, int64_t micro, int32_t *inputs,
                          int32_t *targets) const {
  size_t S = static_cast<size_t>(data.seqLen());
  for (int64_t b = 0; b < B; ++b)
    data.window(offset(step, micro, b), inputs + b * S, targets + b * S);
}

ValIterator::ValIterator(const TokenDataset &data, int64_t batch)
    : data(data), B(batch) {
  uint64_t S = static_cast<uint64_t>(data.seqLen());
  windows = data.valTokens() >= S + 1 ? (data.valTokens() - 1) / S : 0;
}

int64_t ValIterator::next(int32_t *inputs, int32_t *targets) {
  size_t S = static_cast<size_t>(data.seqLen());
  int64_t rows = 0;
  while (rows < B && pos < windows) {
    data.window(data.trainTokens() + pos * S, inputs + rows * S,
                targets + rows * S);
    ++rows;
    ++pos;
  }
  return rows;
}

} // namespace mtc::train
