//===- Tokenizer.cpp - HuggingFace tokenizer.json (BPE) -------------------===//
//
// Part of mtc. Each component follows the `tokenizers` library (Rust crate
// `tokenizers`, the code behind the Python package) step by step; the
// comments name the library's function where the behaviour is subtle.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/Tokenizer.h"

#include "lib/Format/MappedFile.h"
#include "lib/Tokenizer/Regex.h"
#include "lib/Tokenizer/Unicode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <functional>
#include <queue>
#include <sys/stat.h>
#include <unordered_map>
#include <unordered_set>

namespace mtc::tok {

using json = nlohmann::json;

namespace {

//===----------------------------------------------------------------------===//
// JSON access with paths in messages
//===----------------------------------------------------------------------===//

/// A load error; the message starts with the JSON path.
struct LoadError {
  std::string message;
};

[[noreturn]] void fail(const std::string &path, const std::string &msg) {
  throw LoadError{path.empty() ? msg : path + ": " + msg};
}

const char *typeName(const json &v) {
  switch (v.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::object:
    return "an object";
  case json::value_t::array:
    return "an array";
  case json::value_t::string:
    return "a string";
  case json::value_t::boolean:
    return "a boolean";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
    return "an integer";
  case json::value_t::number_float:
    return "a number";
  default:
    return "a binary value";
  }
}

std::string shortText(const std::string &s) {
  if (s.size() <= 40)
    return s;
  size_t cut = 40;
  while (cut > 0 && (static_cast<uint8_t>(s[cut]) & 0xC0) == 0x80)
    --cut;
  return s.substr(0, cut) + "...";
}

std::string join(const std::string &path, const char *key) {
  return path.empty() ? std::string(key) : path + "." + key;
}
std::string index(const std::string &path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

void expectObject(const json &v, const std::string &path) {
  if (!v.is_object())
    fail(path, std::string("expected an object, got ") + typeName(v));
}

/// The member \p key of object \p obj (at \p path); an error when missing.
const json &member(const json &obj, const std::string &path, const char *key) {
  auto it = obj.find(key);
  if (it == obj.end())
    fail(path, std::string("missing field '") + key + "'");
  return *it;
}

/// The member, or null when it is missing or null.
const json *optional(const json &obj, const char *key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null())
    return nullptr;
  return &*it;
}

std::string asString(const json &v, const std::string &path) {
  if (!v.is_string())
    fail(path, std::string("expected a string, got ") + typeName(v));
  return v.get<std::string>();
}

std::string stringField(const json &obj, const std::string &path,
                        const char *key) {
  return asString(member(obj, path, key), join(path, key));
}

bool boolField(const json &obj, const std::string &path, const char *key,
               bool def) {
  const json *v = optional(obj, key);
  if (!v)
    return def;
  if (!v->is_boolean())
    fail(join(path, key),
         std::string("expected a boolean, got ") + typeName(*v));
  return v->get<bool>();
}

int64_t asInt(const json &v, const std::string &path, int64_t lo, int64_t hi) {
  if (!v.is_number_integer())
    fail(path, std::string("expected an integer, got ") + typeName(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    fail(path, "integer out of range");
  int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    fail(path, "value " + std::to_string(x) + " out of range [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

constexpr int64_t kMaxId = (int64_t(1) << 31) - 1;

uint32_t asId(const json &v, const std::string &path) {
  return static_cast<uint32_t>(asInt(v, path, 0, kMaxId));
}

/// A single code point given as a JSON string (Metaspace replacement, Strip
/// content).
uint32_t charField(const json &obj, const std::string &path, const char *key) {
  std::string s = stringField(obj, path, key);
  size_t pos = 0;
  if (s.empty() || (nextCodePoint(s, pos), pos != s.size()))
    fail(join(path, key), "expected a single character, got '" + s + "'");
  pos = 0;
  return nextCodePoint(s, pos);
}

std::string typeOf(const json &obj, const std::string &path) {
  if (std::count(path.begin(), path.end(), '[') > 32)
    fail(path, "Sequence nesting deeper than 32 levels");
  expectObject(obj, path);
  return stringField(obj, path, "type");
}

[[noreturn]] void unsupportedType(const std::string &path,
                                  const std::string &type,
                                  const char *supported) {
  throw LoadError{path + ".type '" + type +
                  "' is not supported (supported: " + supported + ")"};
}

/// A {"String": s} or {"Regex": r} pattern (Split, Replace).
Regex patternField(const json &obj, const std::string &path) {
  const json &p = member(obj, path, "pattern");
  std::string pp = join(path, "pattern");
  expectObject(p, pp);
  if (const json *s = optional(p, "String"))
    return Regex::literal(asString(*s, pp + ".String"));
  if (const json *r = optional(p, "Regex")) {
    std::string src = asString(*r, pp + ".Regex");
    Regex re;
    if (Status st = re.compile(src); !st)
      fail(pp + ".Regex", "unsupported regex: " + st.message() + " (pattern '" +
                              shortText(src) + "')");
    return re;
  }
  fail(pp, "expected {\"String\": ...} or {\"Regex\": ...}");
}

//===----------------------------------------------------------------------===//
// Splitting (NormalizedString::split and the Pattern implementations)
//===----------------------------------------------------------------------===//

enum class Behavior {
  Removed,
  Isolated,
  MergedWithPrevious,
  MergedWithNext,
  Contiguous
};

Behavior behaviorField(const json &obj, const std::string &path) {
  std::string b = stringField(obj, path, "behavior");
  static const std::pair<const char *, Behavior> names[] = {
      {"Removed", Behavior::Removed},
      {"Isolated", Behavior::Isolated},
      {"MergedWithPrevious", Behavior::MergedWithPrevious},
      {"MergedWithNext", Behavior::MergedWithNext},
      {"Contiguous", Behavior::Contiguous}};
  for (const auto &[n, v] : names)
    if (b == n)
      return v;
  fail(join(path, "behavior"),
       "'" + b +
           "' is not a split behavior (Removed, Isolated, MergedWithPrevious, "
           "MergedWithNext, Contiguous)");
}

/// Receives a piece of a split: [start, end) of the split string and whether
/// it starts at the split string's offset 0.
using SliceFn = std::function<void(size_t, size_t)>;

/// Combines the (offsets, is_match) stream of Pattern::find_matches as
/// NormalizedString::split does for \p behavior, streaming.
class Combiner {
public:
  Combiner(Behavior b, const SliceFn &out) : b(b), out(out) {}

  void push(size_t s, size_t e, bool isMatch) {
    switch (b) {
    case Behavior::Isolated:
      out(s, e);
      break;
    case Behavior::Removed:
      if (!isMatch)
        out(s, e);
      break;
    case Behavior::Contiguous:
      if (isMatch == prevMatch && havePending)
        pe = e;
      else
        replace(s, e);
      prevMatch = isMatch;
      break;
    case Behavior::MergedWithPrevious:
      if (isMatch && !prevMatch && havePending)
        pe = e;
      else
        replace(s, e);
      prevMatch = isMatch;
      break;
    case Behavior::MergedWithNext:
      if (isMatch) {
        flush();
        replace(s, e);
      } else if (havePending) {
        out(ps, e);
        havePending = false;
      } else {
        out(s, e);
      }
      break;
    }
  }
  void finish() { flush(); }

private:
  void flush() {
    if (havePending)
      out(ps, pe);
    havePending = false;
  }
  void replace(size_t s, size_t e) {
    flush();
    ps = s;
    pe = e;
    havePending = true;
  }
  Behavior b;
  const SliceFn &out;
  bool prevMatch = false, havePending = false;
  size_t ps = 0, pe = 0;
};

/// Pattern::find_matches for a regex (with Invert when \p invert).
void regexMatches(const Regex &re, std::string_view s, bool invert,
                  Combiner &c) {
  if (s.empty()) {
    c.push(0, 0, invert);
    c.finish();
    return;
  }
  size_t prev = 0;
  // Onig's find_iter, streamed.
  size_t lastEnd = 0, lastMatchEnd = 0;
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
    if (prev != st)
      c.push(prev, st, invert);
    c.push(st, en, !invert);
    prev = en;
  }
  if (prev != s.size())
    c.push(prev, s.size(), invert);
  c.finish();
}

/// Pattern::find_matches for a char predicate (every matching char is a
/// match of its own).
template <typename Pred>
void charMatches(std::string_view s, Pred pred, Combiner &c) {
  if (s.empty()) {
    c.push(0, 0, false);
    c.finish();
    return;
  }
  size_t lastOffset = 0;
  for (size_t pos = 0; pos < s.size();) {
    size_t b = pos;
    uint32_t cp = nextCodePoint(s, pos);
    if (pred(cp)) {
      if (lastOffset < b)
        c.push(lastOffset, b, false);
      c.push(b, pos, true);
      lastOffset = pos;
    }
  }
  if (s.size() > lastOffset)
    c.push(lastOffset, s.size(), false);
  c.finish();
}

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

//===----------------------------------------------------------------------===//
// Normalizers
//===----------------------------------------------------------------------===//

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual void apply(std::string &s) const = 0;
};

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

//===----------------------------------------------------------------------===//
// Pre-tokenizers
//===----------------------------------------------------------------------===//

/// Receives a pre-token and whether it starts at offset 0 of the original
/// text (Metaspace's prepend_scheme "first").
using Emit = std::function<void(std::string &&, bool)>;

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  /// Splits \p text (non-empty); emits the non-empty pieces in order.
  virtual void run(std::string text, bool atStart, const Emit &emit) const = 0;
};

/// Emits the slices of \p text produced by \p split (a function taking a
/// Combiner), each non-empty one as a piece.
template <typename SplitFn>
void emitSlices(const std::string &text, bool atStart, Behavior b,
                SplitFn split,
                const std::function<void(std::string &&, bool)> &emit) {
  SliceFn out = [&](size_t s, size_t e) {
    if (e > s)
      emit(text.substr(s, e - s), atStart && s == 0);
  };
  Combiner c(b, out);
  split(c);
}

struct SequencePreTokenizer : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> items;
  void runFrom(size_t i, std::string text, bool atStart,
               const Emit &emit) const {
    if (i == items.size()) {
      emit(std::move(text), atStart);
      return;
    }
    Emit next = [&](std::string &&t, bool a) {
      runFrom(i + 1, std::move(t), a, emit);
    };
    items[i]->run(std::move(text), atStart, next);
  }
  void run(std::string text, bool atStart, const Emit &emit) const override {
    runFrom(0, std::move(text), atStart, emit);
  }
};

/// GPT-2's byte-to-unicode table (bytes_char in byte_level.rs).
struct ByteMap {
  std::string encoded[256]; // UTF-8 of the char for each byte
  std::unordered_map<uint32_t, uint8_t> decode;
  ByteMap() {
    std::vector<int> bs;
    for (int b = '!'; b <= '~'; ++b)
      bs.push_back(b);
    for (int b = 0xA1; b <= 0xAC; ++b)
      bs.push_back(b);
    for (int b = 0xAE; b <= 0xFF; ++b)
      bs.push_back(b);
    std::vector<uint32_t> cs(bs.begin(), bs.end());
    uint32_t n = 0;
    for (int b = 0; b < 256; ++b)
      if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
        bs.push_back(b);
        cs.push_back(256 + n++);
      }
    for (size_t i = 0; i < bs.size(); ++i) {
      appendUtf8(encoded[bs[i]], cs[i]);
      decode[cs[i]] = static_cast<uint8_t>(bs[i]);
    }
  }
};

const ByteMap &byteMap() {
  static const ByteMap m;
  return m;
}

const Regex &gpt2Regex() {
  static const Regex re = [] {
    Regex r;
    Status st = r.compile("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| "
                          "?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+");
    assert(st.ok() && "the GPT-2 pre-tokenizer pattern compiles");
    (void)st;
    return r;
  }();
  return re;
}

struct ByteLevelPreTokenizer : PreTokenizer {
  bool addPrefixSpace = true, useRegex = true;
  void run(std::string text, bool atStart, const Emit &emit) const override {
    if (addPrefixSpace && text[0] != ' ')
      text.insert(0, " ");
    const ByteMap &bm = byteMap();
    auto mapped = [&](std::string_view s) {
      std::string out;
      out.reserve(s.size() * 2);
      for (unsigned char c : s)
        out += bm.encoded[c];
      return out;
    };
    if (!useRegex) {
      emit(mapped(text), atStart);
      return;
    }
    SliceFn out = [&](size_t s, size_t e) {
      if (e > s)
        emit(mapped(std::string_view(text).substr(s, e - s)),
             atStart && s == 0);
    };
    Combiner c(Behavior::Isolated, out);
    regexMatches(gpt2Regex(), text, false, c);
  }
};

struct SplitPreTokenizer : PreTokenizer {
  Regex re;
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
  void run(std::string text, bool atStart, const Emit &emit) const override {
    emitSlices(
        text, atStart, behavior,
        [&](Combiner &c) { regexMatches(re, text, invert, c); }, emit);
  }
};

enum class PrependScheme { Always, First, Never };

struct MetaspacePreTokenizer : PreTokenizer {
  uint32_t replacement = 0x2581;
  std::string rep;
  PrependScheme scheme = PrependScheme::Always;
  bool split = true;
  void run(std::string text, bool atStart, const Emit &emit) const override {
    std::string s;
    s.reserve(text.size() + rep.size());
    for (char c : text) {
      if (c == ' ')
        s += rep;
      else
        s += c;
    }
    bool starts = s.compare(0, rep.size(), rep) == 0;
    if (!starts && (scheme == PrependScheme::Always ||
                    (scheme == PrependScheme::First && atStart)))
      s.insert(0, rep);
    if (!split) {
      emit(std::move(s), atStart);
      return;
    }
    uint32_t r = replacement;
    emitSlices(
        s, atStart, Behavior::MergedWithNext,
        [&](Combiner &c) {
          charMatches(
              s, [r](uint32_t cp) { return cp == r; }, c);
        },
        emit);
  }
};

struct DigitsPreTokenizer : PreTokenizer {
  bool individual = false;
  void run(std::string text, bool atStart, const Emit &emit) const override {
    emitSlices(
        text, atStart, individual ? Behavior::Isolated : Behavior::Contiguous,
        [&](Combiner &c) { charMatches(text, isNumber, c); }, emit);
  }
};

PrependScheme schemeField(const json &v, const std::string &path) {
  const json *s = optional(v, "prepend_scheme");
  PrependScheme scheme = PrependScheme::Always;
  if (s) {
    std::string name = asString(*s, join(path, "prepend_scheme"));
    if (name == "always")
      scheme = PrependScheme::Always;
    else if (name == "first")
      scheme = PrependScheme::First;
    else if (name == "never")
      scheme = PrependScheme::Never;
    else
      fail(join(path, "prepend_scheme"),
           "'" + name + "' is not one of always, first, never");
  }
  // Older files: add_prefix_space = false means never.
  if (const json *a = optional(v, "add_prefix_space")) {
    if (!a->is_boolean())
      fail(join(path, "add_prefix_space"),
           std::string("expected a boolean, got ") + typeName(*a));
    if (!a->get<bool>()) {
      if (scheme != PrependScheme::Never && s)
        fail(path, "add_prefix_space does not match declared prepend_scheme");
      scheme = PrependScheme::Never;
    }
  }
  return scheme;
}

std::unique_ptr<PreTokenizer> parsePreTokenizer(const json &v,
                                                const std::string &path) {
  std::string type = typeOf(v, path);
  if (type == "Sequence")
    return parseSequence<SequencePreTokenizer>(v, path, "pretokenizers",
                                               parsePreTokenizer);
  if (type == "ByteLevel") {
    auto p = std::make_unique<ByteLevelPreTokenizer>();
    p->addPrefixSpace = boolField(v, path, "add_prefix_space", true);
    p->useRegex = boolField(v, path, "use_regex", true);
    return p;
  }
  if (type == "Split") {
    auto p = std::make_unique<SplitPreTokenizer>();
    p->re = patternField(v, path);
    p->behavior = behaviorField(v, path);
    p->invert = boolField(v, path, "invert", false);
    return p;
  }
  if (type == "Metaspace") {
    auto p = std::make_unique<MetaspacePreTokenizer>();
    p->replacement = charField(v, path, "replacement");
    appendUtf8(p->rep, p->replacement);
    p->scheme = schemeField(v, path);
    p->split = boolField(v, path, "split", true);
    return p;
  }
  if (type == "Digits") {
    auto p = std::make_unique<DigitsPreTokenizer>();
    p->individual = boolField(v, path, "individual_digits", false);
    return p;
  }
  unsupportedType(path, type, "ByteLevel, Split, Metaspace, Digits, Sequence");
}

//===----------------------------------------------------------------------===//
// BPE (models/bpe/model.rs, word.rs)
//===----------------------------------------------------------------------===//

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

