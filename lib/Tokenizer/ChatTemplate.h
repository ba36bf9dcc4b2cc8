//===- ChatTemplate.h - Jinja chat templates --------------------*- C++ -*-===//
//
// Part of mtc. Renders HuggingFace chat templates (`chat_template` of
// tokenizer_config.json, or chat_template.jinja) as transformers'
// apply_chat_template does: a Jinja2 environment with trim_blocks and
// lstrip_blocks, no trailing newline kept, the variables of a JSON object
// (`messages`, `bos_token`, `eos_token`, `add_generation_prompt`, ...), and
// HF's `raise_exception` and `tojson` (json.dumps, ensure_ascii=False).
//
// The Jinja subset is what published chat templates use (Llama 3/3.1,
// Qwen2/2.5/3, Mistral/Mixtral, Gemma, Phi-3, ChatML):
//
//   tags        {{ expr }}, {% for %} (unpacking, `if` filter, `else`,
//               loop.index/index0/revindex/revindex0/first/last/length/
//               previtem/nextitem), {% if %}/{% elif %}/{% else %},
//               {% set x = e %}, {% set ns.attr = e %}, {% break %},
//               {% continue %}, {% generation %} (rendered as its body),
//               {# comments #}, whitespace control {%- -%} {{- -}} {%+
//   literals    'strings' "strings" (escapes), integers, floats, true/false
//               (also True/False), none/None, [lists], {dicts}
//   operators   + - * / // % ** ~, == != < <= > >= (chained), in, not in,
//               and, or, not, `a if c else b`, x.attr, x[i], x[a:b:c]
//   tests       is [not] defined/undefined/none/string/number/integer/float/
//               boolean/true/false/mapping/iterable/sequence/even/odd
//   filters     trim, length/count, tojson(indent), upper, lower,
//               capitalize, title, string, int, float, first, last, join,
//               default/d, list, items, replace, reverse, safe
//   functions   raise_exception(msg), range(...), namespace(k=v, ...)
//   methods     str: strip/lstrip/rstrip, split, startswith, endswith,
//               upper, lower, replace, title, capitalize; dict: items, keys,
//               values, get
//
// Anything else (macros, blocks, includes, call/filter blocks, other
// filters and tests) is an error at parse or render time naming the
// template's line. Values print as Python's str() does (None, True, lists as
// ['a', 'b']); attribute or item access on an undefined value is an error, as
// in Jinja2. upper/lower/title/capitalize change ASCII letters only.
//
// Untrusted templates are bounded: expressions, blocks and values nest at
// most 200 levels (a parse or render error beyond), a namespace cannot hold a
// namespace (so values never form cycles), integers overflowing int64 are an
// error, and each rendering runs under RenderLimits.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_TOKENIZER_CHATTEMPLATE_H
#define MTC_LIB_TOKENIZER_CHATTEMPLATE_H

#include "lib/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace mtc::tok {

/// Bounds on one rendering; passing one is an error naming the template's
/// line. The defaults are far above what published templates need.
struct RenderLimits {
  /// Bytes of the rendered text, and of any one string.
  size_t maxOutput = size_t(64) << 20;
  /// Loop iterations in all, and the length of a range().
  int64_t maxIterations = 10'000'000;
  /// Items, dict keys and string bytes in any one list or dict, nested
  /// values counted in full.
  uint64_t maxValueSize = uint64_t(64) << 20;
  /// Steps in all: one per expression evaluated and per loop iteration, plus
  /// the string bytes and items each result holds and each search or
  /// comparison scans.
  uint64_t maxWork = uint64_t(1) << 32;
};

class ChatTemplate {
public:
  /// Parses \p source; \p name (e.g. "DIR/tokenizer_config.json:
  /// chat_template") prefixes every message, with the template's line.
  static Expected<ChatTemplate> parse(std::string_view source,
                                      const std::string &name);

  /// Renders with the variables of \p contextJson, a JSON object. Errors: a
  /// raise_exception (`<name>: template raised: <message>`), an unsupported
  /// filter/test/method, a type error, malformed context JSON, a limit of
  /// \p limits passed.
  Expected<std::string> render(std::string_view contextJson,
                               const RenderLimits &limits = {}) const;

  const std::string &name() const;
  const std::string &source() const;

  struct Impl;

private:
  std::shared_ptr<const Impl> impl;
};

} // namespace mtc::tok

#endif // MTC_LIB_TOKENIZER_CHATTEMPLATE_H
