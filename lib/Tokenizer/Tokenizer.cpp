//===- Tokenizer.cpp - HuggingFace tokenizer.json (BPE) -------------------===//
//
// Part of mtc. Each component follows the `tokenizers` library (Rust crate
// `tokenizers`, the code behind the Python package) step by step; the
// comments name the library's function where the behaviour is subtle. This
// file loads tokenizer.json, matches the added tokens and runs the pipeline
// whose stages live beside it (TokenizerInternal.h lists them).
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/Tokenizer.h"

#include "lib/Format/MappedFile.h"
#include "lib/Support/JsonParse.h"
#include "lib/Tokenizer/Regex.h"
#include "lib/Tokenizer/TokenizerInternal.h"
#include "lib/Tokenizer/Unicode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <functional>
#include <sys/stat.h>
#include <unordered_map>
#include <unordered_set>

namespace mtc::tok {

using namespace hf;

namespace {

//===----------------------------------------------------------------------===//
// Added tokens (tokenizer/added_vocabulary.rs)
//===----------------------------------------------------------------------===//

/// A byte trie over token strings: leftmost-longest matching.
class Trie {
public:
  void add(const std::string &s, int value) {
    int n = 0;
    for (unsigned char c : s) {
      int next = -1;
      for (const auto &[k, v] : nodes[n].next)
        if (k == c)
          next = v;
      if (next < 0) {
        next = static_cast<int>(nodes.size());
        nodes[n].next.emplace_back(c, next);
        nodes.emplace_back();
      }
      n = next;
    }
    nodes[n].value = value;
    ++count;
  }
  bool empty() const { return count == 0; }
  /// The longest string that starts at \p pos: its value and length.
  bool longestAt(std::string_view s, size_t pos, int &value,
                 size_t &len) const {
    int n = 0;
    bool found = false;
    for (size_t i = pos; i < s.size(); ++i) {
      int next = -1;
      for (const auto &[k, v] : nodes[n].next)
        if (k == static_cast<unsigned char>(s[i]))
          next = v;
      if (next < 0)
        break;
      n = next;
      if (nodes[n].value >= 0) {
        value = nodes[n].value;
        len = i + 1 - pos;
        found = true;
      }
    }
    return found;
  }

private:
  struct Node {
    std::vector<std::pair<unsigned char, int>> next;
    int value = -1;
  };
  std::vector<Node> nodes{Node{}};
  size_t count = 0;
};

struct Segment {
  size_t start, end;
  int token; // index into the added tokens, or -1
};

bool endsWithWord(std::string_view s) {
  if (s.empty())
    return false;
  size_t q = s.size();
  do
    --q;
  while (q > 0 && (static_cast<uint8_t>(s[q]) & 0xC0) == 0x80);
  return isRustWordChar(nextCodePoint(s, q));
}

bool startsWithWord(std::string_view s) {
  if (s.empty())
    return false;
  size_t q = 0;
  return isRustWordChar(nextCodePoint(s, q));
}

} // namespace

//===----------------------------------------------------------------------===//
// Tokenizer
//===----------------------------------------------------------------------===//

/// The regex steps one encode or decode may take: published patterns need a
/// few per byte.
constexpr uint64_t kBudgetBase = 10'000'000, kBudgetPerByte = 2000;

struct Tokenizer::Impl {
  std::string name;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> preTokenizer;
  std::unique_ptr<Bpe> model;
  std::unique_ptr<PostProcessor> postProcessor;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added;
  /// What decode shows for each added token: its content, or its normalized
  /// form when the token is normalized and the normalizer changes it.
  std::vector<std::string> addedDecoded;
  std::unordered_map<uint32_t, size_t> addedById;
  std::unordered_map<std::string, size_t> addedByContent;
  std::unordered_set<std::string> specialContents;
  Trie rawTrie, normalizedTrie;
  uint32_t vocabSize = 0;
  std::string describe;

