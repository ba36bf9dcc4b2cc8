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
  auto parseError = [](const std::string &src) {
    Expected<ChatTemplate> t = ChatTemplate::parse(src, "T");
    return t ? std::string("ok") : t.message();
  };
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
  auto parseError = [](const std::string &src) {
    Expected<ChatTemplate> t = ChatTemplate::parse(src, "T");
    return t ? std::string("ok") : t.message();
  };
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
  EXPECT_EQ(renderSimple("{{ 1e300 | int }} {{ 2.7 | int }}", ctx), "0 2");

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
            "RENDER ERROR: t: line 1: a value holds more than 67108864 items "
            "and string bytes");
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
  small.maxValueSize = 100;
  small.maxWork = 1000;
  EXPECT_EQ(render("{% for i in range(5) %}{{ i }}{% endfor %}", small),
            "01234");
  EXPECT_EQ(render("{% for i in range(9) %}\n{{ 'abcdefghijklmn' }}{% endfor "
                   "%}",
                   small),
            "L: line 2: the rendered text exceeds 100 bytes");
  EXPECT_EQ(render("{% for i in range(3) %}{% for j in range(4) %}{% endfor "
                   "%}{% endfor %}",
                   small),
            "L: line 1: more than 10 loop iterations");
  EXPECT_EQ(render("{{ range(11) }}", small), "L: line 1: range() is too long");
  EXPECT_EQ(render("{{ 'ab' * 51 }}", small),
            "L: line 1: string repetition exceeds 100 bytes");
  EXPECT_EQ(render("{{ ('ab' * 50 ~ 'c') | length }}", small),
            "L: line 1: a string exceeds 100 bytes");
  EXPECT_EQ(render("{{ 'a,b,c' | replace(',', 'x' * 50) }}", small),
            "L: line 1: a string exceeds 100 bytes");
  EXPECT_EQ(render("{{ [range(10), range(10), range(10), range(10), "
                   "range(10)] | length }}",
                   small),
            "5");
  EXPECT_EQ(render("{% set l = [range(10), range(10), range(10), range(10), "
                   "range(10)] %}{{ [l, l] }}",
                   small),
            "L: line 1: a value holds more than 100 items and string bytes");
  // A namespace grown after lists took it in: their cached sizes are
  // stale, so printing is bounded as it goes (doubling 24 times instead
  // printed 2^24 copies).
  EXPECT_EQ(render("{% set ns = namespace(s='') %}{% set a = [ns, ns] %}"
                   "{% set b = [a, a] %}{% set c = [b, b] %}"
                   "{% set ns.s = 'x' * 90 %}{{ c }}",
                   small),
            "L: line 1: a string exceeds 100 bytes");
  small.maxValueSize = 1000;
  small.maxOutput = 100000;
  EXPECT_EQ(render("{% for i in range(10) %}{{ range(10) ~ range(10) }}"
                   "{% endfor %}",
                   small),
            "L: line 1: rendering takes more than 1000 steps (expressions, "
            "loop iterations and the bytes and items they make)");
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
  EXPECT_NE(err("{\"prompt\": ").find("malformed JSON"), std::string::npos);
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
