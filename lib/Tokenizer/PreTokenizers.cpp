//===- PreTokenizers.cpp - tokenizer.json pre-tokenizers ------------------===//
//
// Part of mtc. The pre-tokenizers of tokenizer.json (pre_tokenizers/*.rs):
// ByteLevel, Split, Metaspace, Digits and Sequence, over the splitting of
// NormalizedString::split (the five split behaviours, streamed), and
// GPT-2's byte-to-unicode map that the ByteLevel decoder shares.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/TokenizerInternal.h"

#include "lib/Tokenizer/Unicode.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace mtc::tok::hf {

namespace {

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

} // namespace

ByteMap::ByteMap() {
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

const ByteMap &byteMap() {
  static const ByteMap m;
  return m;
}

namespace {

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

} // namespace

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

} // namespace mtc::tok::hf
