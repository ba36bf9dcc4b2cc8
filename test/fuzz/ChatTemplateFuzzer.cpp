//===- ChatTemplateFuzzer.cpp - libFuzzer target for chat templates -------===//
//
// Part of mtc. Feeds arbitrary bytes to ChatTemplate::parse as a Jinja chat
// template (lib/Tokenizer) and renders what parses with a fixed conversation
// (system, user, assistant with a tool call, tool reply), with and without
// the generation prompt, under small RenderLimits so that every input ends
// quickly. Every input must parse or fail with a message naming the template;
// every rendering must succeed within the output limit or fail with one, and
// end within half a second of CPU time: maxWork (2^20 steps, a few
// milliseconds even under the sanitizers) bounds it, so a slower rendering
// is work the engine does not count. maxIterations is left high so that the
// work, not the loop count, stops loops. The seeds list-doubling,
// work-bomb-copy, work-bomb-scan, deep-filters and pow-overflow start the
// search where such inputs were found (work-bomb-copy took 2 s here before
// loops stopped copying their lists).
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplate.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

namespace {

[[noreturn]] void bug(const char *what) {
  std::fprintf(stderr, "chat template fuzzer: %s\n", what);
  __builtin_trap();
}

const char *const kContexts[] = {
    R"({"messages": [
  {"role": "system", "content": "You are helpful."},
  {"role": "user", "content": "Hi! What's 2+2? Caf\u00e9 \u65e5\u672c"},
  {"role": "assistant", "content": "",
   "tool_calls": [{"type": "function", "function":
     {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
  {"role": "tool", "content": "4"},
  {"role": "assistant", "content": "  It is 4.\n"}],
 "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
 "tools": [{"type": "function", "function": {"name": "add",
   "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
 "date_string": "26 Jul 2024", "x": 1.5, "n": -7})",
    R"({"messages": [{"role": "user", "content": "Hello"}],
 "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": false,
 "tools": null})"};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string source(reinterpret_cast<const char *>(data), size);
  mtc::Expected<mtc::tok::ChatTemplate> t =
      mtc::tok::ChatTemplate::parse(source, "fuzz.jinja");
  if (!t) {
    if (t.message().rfind("fuzz.jinja: ", 0) != 0)
      bug("a parse error does not name the template");
    return 0;
  }
  mtc::tok::RenderLimits limits;
  limits.maxOutput = 1 << 16;
  limits.maxIterations = 1000000;
  limits.maxValueSize = 1 << 16;
  limits.maxWork = 1 << 20;
  for (const char *ctx : kContexts) {
    std::clock_t start = std::clock();
    mtc::Expected<std::string> out = t->render(ctx, limits);
    if (std::clock() - start > CLOCKS_PER_SEC / 2)
      bug("a rendering took more than half a second of CPU time within "
          "maxWork");
    if (!out) {
      if (out.message().rfind("fuzz.jinja: ", 0) != 0)
        bug("a render error does not name the template");
      continue;
    }
    if (out->size() > limits.maxOutput)
      bug("the rendered text exceeds maxOutput");
  }
  return 0;
}
