//===- ChatTemplate.cpp - Jinja chat templates ----------------------------===//
//
// Part of mtc. The public face of the chat-template engine: parse (lexer,
// then statement parser) and render (the context JSON into values, then the
// renderer), with the engine's TemplateError turned into Status messages that
// name the template and its line. ChatTemplateInternal.h lists the parts.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplate.h"

#include "lib/Support/JsonParse.h"
#include "lib/Tokenizer/ChatTemplateInternal.h"

#include <nlohmann/json.hpp>

namespace mtc::tok {

using namespace jinja;

struct ChatTemplate::Impl {
  std::string name, source;
  Body body;
};

Expected<ChatTemplate> ChatTemplate::parse(std::string_view source,
                                           const std::string &name) {
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  impl->source = std::string(source);
  try {
    impl->body = parseTemplate(splitTemplate(impl->source));
  } catch (const TemplateError &e) {
    return Status::error(name + ": line " + std::to_string(e.line) + ": " +
                         e.message);
  }
  ChatTemplate t;
  t.impl = std::move(impl);
  return t;
}

Expected<std::string> ChatTemplate::render(std::string_view contextJson,
                                           const RenderLimits &limits) const {
  Expected<nlohmann::json> parsed =
      parseJson(contextJson, impl->name + ": the context");
  if (!parsed)
    return parsed.status();
  const nlohmann::json &ctx = *parsed;
  if (!ctx.is_object())
    return Status::error(impl->name + ": the context must be a JSON object");
  std::string out;
  try {
    Renderer r(fromJson(ctx), limits);
    Flow f = r.exec(impl->body);
    (void)f;
    out = std::move(r.out);
  } catch (const TemplateError &e) {
    if (e.line < 0)
      return Status::error(impl->name + ": " + e.message);
    return Status::error(impl->name + ": line " + std::to_string(e.line) +
                         ": " + e.message);
  }
  return out;
}

const std::string &ChatTemplate::name() const { return impl->name; }
const std::string &ChatTemplate::source() const { return impl->source; }

} // namespace mtc::tok
