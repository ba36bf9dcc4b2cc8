//===- ChatTemplateTest.cpp - Chat templates and instruction data ---------===//
//
// Part of mtc. Rendering against transformers' apply_chat_template for the
// templates and conversations of test/fixtures/chat/templates.json, token ids
// and assistant masks against transformers' return_assistant_tokens_mask
// (test/fixtures/chat/<name>/expected.json), loss-mask files, and errors.
// Fixtures: test/fixtures/gen_chat_fixtures.py.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplate.h"
#include "lib/Tokenizer/Instruct.h"
#include "lib/Tokenizer/TokenFile.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace mtc;
using namespace mtc::tok;
using json = nlohmann::json;

namespace {

std::string chatDir() {
  return std::string(MTC_SOURCE_DIR) + "/test/fixtures/chat";
}

std::string readText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// "ok", or the error of parsing \p src as template "T".
std::string parseError(const std::string &src) {
  Expected<ChatTemplate> t = ChatTemplate::parse(src, "T");
  return t ? std::string("ok") : t.message();
}

std::string renderSimple(const std::string &tmpl, const json &ctx) {
  Expected<ChatTemplate> t = ChatTemplate::parse(tmpl, "t");
  if (!t)
    return "PARSE ERROR: " + t.message();
  Expected<std::string> r = t->render(ctx.dump());
  if (!r)
    return "RENDER ERROR: " + r.message();
  return *r;
}

TEST(ChatTemplate, MatchesTransformers) {
  json fx = json::parse(readText(chatDir() + "/templates.json"));
  int checked = 0;
  for (const json &c : fx["cases"]) {
    std::string name = c["template"];
    const json &t = fx["templates"][name];
    Expected<ChatTemplate> tmpl =
        ChatTemplate::parse(t["template"].get<std::string>(), name);
    ASSERT_TRUE(tmpl.ok()) << tmpl.message();
    json ctx = {{"messages", fx["conversations"][c["conversation"].get<int>()]},
                {"add_generation_prompt", c["add_generation_prompt"]},
                {"tools", nullptr},
                {"documents", nullptr}};
    for (const char *k : {"bos_token", "eos_token"})
      if (t.contains(k))
        ctx[k] = t[k];
    Expected<std::string> r = tmpl->render(ctx.dump());
    std::string what = name + " conversation " +
                       std::to_string(c["conversation"].get<int>()) +
                       (c["add_generation_prompt"].get<bool>() ? " +gen" : "");
    if (c.contains("error")) {
      ASSERT_FALSE(r.ok()) << what;
      EXPECT_EQ(r.message(),
                name + ": template raised: " + c["error"].get<std::string>())
          << what;
    } else {
      ASSERT_TRUE(r.ok()) << what << ": " << r.message();
      EXPECT_EQ(*r, c["text"].get<std::string>()) << what;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 8 * 5 * 2);
}

TEST(ChatTemplate, DefaultTemplateIsTheFixturesCopy) {
  json fx = json::parse(readText(chatDir() + "/templates.json"));
  EXPECT_EQ(std::string(kDefaultChatTemplate),
            fx["templates"]["default"]["template"].get<std::string>());
}

TEST(ChatTemplate, WhitespaceControl) {
  json ctx = {{"x", 1}};
  EXPECT_EQ(renderSimple("a  {{- x -}}  b", ctx), "a1b");
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: the
  // indentation before it.
  EXPECT_EQ(renderSimple("{% if x %}\n    yes\n    {% endif %}\nend", ctx),
            "    yes\nend");
  EXPECT_EQ(renderSimple("a {% if x %}b{% endif %} c", ctx), "a b c");
  EXPECT_EQ(renderSimple("  {%+ if x %}b{% endif %}", ctx), "  b");
  EXPECT_EQ(renderSimple("{{ x }}\n", ctx), "1");
  EXPECT_EQ(renderSimple("{# c #}\n{{ x }}", ctx), "1");
  EXPECT_EQ(renderSimple("{{ '}}' ~ \"%}\" }}", ctx), "}}%}");
}

TEST(ChatTemplate, Expressions) {
  json ctx = {{"m", {{"role", "user"}, {"content", " Hi "}}}, {"l", {1, 2, 3}}};
  EXPECT_EQ(renderSimple("{{ m.role + '|' + m['content'] | trim }}", ctx),
            "user|Hi");
  EXPECT_EQ(renderSimple("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 "
                         "}} {{ 2 ** 10 }}",
                         ctx),
            "7 3 2 3.5 1024");
  EXPECT_EQ(renderSimple("{{ 1 < 2 < 3 }} {{ 2 in l }} {{ 'us' in m.role }} "
                         "{{ 5 not in l }} {{ not l }}",
                         ctx),
            "True True True True False");
  // replace: the method takes a count (Python's str.replace), the filter
  // replaces every occurrence.
  EXPECT_EQ(renderSimple("{{ 'a-b-c-d'.replace('-', '+', 2) }} "
                         "{{ 'a-b-c'.replace('-', '') }} {{ 'ab'.replace('', "
                         "'.') }} {{ 'a-b-c' | replace('-', '=') }}",
                         ctx),
            "a+b+c-d abc .a.b. a=b=c");
  EXPECT_EQ(renderSimple("{{ l[-1] }} {{ l[::-1] }} {{ l[1:] | length }} {{ "
                         "'abc'[1:] }}",
                         ctx),
            "3 [3, 2, 1] 2 bc");
  EXPECT_EQ(renderSimple("{{ 'yes' if m.missing is not defined else 'no' }} "
                         "{{ m.missing | default('d') }} {{ none is none }}",
                         ctx),
            "yes d True");
  EXPECT_EQ(renderSimple("{% set ns = namespace(a=1) %}{% for i in l %}{% set "
                         "ns.a = ns.a * 2 %}{% set local = i %}{% endfor %}{{ "
                         "ns.a }}{{ local is defined }}",
                         ctx),
            "8False");
  EXPECT_EQ(renderSimple("{% for i in l %}{% if i == 2 %}{% continue %}{% "
                         "endif %}{{ i }}{% else %}empty{% endfor %}{% for i "
                         "in [] %}x{% else %}empty{% endfor %}",
                         ctx),
            "13empty");
  EXPECT_EQ(renderSimple("{{ {'a': 'é\"', 'b': [1, none, 2.0]} | tojson }} "
                         "{{ [1] | tojson(indent=2) }}",
                         ctx),
            "{\"a\": \"é\\\"\", \"b\": [1, null, 2.0]} [\n  1\n]");
  EXPECT_EQ(renderSimple("{{ ' a b  c '.split() }} {{ 'a,b'.split(',') }} {{ "
                         "'xy'.startswith('x') }} {{ '  s '.rstrip() }}|",
                         ctx),
            "['a', 'b', 'c'] ['a', 'b'] True   s|");
}

TEST(ChatTemplate, Errors) {
  EXPECT_EQ(parseError("a\n{% macro f() %}{% endmacro %}"),
            "T: line 2: unsupported Jinja construct: '{% macro %}'");
  EXPECT_EQ(parseError("{% if x %}\nno end"),
            "T: line 1: '{% if %}' has no '{% endif %}' to close it");
  EXPECT_EQ(parseError("{{ x"), "T: line 1: unclosed '{{' tag");
  EXPECT_EQ(parseError("{% endfor %}"), "T: line 1: unexpected '{% endfor %}'");
  EXPECT_EQ(parseError("{{ x + }}"),
            "T: line 1: unexpected the end of the tag in an expression");
  json ctx = {{"x", 1}};
  EXPECT_EQ(renderSimple("\n{{ x | wordwrap }}", ctx),
            "RENDER ERROR: t: line 2: unsupported Jinja filter 'wordwrap'");
  EXPECT_EQ(renderSimple("{{ raise_exception('bad ' ~ x) }}", ctx),
            "RENDER ERROR: t: template raised: bad 1");
  EXPECT_EQ(renderSimple("{{ y.z }}", ctx),
            "RENDER ERROR: t: line 1: cannot read attribute 'z' of an "
            "undefined value");
  EXPECT_EQ(renderSimple("{{ 'a' + 1 }}", ctx),
            "RENDER ERROR: t: line 1: unsupported operand types for +: 'str' "
            "and 'int'");
  // The context: JSON numbers beyond a double or int64 are errors.
  Expected<ChatTemplate> t = ChatTemplate::parse("{{ x }}", "C");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->render("{\"x\": 1e999}").message(),
            "C: the context: line 1, column 7: number 1e999 is out of the "
            "range of a double");
  EXPECT_EQ(t->render("{\"x\": 18446744073709551615}").message(),
            "C: the context holds the integer 18446744073709551615, beyond 64 "
            "bits (integers here are 64-bit)");
  EXPECT_EQ(t->render("{\"x\": ").message(),
            "C: the context: not valid JSON: parse error at line 1, column 7: "
            "syntax error while parsing value - unexpected end of input; "
            "expected '[', '{', or a literal");
}

// Token ids and masks against transformers' apply_chat_template with
// return_assistant_tokens_mask (the same template with {% generation %}).
TEST(ChatTemplate, OperatorPrecedence) {
  json ctx = json::object();
  // Jinja2's order: or < and < not < comparisons < ~ < + - < * / // % < **,
  // all left associative; unary minus binds before **.
  EXPECT_EQ(
      renderSimple("{{ not 1 == 2 }} {{ not 1 and 0 }} {{ 1 or 0 and 0 }} "
                   "{{ not 1 in [2] }} {{ 1 < 2 == true }}",
                   ctx),
      "True False 1 True False");
  EXPECT_EQ(renderSimple("{{ 2 + 3 * 4 ** 2 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} "
                         "{{ 'a' ~ 1 + 2 }} {{ 3 - 1 - 1 }} {{ 16 // 4 // 2 }}",
                         ctx),
            "50 64 4 a3 1 2");
  EXPECT_EQ(renderSimple("{{ 1 if 0 else 2 if 0 else 3 }}", ctx), "3");
  // -x|f is (-x)|f.
  EXPECT_EQ(renderSimple("{{ -'a'|length }}", ctx),
            "RENDER ERROR: t: line 1: bad operand type for unary -: 'str'");
}

// Inputs that crashed or hung the engine before it bounded nesting, integer
// overflow, value size and work (found reviewing the engine for the chat
// template fuzzer, test/fuzz/ChatTemplateFuzzer.cpp).
TEST(ChatTemplate, BoundsUntrustedTemplates) {
  const std::string deep = "T: line 1: the expression nests more than 200 "
                           "levels deep";
  EXPECT_EQ(parseError("{{ " + std::string(3000, '(') + "1" +
                       std::string(3000, ')') + " }}"),
            deep);
  std::string chain = "{{ 1";
  for (int k = 0; k < 3000; ++k)
    chain += "+1";
  EXPECT_EQ(parseError(chain + " }}"), deep);
  std::string filters = "{{ 1";
  for (int k = 0; k < 300; ++k)
    filters += "|string";
  EXPECT_EQ(parseError(filters + " }}"), deep);
  std::string nots = "{{ ";
  for (int k = 0; k < 3000; ++k)
    nots += "not ";
  EXPECT_EQ(parseError(nots + "1 }}"), deep);
  std::string blocks;
  for (int k = 0; k < 201; ++k)
    blocks += "{% if 1 %}";
  EXPECT_EQ(parseError(blocks), "T: line 1: blocks nest more than 200 levels "
                                "deep");
  // Found by fuzz-chat-template: an empty subscript was evaluated as a null
  // expression.
  EXPECT_EQ(parseError("{{ x[] }}"), "T: line 1: unexpected ']' in an "
                                     "expression");
  EXPECT_EQ(parseError("{{ x[0] }}{{ x[:] }}{{ x[::] }}"), "ok");
  EXPECT_EQ(parseError("{{ x.99999999999999999999 }}"),
            "T: line 1: integer literal 99999999999999999999 is out of range");
  // 200 levels still parse and render.
  EXPECT_EQ(renderSimple("{{ " + std::string(60, '(') + "7" +
                             std::string(60, ')') + " }}",
                         json::object()),
            "7");

  json ctx = json::object();
  const std::string big = "9223372036854775807", small = "(-" + big + " - 1)";
  EXPECT_EQ(renderSimple("{{ " + big + " + 1 }}", ctx),
            "RENDER ERROR: t: line 1: integer overflow in + (beyond 64 bits)");
  EXPECT_EQ(renderSimple("{{ 4611686018427387904 * 4 }}", ctx),
            "RENDER ERROR: t: line 1: integer overflow in * (beyond 64 bits)");
  EXPECT_EQ(renderSimple("{{ " + small + " // -1 }}", ctx),
            "RENDER ERROR: t: line 1: integer overflow in // (beyond 64 bits)");
  EXPECT_EQ(renderSimple("{{ " + small + " % -1 }}", ctx), "0");
  EXPECT_EQ(renderSimple("{{ -" + small + " }}", ctx),
            "RENDER ERROR: t: line 1: integer overflow in - (beyond 64 bits)");
  EXPECT_EQ(renderSimple("{{ 2 ** 100 }}", ctx),
            "RENDER ERROR: t: line 1: integer overflow in ** (beyond 64 bits)");
  EXPECT_EQ(renderSimple("{{ 2 ** 62 }} {{ (-1) ** 65 }} {{ 0 ** 0 }}", ctx),
            "4611686018427387904 -1 1");
  EXPECT_EQ(renderSimple("{{ range(" + big + " - 7, " + big +
                             ", 5) | length }}"
                             " {{ [1, 2, 3][1::" +
                             big + "] }}",
                         ctx),
            "2 [2]");
  EXPECT_EQ(renderSimple("{{ 2.7 | int }}", ctx), "2");

  // Values stay acyclic and shallow.
  EXPECT_EQ(
      renderSimple("{% set ns = namespace(a=1) %}{% set ns.a = ns %}", ctx),
      "RENDER ERROR: t: line 1: cannot store a namespace in attribute "
      "'a' of namespace 'ns'");
  EXPECT_EQ(renderSimple("{% set ns = namespace(a=1) %}{% set ns.b = [1, "
                         "{'x': ns}] %}",
                         ctx),
            "RENDER ERROR: t: line 1: cannot store a namespace in attribute "
            "'b' of namespace 'ns'");
  EXPECT_EQ(renderSimple("{% set ns = namespace(x=1) %}{% for i in range(500) "
                         "%}{% set ns.x = [ns.x] %}{% endfor %}",
                         ctx),
            "RENDER ERROR: t: line 1: values nest more than 200 levels deep");
  // Doubling a shared list: 2^40 items if expanded.
  EXPECT_EQ(renderSimple("{% set ns = namespace(x='ab', y='ab') %}{% for i in "
                         "range(40) %}{% set ns.x = [ns.x, ns.x] %}{% endfor "
                         "%}{{ ns.x == ns.x }}",
                         ctx),
            "RENDER ERROR: t: line 1: a value holds more than 64 MiB "
            "(RenderLimits::maxValueSize: its string bytes and 128 bytes per "
            "item)");
  // tojson's indentation is bounded by the output limit; negative indents
  // as json.dumps (newlines, no spaces).
  EXPECT_EQ(renderSimple("{{ [[1]] | tojson(indent=1000000000) }}", ctx),
            "RENDER ERROR: t: line 1: the JSON text exceeds 64 MiB");
  EXPECT_EQ(renderSimple("{{ [1] | tojson(indent=-3) }}", ctx), "[\n1\n]");
}

TEST(ChatTemplate, RenderLimits) {
  auto render = [](const std::string &src, const RenderLimits &limits) {
    Expected<ChatTemplate> t = ChatTemplate::parse(src, "L");
    if (!t)
      return "PARSE ERROR: " + t.message();
    Expected<std::string> r = t->render("{}", limits);
    return r ? *r : r.message();
  };
  RenderLimits small;
  small.maxOutput = 100;
  small.maxIterations = 10;
  small.maxValueSize = 4096; // 32 items of 128 bytes
  small.maxWork = 100000;
  const std::string tooBig = " (RenderLimits::maxValueSize: its string bytes "
                             "and 128 bytes per item)";
  EXPECT_EQ(render("{% for i in range(5) %}{{ i }}{% endfor %}", small),
            "01234");
  EXPECT_EQ(render("{% for i in range(9) %}\n{{ 'abcdefghijklmn' }}{% endfor "
                   "%}",
                   small),
            "L: line 2: the rendered text exceeds 100 bytes");
  EXPECT_EQ(render("{% for i in range(3) %}{% for j in range(4) %}{% endfor "
                   "%}{% endfor %}",
                   small),
            "L: line 1: more than 10 loop iterations "
            "(RenderLimits::maxIterations)");
  EXPECT_EQ(render("{{ range(11) }}", small),
            "L: line 1: range() of 11 items: more than 10 "
            "(RenderLimits::maxIterations)");
  EXPECT_EQ(render("{{ 'ab' * 51 }}", small),
            "L: line 1: string repetition exceeds 100 bytes");
  EXPECT_EQ(render("{{ ('ab' * 50 ~ 'c') | length }}", small),
            "L: line 1: a string exceeds 100 bytes");
  EXPECT_EQ(render("{{ 'a,b,c' | replace(',', 'x' * 50) }}", small),
            "L: line 1: a string exceeds 100 bytes");
  EXPECT_EQ(render("{{ [range(10), range(10)] | length }}", small), "2");
  EXPECT_EQ(render("{% set l = [range(10), range(10)] %}{{ [l, l] }}", small),
            "L: line 1: a value holds more than 4096 bytes" + tooBig);
  // A namespace grown after lists took it in: their cached sizes are
  // stale, so printing is bounded as it goes (doubling 24 times instead
  // printed 2^24 copies).
  EXPECT_EQ(render("{% set ns = namespace(s='') %}{% set a = [ns, ns] %}"
                   "{% set b = [a, a] %}{% set c = [b, b] %}"
                   "{% set ns.s = 'x' * 90 %}{{ c }}",
                   small),
            "L: line 1: a string exceeds 100 bytes");
  small.maxOutput = 100000;
  small.maxWork = 20000;
  EXPECT_EQ(render("{% for i in range(10) %}{{ range(10) ~ range(10) }}"
                   "{% endfor %}",
                   small),
            "L: line 1: rendering takes more than 20,000 steps "
            "(RenderLimits::maxWork: about one per byte made or scanned, 64 "
            "per expression, 512 per loop iteration)");
}

// Lists, strings and ranges that would take gigabytes are refused before
// they are made, with the limit named (a doubled list aborted on bad_alloc;
// iterating a long string made a 104-byte value per character).
TEST(ChatTemplate, RefusesValuesBeforeAllocating) {
  json ctx = json::object();
  const std::string tooBig = "RENDER ERROR: t: line 2: a value holds more "
                             "than 64 MiB (RenderLimits::maxValueSize: its "
                             "string bytes and 128 bytes per item)";
  EXPECT_EQ(renderSimple("{% set ns = namespace(l=[1]) %}\n{% for i in "
                         "range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor "
                         "%}{{ ns.l | length }}",
                         ctx),
            tooBig);
  EXPECT_EQ(renderSimple("{% set s = 'x' * 10000000 %}\n{% for c in s %}{% "
                         "break %}{% endfor %}",
                         ctx),
            tooBig);
  EXPECT_EQ(renderSimple("{% set s = 'x' * 10000000 %}\n{{ s | list | length "
                         "}}",
                         ctx),
            tooBig);
  EXPECT_EQ(renderSimple("\n{{ (',' * 1000000).split(',') | length }}", ctx),
            tooBig);
  EXPECT_EQ(renderSimple("\n{{ ([0] * 1000000) | length }}", ctx), tooBig);
  EXPECT_EQ(renderSimple("{{ range(100000) | length }}", ctx), "100000");
  EXPECT_EQ(renderSimple("\n{{ range(100001) | length }}", ctx),
            "RENDER ERROR: t: line 2: range() of 100,001 items: more than "
            "100,000 (Jinja2's sandbox, as transformers uses it)");
  // An empty string repeated 10^15 times looped 10^15 times.
  EXPECT_EQ(renderSimple("{{ ('' * 1000000000000000) | length }} {{ ([] * "
                         "1000000000000000) | length }}",
                         ctx),
            "0 0");
}

// The work of a rendering counts what is copied and scanned, not only what
// is made: each of these took at least ten times its count before (a loop
// over a list of long strings copied them all each time, and counted one
// step per item), so a template could run for minutes within maxWork.
TEST(ChatTemplate, WorkCountsCopiesAndScans) {
  RenderLimits limits;
  limits.maxWork = 1000000;
  auto render = [&](const std::string &src) {
    Expected<ChatTemplate> t = ChatTemplate::parse(src, "W");
    if (!t)
      return "PARSE ERROR: " + t.message();
    Expected<std::string> r = t->render("{}", limits);
    return r ? std::string("ok") : r.message();
  };
  const std::string stopped = "W: line 2: rendering takes more than 1,000,000 "
                              "steps (RenderLimits::maxWork: about one per "
                              "byte made or scanned, 64 per expression, 512 "
                              "per loop iteration)";
  // Loops and copies of a list of long strings.
  EXPECT_EQ(render("{% set l = ['x' * 100000] %}\n{% for i in range(100) %}"
                   "{% for c in l %}{% endfor %}{% endfor %}"),
            stopped);
  EXPECT_EQ(render("{% set l = ['x' * 100000] %}\n{% for i in range(100) %}"
                   "{% set t = l + [] %}{% endfor %}"),
            stopped);
  // A replacement per byte; a list printed item by item.
  EXPECT_EQ(render("{% set s = 'a' * 100000 %}\n{% for i in range(4) %}"
                   "{% set t = s.replace('a', 'b') %}{% endfor %}"),
            stopped);
  EXPECT_EQ(render("{% set l = range(3000) %}\n{% for i in range(10) %}{% set "
                   "t = l | join %}{% endfor %}"),
            stopped);
  // Names looked up among thousands.
  std::string sets = "\n";
  for (int k = 0; k < 2000; ++k)
    sets += "{% set a" + std::to_string(k) + " = 1 %}";
  EXPECT_EQ(render(sets), stopped);
  // The same templates within the default limits' budget of a published
  // template: a short loop over a short list.
  EXPECT_EQ(render("{% set l = ['x' * 100] %}\n{% for i in range(10) %}"
                   "{% for c in l %}{{ c | length }}{% endfor %}{% endfor %}"),
            "ok");
}

// Deep chains of filters, operators, attributes and subscripts are refused
// while they are parsed: a chain of 100,000 filters was built, refused and
// then destroyed by recursion, which overflowed the stack.
TEST(ChatTemplate, RefusesDeepChainsWhileParsing) {
  const std::string deep = "T: line 2: the expression nests more than 200 "
                           "levels deep";
  auto chain = [](const std::string &head, const std::string &link, int n) {
    std::string s = "\n{{ " + head;
    for (int k = 0; k < n; ++k)
      s += link;
    return s + " }}";
  };
  // (These two crashed an optimized build; 100,000 filters one built with
  // AddressSanitizer.)
  EXPECT_EQ(parseError(chain("1", "+1", 300000)), deep);
  EXPECT_EQ(parseError(chain("x", ".a", 300000)), deep);
  for (const char *link :
       {"|string", "[0]", "(1)", " is string", "|default(1)", " ~ 'a'", "**2"})
    EXPECT_EQ(parseError(chain("x", link, 3000)), deep) << link;
  // A flat comparison chain is one node, however long.
  EXPECT_EQ(parseError(chain("1", " < 2", 10000)), "ok");
  // 199 filters still render.
  EXPECT_EQ(renderSimple(chain("1", "|string", 199), json::object()), "\n1");
}

// Numbers as Python computes them; Jinja2 (transformers'
// ImmutableSandboxedEnvironment) gave every expected value here.
TEST(ChatTemplate, ArithmeticAsPython) {
  json ctx = json::object();
  auto err = [](const std::string &m) {
    return "RENDER ERROR: t: line 1: " + m;
  };
  // Where Python raises, the template fails.
  EXPECT_EQ(renderSimple("{{ 0 ** -1 }}", ctx),
            err("division by zero: 0.0 cannot be raised to a negative power"));
  EXPECT_EQ(renderSimple("{{ 0.0 ** -0.5 }}", ctx),
            err("division by zero: 0.0 cannot be raised to a negative power"));
  for (const char *overflow : {"{{ 10.0 ** 400 }}", "{{ 1e308 ** 2 }}",
                               "{{ 2.0 ** 1024 }}", "{{ (-2.0) ** 1025 }}"})
    EXPECT_EQ(renderSimple(overflow, ctx),
              err("float overflow in ** (the result is beyond the largest "
                  "double, about 1.8e308)"))
        << overflow;
  EXPECT_EQ(renderSimple("{{ (-8.0) ** 0.5 }}", ctx),
            err("a negative number raised to a fractional power is a complex "
                "number (not supported)"));
  EXPECT_EQ(renderSimple("{{ 5.0 // 0.0 }}", ctx), err("division by zero"));
  EXPECT_EQ(renderSimple("{{ 7 % 0.0 }}", ctx), err("division by zero"));
  // Infinite operands and underflow do not raise.
  EXPECT_EQ(renderSimple("{{ (1e308 * 10) ** 2 }} {{ 10 ** -400 }} {{ 0.5 ** "
                         "2000 }} {{ 2 ** -1 }} {{ (-2) ** -1 }} {{ 0.0 ** 0 "
                         "}} {{ (-8) ** 2.0 }}",
                         ctx),
            "inf 0.0 0.0 0.5 -0.5 1.0 64.0");
  // Float floor division and modulo: exact remainders, the divisor's sign.
  EXPECT_EQ(renderSimple("{{ 1e300 % 3.0 }} {{ 1e300 // 7.0 }} {{ -7.5 % 2 }} "
                         "{{ 7.5 % -2 }} {{ -0.0 // 1 }} {{ 0.0 % -2 }} {{ -1 "
                         "// 3.0 }}",
                         ctx),
            "0.0 1.4285714285714286e+299 0.5 -0.5 -0.0 -0.0 -1.0");
  // Int and float compare exactly; NaN is unordered.
  EXPECT_EQ(renderSimple("{{ 9007199254740993 == 9007199254740992.0 }} {{ "
                         "9007199254740993 > 9007199254740992.0 }} {{ 1 == "
                         "1.0 }} {{ [1, 2.0] == [1.0, 2] }} {% set n = 'nan' "
                         "| float %}{{ n < 1 }} {{ n >= 1 }} {{ n == n }}",
                         ctx),
            "False True True True False False False");
  EXPECT_EQ(renderSimple("{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }} {{ {'a': "
                         "1} == {'b': 1} }}",
                         ctx),
            "True False");
  // Floats print as repr(): positional from 1e-4 up to 1e16.
  EXPECT_EQ(renderSimple("{{ 1e15 }} {{ 1.5e10 }} {{ 1e16 }} {{ 0.0001 }} {{ "
                         "1e-5 }} {{ 123456789.125 }} {{ 0.1 + 0.2 }} {{ "
                         "9223372036854775807 / 1 }} {{ 5e-324 }} {{ -0.0 }} "
                         "{{ 100.0 }}",
                         ctx),
            "1000000000000000.0 15000000000.0 1e+16 0.0001 1e-05 "
            "123456789.125 0.30000000000000004 9.223372036854776e+18 5e-324 "
            "-0.0 100.0");
  // The int and float filters: Python's int() and float() of strings,
  // int(float(s)) for "3.5"; an int beyond 64 bits is an error here (Python
  // makes a big integer).
  EXPECT_EQ(renderSimple("{{ '3.5' | int }} {{ '1e3' | int }} {{ '1_000' | "
                         "int }} {{ ' 12 ' | int }} {{ '12abc' | int }} {{ "
                         "'1__0' | int }} {{ 'nan' | int }} {{ '1e400' | int "
                         "}} {{ 'x' | int(default=7) }} {{ -3.7 | int }}",
                         ctx),
            "3 1000 1000 12 0 0 0 0 7 -3");
  EXPECT_EQ(renderSimple("{{ 1e300 | int }}", ctx),
            err("integer overflow in the int filter (beyond 64 bits)"));
  EXPECT_EQ(renderSimple("{{ '99999999999999999999' | int }}", ctx),
            err("integer overflow in the int filter (beyond 64 bits)"));
  EXPECT_EQ(renderSimple("{{ '0x1p3' | float }} {{ '1_0.5' | float }} {{ "
                         "'Infinity' | float }} {{ '.5' | float }} {{ 'e5' | "
                         "float }}",
                         ctx),
            "0.0 10.5 inf 0.5 0.0");
  // Items of a range whose k * step alone overflows (UndefinedBehaviorSanitizer
  // reported it), and int64's ends.
  EXPECT_EQ(renderSimple("{{ range(-9223372036854775807 - 1, "
                         "9223372036854775807, 4611686018427387904) | list }} "
                         "{{ -9223372036854775808.0 | int }} {{ "
                         "'-9223372036854775808' | int }}",
                         ctx),
            "[-9223372036854775808, -4611686018427387904, 0, "
            "4611686018427387904] -9223372036854775808 -9223372036854775808");
  // Sequences repeat either way round.
  EXPECT_EQ(renderSimple("{{ [1] * 3 }} {{ 2 * [1, 2] }} {{ [1] * -1 }} {{ "
                         "'ab' * 2 }}",
                         ctx),
            "[1, 1, 1] [1, 2, 1, 2] [] abab");
  // str.replace and the replace filter: an empty pattern matches before
  // every character and at the end; both take a count.
  EXPECT_EQ(renderSimple("{{ 'ab'.replace('', '-') }} {{ 'ab' | "
                         "replace('', '-') }} {{ 'ab'.replace('', '-', 2) }} "
                         "{{ 'aaa' | replace('a', 'b', 2) }} {{ 'héllo'[::-1] "
                         "}} {{ 'héllo'[-2::-2] }} {{ 'héllo' | last }}",
                         ctx),
            "-a-b- -a-b- -a-b bba olléh lé o");
}

// String literals decode Python's escapes as Jinja2 does (unicode-escape):
// \x, \u and \U kept their backslash before.
TEST(ChatTemplate, StringLiteralEscapes) {
  json ctx = json::object();
  EXPECT_EQ(
      renderSimple(R"({{ '\u00e9|\x41|\101|\U0001F600|\777\1234|\q' }})", ctx),
      "\xc3\xa9|A|A|\xf0\x9f\x98\x80|\xc7\xbfS4|\\q");
  EXPECT_EQ(renderSimple(R"({{ '\a\b\f\v\0' | length }} {{ '\\x41' }})", ctx),
            "5 \\x41");
  EXPECT_EQ(parseError(R"({{ '\x4' }})"),
            "T: line 1: truncated \\x escape in a string literal (2 hex digits "
            "expected)");
  EXPECT_EQ(parseError(R"({{ '\ud800' }})"),
            "T: line 1: a surrogate code point in a string literal's escape "
            "(not text UTF-8 can hold)");
  EXPECT_EQ(parseError(R"({{ '\U00110000' }})"),
            "T: line 1: illegal Unicode character in a string literal's "
            "escape");
  EXPECT_EQ(parseError(R"({{ '\N{BULLET}' }})"),
            "T: line 1: unsupported escape \\N{...} in a string literal "
            "(write the character itself)");
}

TEST(Instruct, IdsAndMasksMatchTransformers) {
  std::vector<std::string> lines;
  {
    std::istringstream in(readText(chatDir() + "/sft.jsonl"));
    std::string l;
    while (std::getline(in, l))
      lines.push_back(l);
  }
  for (const char *name : {"qwen2", "gemma", "llama3"}) {
    std::string dir = chatDir() + "/" + name;
    Expected<Tokenizer> tok = Tokenizer::load(dir);
    ASSERT_TRUE(tok.ok()) << tok.message();
    Expected<ChatFormat> fmt = loadChatFormat(*tok, dir);
    ASSERT_TRUE(fmt.ok()) << fmt.message();
    EXPECT_EQ(fmt->origin, dir + "/tokenizer_config.json: chat_template");
    json expected = json::parse(readText(dir + "/expected.json"));
    ASSERT_EQ(expected.size(), lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      Expected<std::vector<ChatMessage>> msgs = parseInstructionLine(lines[i]);
      ASSERT_TRUE(msgs.ok()) << msgs.message();
      Expected<std::string> text = renderChat(*fmt, *msgs, false);
      ASSERT_TRUE(text.ok()) << text.message();
      EXPECT_EQ(*text, expected[i]["text"].get<std::string>()) << name << i;
      Expected<EncodedConversation> enc = encodeConversation(*tok, *fmt, *msgs);
      ASSERT_TRUE(enc.ok()) << enc.message();
      EXPECT_EQ(enc->ids, expected[i]["ids"].get<std::vector<uint32_t>>())
          << name << " line " << i;
      std::vector<uint8_t> mask;
      for (int m : expected[i]["mask"])
        mask.push_back(static_cast<uint8_t>(m));
      EXPECT_EQ(enc->mask, mask) << name << " line " << i;
    }
  }
}

TEST(Instruct, DefaultTemplate) {
  std::string dir =
      std::string(MTC_SOURCE_DIR) + "/test/fixtures/tokenizers/sp-llama2";
  Expected<Tokenizer> tok = Tokenizer::load(dir);
  ASSERT_TRUE(tok.ok()) << tok.message();
  Expected<ChatFormat> fmt = loadChatFormat(*tok, dir);
  ASSERT_TRUE(fmt.ok()) << fmt.message();
  EXPECT_EQ(fmt->origin, "the default template");
  EXPECT_EQ(fmt->bosToken.value_or("?"), "<s>");
  EXPECT_EQ(fmt->eosToken.value_or("?"), "</s>");
  std::vector<ChatMessage> msgs = {
      {"system", "Be kind."}, {"user", "Hi"}, {"assistant", "Hello"}};
  Expected<std::string> text = renderChat(*fmt, msgs, false);
  ASSERT_TRUE(text.ok()) << text.message();
  EXPECT_EQ(*text, "<s>### system:\nBe kind.\n\n### user:\nHi\n\n### "
                   "assistant:\nHello</s>");
  Expected<EncodedConversation> enc = encodeConversation(*tok, *fmt, msgs);
  ASSERT_TRUE(enc.ok()) << enc.message();
  // The trained tokens decode to the response and the eos.
  std::vector<uint32_t> trained;
  for (size_t k = 0; k < enc->ids.size(); ++k)
    if (enc->mask[k])
      trained.push_back(enc->ids[k]);
  EXPECT_EQ(tok->decode(trained), "Hello</s>");
  EXPECT_EQ(enc->mask[0], 0);
}

TEST(Instruct, LineErrors) {
  auto err = [](const std::string &line) {
    Expected<std::vector<ChatMessage>> m = parseInstructionLine(line);
    return m ? std::string("ok") : m.message();
  };
  EXPECT_EQ(err("{\"prompt\": \"a\", \"response\": \"b\"}"), "ok");
  EXPECT_EQ(err("[1]"), "expected a JSON object, found array");
  EXPECT_EQ(err("{\"prompt\": \"a\"}"), "missing field 'response'");
  EXPECT_EQ(err("{\"prompt\": 1, \"response\": \"b\"}"),
            "field 'prompt' must be a string, not number");
  EXPECT_EQ(err("{\"text\": \"a\"}"),
            "expected 'messages' or 'prompt' and 'response'");
  EXPECT_EQ(err("{\"messages\": [{\"role\": \"user\"}]}"),
            "messages[0]: missing field 'content'");
  EXPECT_EQ(err("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}"),
            "no assistant message (nothing to train)");
  EXPECT_EQ(err("{\"prompt\": "),
            "not valid JSON: parse error at column 12: syntax error while "
            "parsing value - unexpected end of input; expected '[', '{', or "
            "a literal");
  EXPECT_EQ(err("{\"prompt\": \"a\", \"response\": \"b\", \"n\": 1e999}"),
            "column 39: number 1e999 is out of the range of a double");
}

TEST(Instruct, LossMaskFile) {
  std::string path = ::testing::TempDir() + "/mtc-mask-" +
                     std::to_string(::getpid()) + ".bin.mask";
  std::vector<uint8_t> mask = {0, 0, 1, 1, 0, 1};
  ASSERT_TRUE(writeLossMask(path, mask).ok());
  Expected<std::vector<uint8_t>> back = readLossMask(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, mask);
  {
    std::ofstream o(path, std::ios::binary | std::ios::app);
    o.put(2);
  }
  Expected<std::vector<uint8_t>> bad = readLossMask(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message(),
            path + ": header says 6 tokens but the file holds 7");
  ::unlink(path.c_str());
}

} // namespace