  const std::pair<uint32_t, uint32_t> *merge(uint32_t a, uint32_t b) const {
    auto it = merges.find((static_cast<uint64_t>(a) << 32) | b);
    return it == merges.end() ? nullptr : &it->second;
  }

  /// BPE::merge_word + Word::merge_all.
  void mergeWord(const std::string &w, std::vector<uint32_t> &out) const {
    std::vector<Symbol> sym;
    sym.reserve(w.size());
    auto add = [&](uint32_t c, size_t len) {
      long n = static_cast<long>(sym.size());
      if (!sym.empty())
        sym.back().next = n;
      sym.push_back({c, n - 1, -1, len});
    };
    bool haveUnk = false;
    uint32_t pendUnk = 0;
    size_t pendLen = 0;
    std::string s;
    for (size_t i = 0; i < w.size();) {
      size_t end = i + utf8Length(static_cast<uint8_t>(w[i]));
      bool isFirst = i == 0, isLast = end >= w.size();
      size_t byteLen = end - i;
      s.assign(w, i, byteLen);
      if (!isFirst && hasPrefix)
        s.insert(0, prefix);
      if (isLast && hasSuffix)
        s += suffix;
      i = end;
      auto it = vocab.find(s);
      if (it != vocab.end()) {
        if (haveUnk) {
          add(pendUnk, pendLen);
          haveUnk = false;
        }
        add(it->second, byteLen);
        continue;
      }
      if (byteFallback) {
        bool all = true;
        for (unsigned char b : s)
          all = all && byteIds[b] >= 0;
        if (all) {
          for (unsigned char b : s)
            add(static_cast<uint32_t>(byteIds[b]), 1);
          continue;
        }
      }
      if (unkId) {
        if (haveUnk && fuseUnk) {
          pendLen += byteLen;
        } else {
          if (haveUnk)
            add(pendUnk, pendLen);
          haveUnk = true;
          pendUnk = *unkId;
          pendLen = byteLen;
        }
      }
    }
    if (haveUnk)
      add(pendUnk, pendLen);

    struct Merge {
      size_t pos;
      uint32_t rank, newId;
    };
    auto later = [](const Merge &a, const Merge &b) {
      return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    std::priority_queue<Merge, std::vector<Merge>, decltype(later)> queue(
        later);
    for (size_t i = 0; i + 1 < sym.size(); ++i)
      if (auto m = merge(sym[i].c, sym[i + 1].c))
        queue.push({i, m->first, m->second});
    while (!queue.empty()) {
      Merge top = queue.top();
      queue.pop();
      Symbol &cur = sym[top.pos];
      if (cur.len == 0 || cur.next == -1)
        continue;
      size_t nextPos = static_cast<size_t>(cur.next);
      Symbol right = sym[nextPos];
      auto m = merge(cur.c, right.c);
      if (!m || m->second != top.newId)
        continue;
      cur.c = top.newId;
      cur.len += right.len;
      cur.next = right.next;
      sym[nextPos].len = 0;
      if (right.next > -1 && static_cast<size_t>(right.next) < sym.size())
        sym[right.next].prev = static_cast<long>(top.pos);
      const Symbol &c = sym[top.pos];
      if (c.prev >= 0)
        if (auto pm = merge(sym[c.prev].c, c.c))
          queue.push({static_cast<size_t>(c.prev), pm->first, pm->second});
      if (c.next >= 0 && static_cast<size_t>(c.next) < sym.size())
        if (auto nm = merge(c.c, sym[c.next].c))
          queue.push({top.pos, nm->first, nm->second});
    }
    for (const Symbol &x : sym)
      if (x.len != 0)
        out.push_back(x.c);
  }

  void tokenize(const std::string &w, std::vector<uint32_t> &out,
                Cache &cache) const {
    if (w.empty())
      return;
    if (ignoreMerges) {
      auto it = vocab.find(w);
      if (it != vocab.end()) {
        out.push_back(it->second);
        return;
      }
    }
    bool cacheable = w.size() < 256;
    if (cacheable) {
      auto it = cache.find(w);
      if (it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    size_t before = out.size();
    mergeWord(w, out);
    if (cacheable && cache.size() < 200000)
      cache.emplace(w, std::vector<uint32_t>(out.begin() + before, out.end()));
  }
};

std::unique_ptr<Bpe> parseModel(const json &root) {
  const json &m = member(root, "", "model");
  std::string path = "model";
  expectObject(m, path);
  std::string type;
  if (const json *t = optional(m, "type"))
    type = asString(*t, "model.type");
  else if (m.contains("merges"))
    type = "BPE";
  else
    fail(path, "missing field 'type'");
  if (type != "BPE")
    unsupportedType(path, type, "BPE");

  auto bpe = std::make_unique<Bpe>();
  if (const json *d = optional(m, "dropout")) {
    if (!d->is_number())
      fail("model.dropout",
           std::string("expected a number, got ") + typeName(*d));
    if (d->get<double>() != 0.0)
      fail("model.dropout",
           "BPE dropout " + d->dump() +
               " is not supported (it makes tokenization random)");
  }
  const json &vocab = member(m, path, "vocab");
  expectObject(vocab, "model.vocab");
  bpe->vocab.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    uint32_t id =
        asId(it.value(), "model.vocab['" + shortText(it.key()) + "']");
    bpe->vocab[it.key()] = id;
    bpe->vocabR.emplace(id, it.key());
  }
  if (const json *u = optional(m, "unk_token")) {
    std::string unk = asString(*u, "model.unk_token");
    auto it = bpe->vocab.find(unk);
    if (it == bpe->vocab.end())
      fail("model.unk_token", "'" + unk + "' is not in model.vocab");
    bpe->unkId = it->second;
  }
  if (const json *p = optional(m, "continuing_subword_prefix")) {
    bpe->prefix = asString(*p, "model.continuing_subword_prefix");
    bpe->hasPrefix = true;
  }
  if (const json *s = optional(m, "end_of_word_suffix")) {
    bpe->suffix = asString(*s, "model.end_of_word_suffix");
    bpe->hasSuffix = true;
  }
  bpe->fuseUnk = boolField(m, path, "fuse_unk", false);
  bpe->byteFallback = boolField(m, path, "byte_fallback", false);
  bpe->ignoreMerges = boolField(m, path, "ignore_merges", false);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = bpe->vocab.find(name);
    bpe->byteIds[b] =
        it == bpe->vocab.end() ? -1 : static_cast<int>(it->second);
  }

  const json &merges = member(m, path, "merges");
  if (!merges.is_array())
    fail("model.merges",
         std::string("expected an array, got ") + typeName(merges));
  bpe->merges.reserve(merges.size());
  uint32_t rank = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    const json &e = merges[i];
    std::string ip = index("model.merges", i);
    std::string a, b;
    if (e.is_string()) {
      // The legacy "a b" form; "#version" lines are skipped.
      std::string line = e.get<std::string>();
      if (line.rfind("#version", 0) == 0)
        continue;
      size_t sp = line.find(' ');
      if (sp == std::string::npos ||
          line.find(' ', sp + 1) != std::string::npos)
        fail(ip, "'" + shortText(line) + "' is not a pair of tokens 'a b'");
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2) {
      a = asString(e[0], index(ip, 0));
      b = asString(e[1], index(ip, 1));
    } else {
      fail(ip, std::string("expected a pair of tokens, got ") + typeName(e));
    }
    auto ia = bpe->vocab.find(a), ib = bpe->vocab.find(b);
    if (ia == bpe->vocab.end())
      fail(ip, "token '" + shortText(a) + "' is not in model.vocab");
    if (ib == bpe->vocab.end())
      fail(ip, "token '" + shortText(b) + "' is not in model.vocab");
    if (b.size() < bpe->prefix.size())
      fail(ip, "token '" + shortText(b) +
                   "' is shorter than the continuing_subword_prefix");
    std::string merged = a + b.substr(bpe->prefix.size());
    auto in = bpe->vocab.find(merged);
    if (in == bpe->vocab.end())
      fail(ip, "the merged token '" + shortText(merged) +
                   "' is not in model.vocab");
    bpe->merges[(static_cast<uint64_t>(ia->second) << 32) | ib->second] = {
        rank++, in->second};
  }
  return bpe;
}

