//===- Regex.h - The regex subset of tokenizer pre-tokenizers ---*- C++ -*-===//
//
// Part of mtc. A small backtracking matcher for the Oniguruma (Ruby syntax)
// patterns that HuggingFace tokenizer.json files use in Split pre-tokenizers
// and Replace normalizers, e.g. GPT-2's
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// and the Llama-3 / Qwen2 pattern with (?i:...) and \p{N}{1,3}. Matching is
// leftmost-first with backtracking, as in Oniguruma, over UTF-8 code points.
//
// Supported: literals and escapes (\t \n \r \f \v \a \e \xHH \x{H..} \uHHHH,
// escaped punctuation), `.`, classes [...] with ranges and negation, \s \S \d
// \D \w \W \h \H, \p{X} / \P{X} / \p{^X} for general categories (L, Lu, ...,
// long names such as Letter), groups (...) (?:...) (?i:...) (?-i:...), inline
// (?i) / (?-i), lookahead (?=...) (?!...), anchors ^ $ \A \z \Z \b \B, and
// quantifiers ? * + {n} {n,} {n,m} {,m}, lazy (??, *?, +?, {n,m}?) and
// possessive (?+ *+ ++) forms. Case-insensitive matching folds ASCII letters
// (and U+017F, U+212A) only. Anything else (lookbehind, backreferences,
// scripts such as \p{Han}, nested classes, POSIX brackets) is an error naming
// the construct and its offset in the pattern.
//
// Matching is bounded: more than kMaxSteps backtracking steps in one search,
// more steps than the budget of the enclosing Regex::Budget scope (the
// tokenizer gives each text a budget proportional to its length), or nesting
// deeper than kMaxDepth throws RegexLimitError (the tokenizer turns it into
// an error for that input). Patterns with nested quantifiers can need
// exponentially many steps here where Oniguruma's optimizations avoid them;
// the patterns of published tokenizers need a few steps per character.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_TOKENIZER_REGEX_H
#define MTC_LIB_TOKENIZER_REGEX_H

#include "lib/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mtc::tok {

struct RegexLimitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Regex {
public:
  static constexpr uint64_t kMaxSteps = 50'000'000;
  static constexpr int kMaxDepth = 2000;

  Regex();
  ~Regex();
  Regex(Regex &&) noexcept;
  Regex &operator=(Regex &&) noexcept;
  Regex(const Regex &) = delete;
  Regex &operator=(const Regex &) = delete;

  /// Compiles \p pattern; an error says "<what> at offset N" and leaves the
  /// regex as it was.
  Status compile(std::string_view pattern);
  /// A pattern matching \p text literally.
  static Regex literal(std::string_view text);

  /// The leftmost match starting at a code point boundary >= \p from.
  bool search(std::string_view text, size_t from, size_t &start,
              size_t &end) const;

  /// Onig's find_iter: successive matches, an empty match immediately after
  /// the previous match skipped. Offsets are byte offsets into \p text.
  std::vector<std::pair<size_t, size_t>> findAll(std::string_view text) const;

  const std::string &pattern() const { return source; }

  /// While alive, every search on this thread draws its steps from \p steps
  /// (nested scopes replace the outer one until they end).
  class Budget {
  public:
    explicit Budget(uint64_t steps);
    ~Budget();
    Budget(const Budget &) = delete;
    Budget &operator=(const Budget &) = delete;

  private:
    uint64_t left;
    uint64_t *outer;
  };

  struct Program;

private:
  std::unique_ptr<Program> prog;
  std::string source;
};

} // namespace mtc::tok

#endif // MTC_LIB_TOKENIZER_REGEX_H
