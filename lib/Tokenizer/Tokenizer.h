//===- Tokenizer.h - HuggingFace tokenizer.json (BPE) -----------*- C++ -*-===//
//
// Part of mtc. Loads a HuggingFace `tokenizer.json` and encodes / decodes
// exactly as the `tokenizers` library does (Tokenizer.encode(text,
// add_special_tokens).ids and Tokenizer.decode(ids, skip_special_tokens)),
// for the two BPE families of the models mtc imports:
//
//   byte-level BPE       GPT-2, Llama 3, Qwen2: ByteLevel pre-tokenizer (or a
//                        Split regex followed by ByteLevel), NFC, ByteLevel
//                        decoder
//   SentencePiece-style  Llama 2, Mistral, Gemma: Prepend("▁") + Replace(" ",
//                        "▁") normalizers or a Metaspace pre-tokenizer, byte
//                        fallback tokens <0xNN>, ByteFallback / Fuse / Strip /
//                        Replace / Metaspace decoders
//
// The pipeline is the library's: added tokens are split out first (those with
// normalized = false on the raw text, the others on the normalized text, with
// lstrip / rstrip / single_word), then the normalizer, the pre-tokenizer, the
// BPE model (merges by rank, ignore_merges, byte_fallback, unk_token /
// fuse_unk, continuing_subword_prefix / end_of_word_suffix), and, when
// special tokens are asked for, the post-processor (TemplateProcessing,
// ByteLevel, BertProcessing, RobertaProcessing, Sequence). Regex patterns
// run on the matcher of Regex.h; Unicode data comes from Unicode.h.
//
// Supported components (anything else is an error naming the JSON path, e.g.
// `tokenizer.json: model.type 'WordPiece' is not supported (supported: BPE)`):
//   normalizer      NFC, NFD, Prepend, Replace, Strip, Sequence
//   pre_tokenizer   ByteLevel, Split, Metaspace, Digits, Sequence
//   model           BPE (dropout null or 0)
//   post_processor  ByteLevel, TemplateProcessing (single), BertProcessing,
//                   RobertaProcessing, Sequence
//   decoder         ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace,
//                   Sequence
// `truncation` and `padding` are ignored (mtc tokenizes whole texts).
//
// Text must be valid UTF-8 (the library takes Python strings); invalid input
// is an error naming the byte offset. Exceptions stay inside the library:
// every failure is a Status.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_TOKENIZER_TOKENIZER_H
#define MTC_LIB_TOKENIZER_TOKENIZER_H

#include "lib/Support/Status.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::tok {

struct AddedToken {
  uint32_t id = 0;
  std::string content;
  bool singleWord = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

class Tokenizer {
public:
  /// \p path is a tokenizer.json file or a directory holding one.
  static Expected<Tokenizer> load(const std::string &path);
  /// Parses \p json; \p name (the file) prefixes every message.
  static Expected<Tokenizer> fromJson(std::string_view json,
                                      const std::string &name);

  /// The ids of \p text; with \p addSpecialTokens, the post-processor's
  /// tokens (e.g. BOS) are added. Errors: invalid UTF-8, a regex that needs
  /// too much backtracking on this text.
  Expected<std::vector<uint32_t>> encode(std::string_view text,
                                         bool addSpecialTokens = false) const;
  /// The text of \p ids. Ids that are not in the vocabulary are skipped, as
  /// the library does.
  std::string decode(const std::vector<uint32_t> &ids,
                     bool skipSpecialTokens = false) const;
  /// decode, with its one possible error: a Replace decoder regex that needs
  /// too much backtracking (decode then returns the tokens concatenated).
  Expected<std::string> decodeChecked(const std::vector<uint32_t> &ids,
                                      bool skipSpecialTokens = false) const;

  /// 1 + the largest id of the vocabulary, the added tokens and the
  /// post-processor's tokens.
  uint32_t vocabSize() const;
  std::optional<uint32_t> tokenToId(std::string_view token) const;
  /// The token of \p id (added tokens first, as decode sees them).
  std::optional<std::string> idToToken(uint32_t id) const;
  const std::vector<AddedToken> &addedTokens() const;
  /// The file it was loaded from (as given).
  const std::string &name() const;
  /// One line: "BPE, 500 tokens (7 added), 243 merges".
  std::string describe() const;

  struct Impl;

private:
  std::shared_ptr<const Impl> impl;
};

/// The tokenizer.json path for \p path: path itself, or path/tokenizer.json
/// when it is a directory.
std::string tokenizerJsonPath(const std::string &path);

} // namespace mtc::tok

#endif // MTC_LIB_TOKENIZER_TOKENIZER_H
