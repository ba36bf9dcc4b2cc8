//===- Normalizers.cpp - tokenizer.json normalizers -----------------------===//
//
// Part of mtc. The normalizers of tokenizer.json (normalizers/*.rs): NFC,
// NFD, Prepend, Replace, Strip and Sequence, and replaceAll
// (NormalizedString::replace, shared with the Replace decoder).
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/TokenizerInternal.h"

#include "lib/Tokenizer/Unicode.h"

#include <nlohmann/json.hpp>

namespace mtc::tok::hf {

/// Replaces every match of \p re in \p s by \p content
/// (NormalizedString::replace and the Replace decoder).
std::string replaceAll(const Regex &re, std::string_view s,
                       const std::string &content) {
  std::string out;
  if (s.empty())
    return out;
  size_t prev = 0, lastEnd = 0, lastMatchEnd = 0;
  bool haveLast = false;
  while (lastEnd <= s.size()) {
    size_t st, en;
    if (!re.search(s, lastEnd, st, en))
      break;
    if (st == en && haveLast && lastMatchEnd == en) {
      lastEnd +=
          lastEnd < s.size() ? utf8Length(static_cast<uint8_t>(s[lastEnd])) : 1;
      continue;
    }
    lastEnd = en;
    lastMatchEnd = en;
    haveLast = true;
    out.append(s.substr(prev, st - prev));
    out += content;
    prev = en;
  }
  out.append(s.substr(prev));
  return out;
}

namespace {

struct SequenceNormalizer : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> items;
  void apply(std::string &s) const override {
    for (const auto &n : items)
      n->apply(s);
  }
};

struct NFCNormalizer : Normalizer {
  void apply(std::string &s) const override { s = toNFC(s); }
};

struct NFDNormalizer : Normalizer {
  void apply(std::string &s) const override { s = toNFD(s); }
};

struct PrependNormalizer : Normalizer {
  std::string prefix;
  void apply(std::string &s) const override {
    if (!s.empty())
      s.insert(0, prefix);
  }
};

struct ReplaceNormalizer : Normalizer {
  Regex re;
  std::string content;
  void apply(std::string &s) const override { s = replaceAll(re, s, content); }
};

struct StripNormalizer : Normalizer {
  bool left = true, right = true;
  void apply(std::string &s) const override {
    size_t b = 0, e = s.size();
    if (left)
      while (b < e) {
        size_t q = b;
        if (!isWhiteSpace(nextCodePoint(s, q)))
          break;
        b = q;
      }
    if (right)
      while (e > b) {
        size_t q = e;
        do
          --q;
        while (q > b && (static_cast<uint8_t>(s[q]) & 0xC0) == 0x80);
        size_t r = q;
        if (!isWhiteSpace(nextCodePoint(s, r)))
          break;
        e = q;
      }
    s = s.substr(b, e - b);
  }
};

} // namespace

std::unique_ptr<Normalizer> parseNormalizer(const json &v,
                                            const std::string &path) {
  std::string type = typeOf(v, path);
  if (type == "Sequence")
    return parseSequence<SequenceNormalizer>(v, path, "normalizers",
                                             parseNormalizer);
  if (type == "NFC")
    return std::make_unique<NFCNormalizer>();
  if (type == "NFD")
    return std::make_unique<NFDNormalizer>();
  if (type == "Prepend") {
    auto n = std::make_unique<PrependNormalizer>();
    n->prefix = stringField(v, path, "prepend");
    return n;
  }
  if (type == "Replace") {
    auto n = std::make_unique<ReplaceNormalizer>();
    n->re = patternField(v, path);
    n->content = stringField(v, path, "content");
    return n;
  }
  if (type == "Strip") {
    auto n = std::make_unique<StripNormalizer>();
    n->left = boolField(v, path, "strip_left", true);
    n->right = boolField(v, path, "strip_right", true);
    return n;
  }
  unsupportedType(path, type, "NFC, NFD, Prepend, Replace, Strip, Sequence");
}

} // namespace mtc::tok::hf
