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
//   literals    'strings' "strings" (Python's escapes but \N{...}),
//               integers, floats, true/false (also True/False),
//               none/None, [lists], {dicts}
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
// Numbers follow Python: int ** negative, / and float // and % as Python
// computes them, exact comparisons between int and float, floats printed as
// repr() does. Where Python raises, so does the template (0 ** -1, a float
// ** overflowing, a negative number to a fractional power, which Python
// makes complex); integers are 64-bit, so a result beyond int64 (2 ** 64,
// 1e300|int) is an error where Python would make a big integer.
//
// Untrusted templates are bounded: expressions, blocks and values nest at
// most 200 levels (a parse or render error beyond; expression trees are
// checked as they are built, so no recursion runs deeper), a namespace
// cannot hold a namespace (so values never form cycles), range() is at most
// 100,000 long (Jinja2's sandbox), and each rendering runs under
// RenderLimits.
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

/// Bounds on one rendering; passing one is an error naming the limit and
/// the template's line. The defaults stop any template within about a
/// second of CPU time and a few hundred MiB of memory, while the published
/// templates render conversations of up to about 25 MB (they spend about 10
/// steps per byte of conversation).
struct RenderLimits {
  /// Bytes of the rendered text, and of any one string.
  size_t maxOutput = size_t(64) << 20;
  /// Loop iterations in all. (range() is at most 100,000 long, as in
  /// Jinja2's sandbox, and at most maxIterations.)
  int64_t maxIterations = 250'000;
  /// The size of any one list or dict: its string bytes, dict keys and
  /// 128 bytes per item (about what an item takes in memory), nested values
  /// counted in full.
  uint64_t maxValueSize = uint64_t(64) << 20;
  /// Steps in all, about one per nanosecond of work: each byte a string
  /// operation makes, copies or scans, 128 per list or dict item made, 64
  /// per expression evaluated, 512 per loop iteration, 4 per dict key
  /// compared; printing or walking a list or dict spends its size.
  uint64_t maxWork = uint64_t(1) << 28;
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
