//===- Unicode.cpp - UTF-8, general categories, NFC -----------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/Unicode.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <vector>

namespace mtc::tok {

namespace {
#include "lib/Tokenizer/UnicodeTables.inc"

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161,
                   kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28,
                   kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

const char *const kCategoryNames[] = {
    "Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
    "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
    "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
static_assert(std::size(kCategoryNames) ==
                  static_cast<size_t>(Category::NumCategories),
              "one name per category");

/// The library's full canonical decomposition of \p cp: a pointer into
/// kDecompositions and a length, or a null pointer.
const uint32_t *decomposition(uint32_t cp, size_t &len) {
  struct Entry {
    uint32_t offset, len;
  };
  static const std::unordered_map<uint32_t, Entry> index = [] {
    std::unordered_map<uint32_t, Entry> m;
    size_t n = std::size(kDecompositions);
    for (size_t i = 0; i + 1 < n; i += 2 + kDecompositions[i + 1])
      m.emplace(kDecompositions[i],
                Entry{static_cast<uint32_t>(i + 2), kDecompositions[i + 1]});
    return m;
  }();
  auto it = index.find(cp);
  if (it == index.end())
    return nullptr;
  len = it->second.len;
  return kDecompositions + it->second.offset;
}

/// The primary composite of \p a and \p b, or 0.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase &&
      b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 &&
      b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  uint64_t key =
      (static_cast<uint64_t>(a) << 42) | (static_cast<uint64_t>(b) << 21);
  const uint64_t *end = std::end(kCompositions);
  const uint64_t *it = std::lower_bound(std::begin(kCompositions), end, key);
  if (it == end || (*it >> 21) != (key >> 21))
    return 0;
  return static_cast<uint32_t>(*it & 0x1FFFFF);
}

void decomposeInto(uint32_t cp, std::vector<uint32_t> &out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount)
      out.push_back(kTBase + s % kTCount);
    return;
  }
  size_t len = 0;
  const uint32_t *d = decomposition(cp, len);
  if (!d) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), d, d + len);
}

/// The canonical decomposition of \p s, canonically ordered.
std::vector<uint32_t> decomposeOrdered(std::string_view s) {
  std::vector<uint32_t> cps;
  cps.reserve(s.size());
  for (size_t pos = 0; pos < s.size();)
    decomposeInto(nextCodePoint(s, pos), cps);
  // Canonical ordering: a stable sort of each run of non-starters by class.
  for (size_t i = 0; i < cps.size();) {
    if (combiningClass(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combiningClass(cps[j]) != 0)
      ++j;
    // Insertion sort: stable, and the runs are short.
    for (size_t a = i + 1; a < j; ++a)
      for (size_t b = a;
           b > i && combiningClass(cps[b - 1]) > combiningClass(cps[b]); --b)
        std::swap(cps[b - 1], cps[b]);
    i = j;
  }
  return cps;
}

/// True when \p s can be returned unchanged by NFC and NFD without looking
/// closer: every code point is below U+0300 and has no decomposition
/// (U+00C0..U+00FF and a few others decompose under NFD, not NFC).
bool belowCombining(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0xCC) // U+0300 and above start with 0xCC or higher
      return false;
  return true;
}

} // namespace

const char *unicodeVersion() { return kUnicodeVersion; }

Category category(uint32_t cp) {
  if (cp > 0x10FFFF)
    return Category::Cn;
  uint32_t key = (cp << 5) | 31u;
  const uint32_t *it =
      std::upper_bound(std::begin(kCategoryRuns), std::end(kCategoryRuns), key);
  return static_cast<Category>(*(it - 1) & 31u);
}

char majorClass(Category c) {
  return c == Category::Cn ? 'C' : kCategoryNames[static_cast<int>(c)][0];
}

const char *categoryName(Category c) {
  return kCategoryNames[static_cast<int>(c)];
}

bool isWhiteSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {
/// Alphabetic, marks, decimal numbers and connector punctuation: the core of
/// both regex engines' \w. Alphabetic is the letters, the letter numbers
/// and Other_Alphabetic, whose members outside the marks are the circled and
/// squared Latin letters.
bool wordCore(uint32_t cp) {
  Category c = category(cp);
  char major = majorClass(c);
  if (major == 'L' || major == 'M' || c == Category::Nd || c == Category::Nl ||
      c == Category::Pc)
    return true;
  return (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
         (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189);
}
} // namespace

bool isClassWordChar(uint32_t cp) {
  if (cp < 0x80)
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') ||
           (cp >= 'A' && cp <= 'Z') || cp == '_';
  return wordCore(cp);
}

bool isWordChar(uint32_t cp) {
  // Oniguruma's Latin-1 table also counts the superscripts and fractions.
  if (cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0xBC && cp <= 0xBE))
    return true;
  return isClassWordChar(cp);
}