  std::vector<Segment> findMatches(std::string_view s, const Trie &trie) const;
  void encodePiece(std::string &&text, bool atStart, std::vector<uint32_t> &ids,
                   Bpe::Cache &cache) const;
};

std::vector<Segment> Tokenizer::Impl::findMatches(std::string_view s,
                                                  const Trie &trie) const {
  std::vector<Segment> out;
  if (s.empty()) {
    out.push_back({0, 0, -1});
    return out;
  }
  if (trie.empty()) {
    out.push_back({0, s.size(), -1});
    return out;
  }
  size_t startOffset = 0;
  for (size_t pos = 0; pos < s.size();) {
    int tok;
    size_t len;
    if (!trie.longestAt(s, pos, tok, len)) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;
    const AddedToken &t = added[tok];
    if (t.singleWord) {
      bool startSpace = start == 0 || !endsWithWord(s.substr(0, start));
      bool stopSpace = stop == s.size() || !startsWithWord(s.substr(stop));
      if (!startSpace || !stopSpace)
        continue;
    }
    if (t.lstrip) {
      // The start of the whitespace run that ends at start.
      size_t ns = start;
      while (ns > 0) {
        size_t q = ns;
        do
          --q;
        while (q > 0 && (static_cast<uint8_t>(s[q]) & 0xC0) == 0x80);
        size_t r = q;
        if (!isWhiteSpace(nextCodePoint(s, r)))
          break;
        ns = q;
      }
      start = std::max(ns, startOffset);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        size_t q = stop;
        if (!isWhiteSpace(nextCodePoint(s, q)))
          break;
        stop = q;
      }
    }
    if (startOffset < start)
      out.push_back({startOffset, start, -1});
    out.push_back({start, stop, tok});
    startOffset = stop;
  }
  if (startOffset != s.size())
    out.push_back({startOffset, s.size(), -1});
  return out;
}

void Tokenizer::Impl::encodePiece(std::string &&text, bool atStart,
                                  std::vector<uint32_t> &ids,
                                  Bpe::Cache &cache) const {
  if (text.empty())
    return;
  if (!preTokenizer) {
    model->tokenize(text, ids, cache);
    return;
  }
  Emit sink = [&](std::string &&piece, bool) {
    if (!piece.empty())
      model->tokenize(piece, ids, cache);
  };
  preTokenizer->run(std::move(text), atStart, sink);
}

std::string tokenizerJsonPath(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return path + (path.empty() || path.back() == '/' ? "" : "/") +
           "tokenizer.json";
  return path;
}

Expected<Tokenizer> Tokenizer::load(const std::string &path) {
  std::string file = tokenizerJsonPath(path);
  Expected<MappedFile> mf = MappedFile::open(file);
  if (!mf)
    return mf.status();
  std::string_view text(reinterpret_cast<const char *>(mf->data()), mf->size());
  return fromJson(text, file);
}