//===----------------------------------------------------------------------===//
// Post-processors
//===----------------------------------------------------------------------===//

struct PostProcessor {
  virtual ~PostProcessor() = default;
  /// Adds the special tokens around \p ids (only called with
  /// add_special_tokens).
  virtual void apply(std::vector<uint32_t> &ids) const = 0;
  virtual void collectIds(std::vector<uint32_t> &out) const = 0;
};

struct NoopPostProcessor : PostProcessor {
  void apply(std::vector<uint32_t> &) const override {}
  void collectIds(std::vector<uint32_t> &) const override {}
};

struct TemplatePostProcessor : PostProcessor {
  /// The single template: a sequence of special-token id lists, with an empty
  /// optional for the sequence A.
  std::vector<std::optional<std::vector<uint32_t>>> items;
  void apply(std::vector<uint32_t> &ids) const override {
    std::vector<uint32_t> out;
    out.reserve(ids.size() + 4);
    for (const auto &it : items) {
      if (it)
        out.insert(out.end(), it->begin(), it->end());
      else
        out.insert(out.end(), ids.begin(), ids.end());
    }
    ids = std::move(out);
  }
  void collectIds(std::vector<uint32_t> &out) const override {
    for (const auto &it : items)
      if (it)
        out.insert(out.end(), it->begin(), it->end());
  }
};