bool isRustWordChar(uint32_t cp) {
  if (cp < 0x80)
    return isClassWordChar(cp);
  return cp == 0x200C || cp == 0x200D || wordCore(cp);
}

uint8_t combiningClass(uint32_t cp) {
  if (cp < 0x300)
    return 0;
  uint32_t key = (cp << 8) | 0xFFu;
  const uint32_t *it = std::upper_bound(std::begin(kCombiningRuns),
                                        std::end(kCombiningRuns), key);
  return static_cast<uint8_t>(*(it - 1) & 0xFFu);
}

std::string toNFD(std::string_view s) {
  bool latin1 = true;
  for (unsigned char c : s)
    if (c >= 0xC3) // U+00C0 and above
      latin1 = false;
  if (latin1)
    return std::string(s);
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : decomposeOrdered(s))
    appendUtf8(out, cp);
  return out;
}

std::string toNFC(std::string_view s) {
  if (belowCombining(s))
    return std::string(s);
  std::vector<uint32_t> cps = decomposeOrdered(s);
  std::vector<uint32_t> result;
  result.reserve(cps.size());
  // The index of the last starter in result, and the combining class of the
  // last character appended after it (-1: none, the next one is adjacent).
  long starter = -1;
  int lastClass = -1;
  for (uint32_t c : cps) {
    int cc = combiningClass(c);
    if (starter >= 0 && (lastClass < 0 || (lastClass != 0 && lastClass < cc))) {
      if (uint32_t composite = compose(result[starter], c)) {
        result[starter] = composite;
        continue;
      }
    }
    if (cc == 0) {
      starter = static_cast<long>(result.size());
      lastClass = -1;
    } else {
      lastClass = cc;
    }
    result.push_back(c);
  }
  std::string out;
  out.reserve(s.size());
  for (uint32_t cp : result)
    appendUtf8(out, cp);
  return out;
}

//===----------------------------------------------------------------------===//
// UTF-8
//===----------------------------------------------------------------------===//

namespace {
/// Rust's validation step (core::str::lossy): the length of the valid
/// sequence at \p i, or 0 with \p bad set to the length of the maximal
/// invalid subpart (at least 1).
size_t validSequence(std::string_view s, size_t i, size_t &bad) {
  auto at = [&](size_t k) -> uint8_t {
    return k < s.size() ? static_cast<uint8_t>(s[k]) : 0;
  };
  auto cont = [&](size_t k) { return (at(k) & 0xC0) == 0x80; };
  uint8_t b = at(i);
  if (b < 0x80)
    return 1;
  if (b >= 0xC2 && b <= 0xDF) {
    if (!cont(i + 1)) {
      bad = 1;
      return 0;
    }
    return 2;
  }
  if (b >= 0xE0 && b <= 0xEF) {
    uint8_t c = at(i + 1);
    bool ok = (b == 0xE0)   ? (c >= 0xA0 && c <= 0xBF)
              : (b == 0xED) ? (c >= 0x80 && c <= 0x9F)
                            : (c >= 0x80 && c <= 0xBF);
    if (!ok) {
      bad = 1;
      return 0;
    }
    if (!cont(i + 2)) {
      bad = 2;
      return 0;
    }
    return 3;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    uint8_t c = at(i + 1);
    bool ok = (b == 0xF0)   ? (c >= 0x90 && c <= 0xBF)
              : (b == 0xF4) ? (c >= 0x80 && c <= 0x8F)
                            : (c >= 0x80 && c <= 0xBF);
    if (!ok) {
      bad = 1;
      return 0;
    }
    if (!cont(i + 2)) {
      bad = 2;
      return 0;
    }
    if (!cont(i + 3)) {
      bad = 3;
      return 0;
    }
    return 4;
  }
  bad = 1;
  return 0;
}
} // namespace

size_t findInvalidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0, n = validSequence(s, i, bad);
    if (n == 0)
      return i;
    i += n;
  }
  return std::string_view::npos;
}

void appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t bad = 0, n = validSequence(bytes, i, bad);
    if (n) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

} // namespace mtc::tok