Expected<Tokenizer> Tokenizer::fromJson(std::string_view text,
                                        const std::string &name) {
  Expected<json> parsed = parseJson(text, name);
  if (!parsed)
    return parsed.status();
  const json &root = *parsed;
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  try {
    if (!root.is_object())
      throw LoadError{std::string("expected a JSON object at the top level, "
                                  "got ") +
                      typeName(root)};
    if (const json *v = optional(root, "version")) {
      std::string ver = asString(*v, "version");
      if (ver != "1.0")
        throw LoadError{"version '" + ver +
                        "' is not supported (supported: 1.0)"};
    }
    impl->model = parseModel(root);
    if (const json *n = optional(root, "normalizer"))
      impl->normalizer = parseNormalizer(*n, "normalizer");
    if (const json *p = optional(root, "pre_tokenizer"))
      impl->preTokenizer = parsePreTokenizer(*p, "pre_tokenizer");
    if (const json *p = optional(root, "post_processor"))
      impl->postProcessor = parsePostProcessor(*p, "post_processor");
    if (const json *d = optional(root, "decoder"))
      impl->decoder = parseDecoder(*d, "decoder");

    // Added tokens, as AddedVocabulary::add_tokens assigns their ids: the id
    // of the same content in the vocabulary, else the next free id after
    // the model's vocabulary (the "id" fields of the file are not used).
    uint32_t nextId = static_cast<uint32_t>(impl->model->vocab.size());
    if (const json *list = optional(root, "added_tokens")) {
      if (!list->is_array())
        fail("added_tokens",
             std::string("expected an array, got ") + typeName(*list));
      for (size_t i = 0; i < list->size(); ++i) {
        const json &e = (*list)[i];
        std::string ip = index("added_tokens", i);
        expectObject(e, ip);
        AddedToken t;
        t.content = stringField(e, ip, "content");
        t.special = boolField(e, ip, "special", false);
        t.singleWord = boolField(e, ip, "single_word", false);
        t.lstrip = boolField(e, ip, "lstrip", false);
        t.rstrip = boolField(e, ip, "rstrip", false);
        t.normalized = boolField(e, ip, "normalized", !t.special);
        if (const json *id = optional(e, "id"))
          asId(*id, join(ip, "id"));
        if (t.content.empty())
          continue;
        auto same = impl->addedByContent.find(t.content);
        if (same != impl->addedByContent.end()) {
          const AddedToken &o = impl->added[same->second];
          if (o.singleWord == t.singleWord && o.lstrip == t.lstrip &&
              o.rstrip == t.rstrip && o.normalized == t.normalized &&
              o.special == t.special)
            continue;
          t.id = o.id;
        } else if (auto it = impl->model->vocab.find(t.content);
                   it != impl->model->vocab.end()) {
          t.id = it->second;
        } else {
          t.id = nextId++;
        }
        if (t.special)
          impl->specialContents.insert(t.content);
        std::string shown = t.content;
        if (t.normalized && impl->normalizer) {
          impl->normalizer->apply(shown);
        }
        auto byId = impl->addedById.find(t.id);
        if (byId != impl->addedById.end()) {
          impl->added[byId->second] = t;
          impl->addedDecoded[byId->second] = shown;
          impl->addedByContent[t.content] = byId->second;
        } else {
          impl->addedById[t.id] = impl->added.size();
          impl->addedByContent[t.content] = impl->added.size();
          impl->added.push_back(t);
          impl->addedDecoded.push_back(shown);
        }
      }
    }
    for (size_t i = 0; i < impl->added.size(); ++i) {
      const AddedToken &t = impl->added[i];
      if (t.normalized) {
        if (!impl->addedDecoded[i].empty())
          impl->normalizedTrie.add(impl->addedDecoded[i], static_cast<int>(i));
      } else {
        impl->rawTrie.add(t.content, static_cast<int>(i));
      }
    }

    uint32_t maxId = 0;
    bool any = false;
    for (const auto &[tok, id] : impl->model->vocab) {
      maxId = std::max(maxId, id);
      any = true;
    }
    for (const AddedToken &t : impl->added) {
      maxId = std::max(maxId, t.id);
      any = true;
    }
    if (impl->postProcessor) {
      std::vector<uint32_t> ids;
      impl->postProcessor->collectIds(ids);
      for (uint32_t id : ids) {
        maxId = std::max(maxId, id);
        any = true;
      }
    }
    impl->vocabSize = any ? maxId + 1 : 0;

    std::string d =
        "BPE, " + std::to_string(impl->model->vocab.size()) + " tokens";
    if (!impl->added.empty())
      d += " (" + std::to_string(impl->added.size()) + " added)";
    d += ", " + std::to_string(impl->model->merges.size()) + " merges";
    if (impl->model->byteFallback)
      d += ", byte fallback";
    if (impl->model->ignoreMerges)
      d += ", ignore_merges";
    impl->describe = d;
  } catch (const LoadError &e) {
    return Status::error(name + ": " + e.message);
  } catch (const std::exception &e) {
    return Status::error(name + ": " + e.what());
  }
  Tokenizer t;
  t.impl = std::move(impl);
  return Expected<Tokenizer>(std::move(t));
}

