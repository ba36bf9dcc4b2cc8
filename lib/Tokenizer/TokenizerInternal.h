//===- TokenizerInternal.h - tokenizer.json internals -----------*- C++ -*-===//
//
// Part of mtc. What the parts of the tokenizer.json reader share; included by
// lib/Tokenizer's .cpp files only (not a public header). A tokenizer is the
// pipeline of the `tokenizers` library, one file per stage:
//
//   Normalizers.cpp     the text before splitting (NFC, Replace, Strip, ...)
//   PreTokenizers.cpp   the normalized text into pre-tokens (ByteLevel, Split,
//                       Metaspace, Digits), over NormalizedString::split
//   BpeModel.cpp        each pre-token into ids (the BPE model)
//   PostProcessors.cpp  special tokens around the ids (TemplateProcessing,
//                       Bert/RobertaProcessing)
//   Decoders.cpp        ids' token strings back into text (ByteLevel,
//                       ByteFallback, Fuse, Strip, Replace, Metaspace)
//   TokenizerJson.cpp   reading tokenizer.json's fields with their JSON paths
//   Tokenizer.cpp       the public Tokenizer: loading, added tokens, encode,
//                       decode
//
// What they share:
//  - errors: every parser throws LoadError (through fail) with the JSON path
//    of the field at fault; Tokenizer::fromJson turns it into a Status;
//  - each stage's interface (Normalizer, PreTokenizer, PostProcessor,
//    Decoder; the BPE model is the one concrete Bpe) and its parser from the
//    stage's JSON object (parseNormalizer, ...); "Sequence" stages are built
//    by parseSequence;
//  - GPT-2's byte map (ByteLevel pre-tokenizer and decoder), Metaspace's
//    prepend scheme (pre-tokenizer and decoder) and replaceAll (Replace
//    normalizer and decoder).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_TOKENIZER_TOKENIZERINTERNAL_H
#define MTC_LIB_TOKENIZER_TOKENIZERINTERNAL_H

#include "lib/Tokenizer/Regex.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mtc::tok::hf {

using json = nlohmann::json;

//===----------------------------------------------------------------------===//
// JSON access with paths in messages (TokenizerJson.cpp)
//===----------------------------------------------------------------------===//

/// A load error; the message starts with the JSON path.
struct LoadError {
  std::string message;
};

/// Throws LoadError: "<path>: <msg>" (just msg when path is empty).
[[noreturn]] void fail(const std::string &path, const std::string &msg);
/// The JSON type of \p v as a message says it ("a string", "null", ...).
const char *typeName(const json &v);
/// \p s for a message, cut at 40 bytes.
std::string shortText(const std::string &s);
/// path.key and path[i].
std::string join(const std::string &path, const char *key);
std::string index(const std::string &path, size_t i);
void expectObject(const json &v, const std::string &path);
/// The member \p key of object \p obj (at \p path); an error when missing.
const json &member(const json &obj, const std::string &path, const char *key);
/// The member, or null when it is missing or null.
const json *optional(const json &obj, const char *key);
std::string asString(const json &v, const std::string &path);
std::string stringField(const json &obj, const std::string &path,
                        const char *key);
bool boolField(const json &obj, const std::string &path, const char *key,
               bool dflt);
/// An integer in [lo, hi].
int64_t asInt(const json &v, const std::string &path, int64_t lo, int64_t hi);
/// A token id (below 2^31).
uint32_t asId(const json &v, const std::string &path);
/// A single code point given as a JSON string (Metaspace replacement, Strip
/// content).
uint32_t charField(const json &obj, const std::string &path, const char *key);
/// The "type" of a component.
std::string typeOf(const json &obj, const std::string &path);
/// Throws: \p type is not one of \p supported.
[[noreturn]] void unsupportedType(const std::string &path,
                                  const std::string &type,
                                  const char *supported);
/// A {"String": s} or {"Regex": r} pattern (Split, Replace).
Regex patternField(const json &obj, const std::string &path);

/// A "Sequence" component: its \p key array, each item parsed by \p parse
/// (its JSON path indexed), in order.
template <typename Seq, typename Parse>
std::unique_ptr<Seq> parseSequence(const json &v, const std::string &path,
                                   const char *key, Parse parse) {
  auto seq = std::make_unique<Seq>();
  const json &items = member(v, path, key);
  std::string ip = join(path, key);
  if (!items.is_array())
    fail(ip, std::string("expected an array, got ") + typeName(items));
  for (size_t i = 0; i < items.size(); ++i)
    seq->items.push_back(parse(items[i], index(ip, i)));
  return seq;
}