struct SequencePostProcessor : PostProcessor {
  std::vector<std::unique_ptr<PostProcessor>> items;
  void apply(std::vector<uint32_t> &ids) const override {
    for (const auto &p : items)
      p->apply(ids);
  }
  void collectIds(std::vector<uint32_t> &out) const override {
    for (const auto &p : items)
      p->collectIds(out);
  }
};

/// A ["token", id] pair (BertProcessing, RobertaProcessing).
uint32_t tokenPairId(const json &v, const std::string &path, const char *key) {
  const json &p = member(v, path, key);
  std::string kp = join(path, key);
  if (!p.is_array() || p.size() != 2)
    fail(kp, std::string("expected [token, id], got ") + typeName(p));
  asString(p[0], index(kp, 0));
  return asId(p[1], index(kp, 1));
}

std::unique_ptr<PostProcessor> parsePostProcessor(const json &v,
                                                  const std::string &path) {
  std::string type = typeOf(v, path);
  if (type == "ByteLevel")
    return std::make_unique<NoopPostProcessor>();
  if (type == "Sequence")
    return parseSequence<SequencePostProcessor>(v, path, "processors",
                                                parsePostProcessor);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto t = std::make_unique<TemplatePostProcessor>();
    t->items.push_back(std::vector<uint32_t>{tokenPairId(v, path, "cls")});
    t->items.push_back(std::nullopt);
    t->items.push_back(std::vector<uint32_t>{tokenPairId(v, path, "sep")});
    return t;
  }
  if (type == "TemplateProcessing") {
    auto t = std::make_unique<TemplatePostProcessor>();
    const json &special = member(v, path, "special_tokens");
    std::string sp = join(path, "special_tokens");
    expectObject(special, sp);
    const json &single = member(v, path, "single");
    std::string gp = join(path, "single");
    if (!single.is_array())
      fail(gp, std::string("expected an array, got ") + typeName(single));
    for (size_t i = 0; i < single.size(); ++i) {
      const json &piece = single[i];
      std::string pp = index(gp, i);
      expectObject(piece, pp);
      if (const json *seq = optional(piece, "Sequence")) {
        expectObject(*seq, pp + ".Sequence");
        std::string id = stringField(*seq, pp + ".Sequence", "id");
        if (id != "A")
          fail(pp + ".Sequence.id",
               "'" + id + "' in the single template (expected A)");
        t->items.push_back(std::nullopt);
      } else if (const json *tok = optional(piece, "SpecialToken")) {
        expectObject(*tok, pp + ".SpecialToken");
        std::string id = stringField(*tok, pp + ".SpecialToken", "id");
        auto it = special.find(id);
        if (it == special.end())
          fail(pp + ".SpecialToken.id", "'" + id + "' is not in " + sp);
        std::string ep = sp + "['" + shortText(id) + "']";
        expectObject(*it, ep);
        const json &ids = member(*it, ep, "ids");
        if (!ids.is_array())
          fail(ep + ".ids",
               std::string("expected an array, got ") + typeName(ids));
        std::vector<uint32_t> list;
        for (size_t k = 0; k < ids.size(); ++k)
          list.push_back(asId(ids[k], index(ep + ".ids", k)));
        t->items.push_back(std::move(list));
      } else {
        fail(pp, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
    }
    return t;
  }
  unsupportedType(path, type,
                  "ByteLevel, TemplateProcessing, BertProcessing, "
                  "RobertaProcessing, Sequence");
}

//===----------------------------------------------------------------------===//
// Decoders
//===----------------------------------------------------------------------===//

struct Decoder {
  virtual ~Decoder() = default;
  virtual void chain(std::vector<std::string> &tokens) const = 0;
};

struct SequenceDecoder : Decoder {
  std::vector<std::unique_ptr<Decoder>> items;
  void chain(std::vector<std::string> &tokens) const override {
    for (const auto &d : items)
      d->chain(tokens);
  }
};

struct ByteLevelDecoder : Decoder {
  void chain(std::vector<std::string> &tokens) const override {
    const ByteMap &bm = byteMap();
    std::string bytes;
    for (const std::string &t : tokens) {
      std::string mapped;
      bool ok = true;
      for (size_t pos = 0; pos < t.size() && ok;) {
        auto it = bm.decode.find(nextCodePoint(t, pos));
        if (it == bm.decode.end())
          ok = false;
        else
          mapped += static_cast<char>(it->second);
      }
      bytes += ok ? mapped : t;
    }
    tokens.assign(1, utf8Lossy(bytes));
  }
};

/// "<0xNN>": Rust's u8::from_str_radix(&token[3..5], 16), which accepts a
/// leading '+'.
bool byteToken(const std::string &t, uint8_t &out) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>')
    return false;
  auto hex = [](char c, int &v) {
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else
      return false;
    return true;
  };
  int hi, lo;
  if (t[3] == '+') {
    if (!hex(t[4], lo))
      return false;
    out = static_cast<uint8_t>(lo);
    return true;
  }
  if (!hex(t[3], hi) || !hex(t[4], lo))
    return false;
  out = static_cast<uint8_t>(hi * 16 + lo);
  return true;
}