Expected<std::vector<uint32_t>> Tokenizer::encode(std::string_view text,
                                                  bool addSpecialTokens) const {
  size_t bad = findInvalidUtf8(text);
  if (bad != std::string_view::npos)
    return Status::error("invalid UTF-8 at byte " + std::to_string(bad) +
                         " (tokenizers take text)");
  const Impl &m = *impl;
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  Bpe::Cache cache;
  try {
    Regex::Budget budget(kBudgetBase + kBudgetPerByte * text.size());
    for (const Segment &seg : m.findMatches(text, m.rawTrie)) {
      if (seg.token >= 0) {
        if (seg.end > seg.start)
          ids.push_back(m.added[seg.token].id);
        continue;
      }
      if (seg.end == seg.start)
        continue;
      std::string s(text.substr(seg.start, seg.end - seg.start));
      bool atStart = seg.start == 0;
      if (m.normalizer)
        m.normalizer->apply(s);
      for (const Segment &sub : m.findMatches(s, m.normalizedTrie)) {
        if (sub.token >= 0) {
          if (sub.end > sub.start)
            ids.push_back(m.added[sub.token].id);
          continue;
        }
        if (sub.end == sub.start)
          continue;
        m.encodePiece(s.substr(sub.start, sub.end - sub.start),
                      atStart && sub.start == 0, ids, cache);
      }
    }
  } catch (const RegexLimitError &e) {
    return Status::error(std::string("cannot tokenize this text: ") + e.what());
  }
  if (addSpecialTokens && m.postProcessor)
    m.postProcessor->apply(ids);
  return ids;
}

std::string Tokenizer::decode(const std::vector<uint32_t> &ids,
                              bool skipSpecialTokens) const {
  Expected<std::string> r = decodeChecked(ids, skipSpecialTokens);
  if (r)
    return std::move(*r);
  std::string raw;
  for (uint32_t id : ids)
    if (std::optional<std::string> t = idToToken(id))
      raw += *t;
  return raw;
}

Expected<std::string> Tokenizer::decodeChecked(const std::vector<uint32_t> &ids,
                                               bool skipSpecialTokens) const {
  const Impl &m = *impl;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (uint32_t id : ids) {
    std::string tok;
    auto a = m.addedById.find(id);
    if (a != m.addedById.end()) {
      tok = m.addedDecoded[a->second];
    } else {
      auto v = m.model->vocabR.find(id);
      if (v == m.model->vocabR.end())
        continue;
      tok = v->second;
    }
    if (skipSpecialTokens && m.specialContents.count(tok))
      continue;
    tokens.push_back(std::move(tok));
  }
  if (!m.decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i)
        out += ' ';
      out += tokens[i];
    }
    return out;
  }
  size_t bytes = 0;
  for (const std::string &t : tokens)
    bytes += t.size();
  try {
    Regex::Budget budget(kBudgetBase + kBudgetPerByte * bytes);
    m.decoder->chain(tokens);
  } catch (const RegexLimitError &e) {
    return Status::error(std::string("cannot decode these ids: ") + e.what());
  }
  std::string out;
  for (const std::string &t : tokens)
    out += t;
  return out;
}

uint32_t Tokenizer::vocabSize() const { return impl->vocabSize; }

std::optional<uint32_t> Tokenizer::tokenToId(std::string_view token) const {
  std::string key(token);
  auto a = impl->addedByContent.find(key);
  if (a != impl->addedByContent.end())
    return impl->added[a->second].id;
  auto v = impl->model->vocab.find(key);
  if (v != impl->model->vocab.end())
    return v->second;
  return std::nullopt;
}

std::optional<std::string> Tokenizer::idToToken(uint32_t id) const {
  auto a = impl->addedById.find(id);
  if (a != impl->addedById.end())
    return impl->addedDecoded[a->second];
  auto v = impl->model->vocabR.find(id);
  if (v != impl->model->vocabR.end())
    return v->second;
  return std::nullopt;
}

const std::vector<AddedToken> &Tokenizer::addedTokens() const {
  return impl->added;
}

const std::string &Tokenizer::name() const { return impl->name; }

std::string Tokenizer::describe() const { return impl->describe; }

} // namespace mtc::tok