//===----------------------------------------------------------------------===//
// Normalizers (Normalizers.cpp)
//===----------------------------------------------------------------------===//

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual void apply(std::string &s) const = 0;
};

std::unique_ptr<Normalizer> parseNormalizer(const json &v,
                                            const std::string &path);

/// Replaces every match of \p re in \p s by \p content
/// (NormalizedString::replace and the Replace decoder).
std::string replaceAll(const Regex &re, std::string_view s,
                       const std::string &content);

//===----------------------------------------------------------------------===//
// Pre-tokenizers (PreTokenizers.cpp)
//===----------------------------------------------------------------------===//

/// Receives a pre-token and whether it starts at offset 0 of the original
/// text (Metaspace's prepend_scheme "first").
using Emit = std::function<void(std::string &&, bool)>;

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  /// Splits \p text (non-empty); emits the non-empty pieces in order.
  virtual void run(std::string text, bool atStart, const Emit &emit) const = 0;
};

std::unique_ptr<PreTokenizer> parsePreTokenizer(const json &v,
                                                const std::string &path);

/// GPT-2's byte-to-unicode table (bytes_char in byte_level.rs).
struct ByteMap {
  std::string encoded[256]; // UTF-8 of the char for each byte
  std::unordered_map<uint32_t, uint8_t> decode;
  ByteMap();
};

/// The one ByteMap.
const ByteMap &byteMap();

/// Metaspace's prepend_scheme.
enum class PrependScheme { Always, First, Never };

/// A Metaspace component's prepend_scheme (or older add_prefix_space).
PrependScheme schemeField(const json &v, const std::string &path);

//===----------------------------------------------------------------------===//
// BPE (BpeModel.cpp)
//===----------------------------------------------------------------------===//

/// The BPE model (models/bpe/model.rs).
struct Bpe {
  std::unordered_map<std::string, uint32_t> vocab;
  std::unordered_map<uint32_t, std::string> vocabR;
  /// (a << 32 | b) -> (rank, new id)
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> merges;
  std::optional<uint32_t> unkId;
  std::string prefix, suffix;
  bool hasPrefix = false, hasSuffix = false;
  bool fuseUnk = false, byteFallback = false, ignoreMerges = false;
  int byteIds[256];

  using Cache = std::unordered_map<std::string, std::vector<uint32_t>>;

  struct Symbol {
    uint32_t c;
    long prev, next;
    size_t len;
  };

  const std::pair<uint32_t, uint32_t> *merge(uint32_t a, uint32_t b) const;

  /// BPE::merge_word + Word::merge_all.
  void mergeWord(const std::string &w, std::vector<uint32_t> &out) const;

  /// The ids of pre-token \p w appended to \p out (through \p cache).
  void tokenize(const std::string &w, std::vector<uint32_t> &out,
                Cache &cache) const;
};

/// The "model" of tokenizer.json \p root (BPE only).
std::unique_ptr<Bpe> parseModel(const json &root);

//===----------------------------------------------------------------------===//
// Post-processors (PostProcessors.cpp)
//===----------------------------------------------------------------------===//

struct PostProcessor {
  virtual ~PostProcessor() = default;
  /// Adds the special tokens around \p ids (only called with
  /// add_special_tokens).
  virtual void apply(std::vector<uint32_t> &ids) const = 0;
  virtual void collectIds(std::vector<uint32_t> &out) const = 0;
};

std::unique_ptr<PostProcessor> parsePostProcessor(const json &v,
                                                  const std::string &path);

//===----------------------------------------------------------------------===//
// Decoders (Decoders.cpp)
//===----------------------------------------------------------------------===//

struct Decoder {
  virtual ~Decoder() = default;
  virtual void chain(std::vector<std::string> &tokens) const = 0;
};

std::unique_ptr<Decoder> parseDecoder(const json &v, const std::string &path);

} // namespace mtc::tok::hf

#endif // MTC_LIB_TOKENIZER_TOKENIZERINTERNAL_H