struct ByteFallbackDecoder : Decoder {
  void chain(std::vector<std::string> &tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty())
        return;
      if (findInvalidUtf8(pending) == std::string::npos)
        out.push_back(pending);
      else
        for (size_t i = 0; i < pending.size(); ++i)
          out.push_back("\xEF\xBF\xBD");
      pending.clear();
    };
    for (std::string &t : tokens) {
      uint8_t b;
      if (byteToken(t, b)) {
        pending += static_cast<char>(b);
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
};

struct FuseDecoder : Decoder {
  void chain(std::vector<std::string> &tokens) const override {
    std::string all;
    for (const std::string &t : tokens)
      all += t;
    tokens.assign(1, all);
  }
};

struct StripDecoder : Decoder {
  uint32_t content = ' ';
  size_t start = 0, stop = 0;
  void chain(std::vector<std::string> &tokens) const override {
    for (std::string &t : tokens) {
      std::vector<size_t> starts; // byte offset of each char
      for (size_t pos = 0; pos < t.size();) {
        starts.push_back(pos);
        pos += utf8Length(static_cast<uint8_t>(t[pos]));
      }
      size_t n = starts.size();
      auto charAt = [&](size_t i) {
        size_t p = starts[i];
        return nextCodePoint(t, p);
      };
      size_t startCut = 0;
      for (size_t i = 0; i < std::min(start, n); ++i) {
        if (charAt(i) != content)
          break;
        startCut = i + 1;
      }
      size_t stopCut = n;
      for (size_t i = 0; i < stop && i < n; ++i) {
        size_t idx = n - i - 1;
        if (charAt(idx) != content)
          break;
        stopCut = idx;
      }
      if (stopCut <= startCut) {
        t.clear();
        continue;
      }
      size_t b = starts[startCut];
      size_t e = stopCut < n ? starts[stopCut] : t.size();
      t = t.substr(b, e - b);
    }
  }
};

struct ReplaceDecoder : Decoder {
  Regex re;
  std::string content;
  void chain(std::vector<std::string> &tokens) const override {
    for (std::string &t : tokens)
      t = replaceAll(re, t, content);
  }
};

struct MetaspaceDecoder : Decoder {
  uint32_t replacement = 0x2581;
  PrependScheme scheme = PrependScheme::Always;
  void chain(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string &t = tokens[i];
      std::string out;
      for (size_t pos = 0; pos < t.size();) {
        size_t b = pos;
        uint32_t c = nextCodePoint(t, pos);
        if (c == replacement) {
          if (!(i == 0 && scheme != PrependScheme::Never))
            out += ' ';
        } else {
          out.append(t, b, pos - b);
        }
      }
      tokens[i] = std::move(out);
    }
  }
};

std::unique_ptr<Decoder> parseDecoder(const json &v, const std::string &path) {
  std::string type = typeOf(v, path);
  if (type == "Sequence")
    return parseSequence<SequenceDecoder>(v, path, "decoders", parseDecoder);
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback")
    return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse")
    return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    auto d = std::make_unique<StripDecoder>();
    d->content = charField(v, path, "content");
    d->start = static_cast<size_t>(
        asInt(member(v, path, "start"), join(path, "start"), 0, 1 << 20));
    d->stop = static_cast<size_t>(
        asInt(member(v, path, "stop"), join(path, "stop"), 0, 1 << 20));
    return d;
  }
  if (type == "Replace") {
    auto d = std::make_unique<ReplaceDecoder>();
    d->re = patternField(v, path);
    d->content = stringField(v, path, "content");
    return d;
  }
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDecoder>();
    d->replacement = charField(v, path, "replacement");
    d->scheme = schemeField(v, path);
    return d;
  }
  unsupportedType(path, type,
                  "ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, "
                  "Sequence");
}

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
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    std::string what = e.what();
    size_t p = what.find("] ");
    return Status::error(name + ": malformed JSON: " +
                         (p == std::string::npos ? what : what.substr(p + 2)));
  }
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
