//===- Instruct.cpp - Instruction data with a loss mask -------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/Instruct.h"

#include "lib/Support/Files.h"
#include "lib/Support/JsonParse.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <sys/stat.h>

namespace mtc::tok {

using json = nlohmann::json;

const char *const kDefaultChatTemplate =
    "{{- bos_token }}\n"
    "{%- for message in messages %}\n"
    "{%- if not loop.first %}{{ '\\n\\n' }}{% endif %}\n"
    "{{- '### ' + message['role'] + ':\\n' + message['content'] }}\n"
    "{%- if message['role'] == 'assistant' %}{{ eos_token }}{% endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{%- if messages %}{{ '\\n\\n' }}{% endif %}\n"
    "{{- '### assistant:\\n' }}\n"
    "{%- endif %}\n";

namespace {

/// Whether the optional file \p path is there; one that is there but is not
/// a regular file (a directory, a FIFO) is an error, not skipped, so that a
/// tokenizer's own template or special tokens are never silently replaced.
Expected<bool> optionalFile(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
    return false;
  if (Status s = checkRegularFile(path); !s.ok())
    return s;
  return true;
}

std::string dirOf(const std::string &file) {
  size_t slash = file.find_last_of('/');
  return slash == std::string::npos ? "." : file.substr(0, slash);
}

// A special token of tokenizer_config.json: a string, {"content": ...}, or
// null / absent.
Expected<std::optional<std::string>>
configToken(const json &cfg, const char *key, const std::string &name) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null())
    return std::optional<std::string>();
  if (it->is_string())
    return std::optional<std::string>(it->get<std::string>());
  if (it->is_object() && it->contains("content") &&
      (*it)["content"].is_string())
    return std::optional<std::string>((*it)["content"].get<std::string>());
  return Status::error(name + ": " + key +
                       " must be a string or an object with \"content\"");
}

std::optional<std::string>
addedSpecial(const Tokenizer &tok, std::initializer_list<const char *> names) {
  for (const char *n : names)
    for (const AddedToken &t : tok.addedTokens())
      if (t.special && t.content == n)
        return t.content;
  return std::nullopt;
}

} // namespace

Expected<ChatFormat> loadChatFormat(const Tokenizer &tok,
                                    const std::string &tokenizerPath,
                                    const std::string &templateFile) {
  std::string dir = dirOf(tokenizerJsonPath(tokenizerPath));
  std::string cfgPath = dir + "/tokenizer_config.json";
  ChatFormat f;
  json cfg;
  Expected<bool> haveCfg = optionalFile(cfgPath);
  if (!haveCfg)
    return haveCfg.status();
  if (*haveCfg) {
    Expected<std::string> text = readRegularFile(cfgPath);
    if (!text)
      return text.status();
    Expected<json> parsed = parseJson(*text, cfgPath);
    if (!parsed)
      return parsed.status();
    cfg = std::move(*parsed);
    if (!cfg.is_object())
      return Status::error(cfgPath + ": not a JSON object");
    auto bos = configToken(cfg, "bos_token", cfgPath);
    auto eos = configToken(cfg, "eos_token", cfgPath);
    auto unk = configToken(cfg, "unk_token", cfgPath);
    auto pad = configToken(cfg, "pad_token", cfgPath);
    for (auto *t : {&bos, &eos, &unk, &pad})
      if (!*t)
        return t->status();
    f.bosToken = *bos;
    f.eosToken = *eos;
    f.unkToken = *unk;
    f.padToken = *pad;
  } else {
    f.bosToken = addedSpecial(
        tok, {"<s>", "<bos>", "<|begin_of_text|>", "<|startoftext|>"});
    f.eosToken = addedSpecial(
        tok, {"</s>", "<eos>", "<|end_of_text|>", "<|endoftext|>"});
  }

  std::string source, origin;
  std::string jinjaPath = dir + "/chat_template.jinja";
  Expected<bool> haveJinja =
      templateFile.empty() ? optionalFile(jinjaPath) : Expected<bool>(false);
  if (!haveJinja)
    return haveJinja.status();
  if (!templateFile.empty()) {
    Expected<std::string> text = readRegularFile(templateFile);
    if (!text)
      return text.status();
    source = *text;
    origin = templateFile;
  } else if (*haveJinja) {
    Expected<std::string> text = readRegularFile(jinjaPath);
    if (!text)
      return text.status();
    source = *text;
    origin = jinjaPath;
  } else if (*haveCfg && cfg.contains("chat_template") &&
             !cfg["chat_template"].is_null()) {
    const json &ct = cfg["chat_template"];
    origin = cfgPath + ": chat_template";
    if (ct.is_string()) {
      source = ct.get<std::string>();
    } else if (ct.is_array()) {
      std::string names;
      bool found = false;
      for (const json &e : ct) {
        if (!e.is_object() || !e.contains("name") || !e["name"].is_string() ||
            !e.contains("template") || !e["template"].is_string())
          return Status::error(origin + ": each entry must be {\"name\": "
                                        "string, \"template\": string}");
        names += (names.empty() ? "" : ", ") + e["name"].get<std::string>();
        if (e["name"] == "default") {
          source = e["template"].get<std::string>();
          found = true;
        }
      }
      if (!found)
        return Status::error(origin + ": no template named 'default' (has: " +
                             names + "); give one with --chat-template FILE");
      origin += "[default]";
    } else {
      return Status::error(origin + ": must be a string or a list of named "
                                    "templates");
    }
  } else {
    source = kDefaultChatTemplate;
    origin = "the default template";
  }
  Expected<ChatTemplate> t = ChatTemplate::parse(source, origin);
  if (!t)
    return t.status();
  f.tmpl = std::move(*t);
  f.origin = origin;
  return f;
}

Expected<std::vector<ChatMessage>> parseInstructionLine(std::string_view line) {
  Expected<json> parsed = parseJson(line, "");
  if (!parsed) {
    // The caller names the file and line; the column is what locates it.
    std::string what = parsed.message().substr(2); // after parseJson's ": "
    if (size_t l = what.find("line 1, column "); l != std::string::npos)
      what.erase(l, 8); // "line 1, "
    return Status::error(what);
  }
  json j = std::move(*parsed);
  if (!j.is_object())
    return Status::error("expected a JSON object, found " +
                         std::string(j.type_name()));
  std::vector<ChatMessage> msgs;
  auto str = [&](const json &obj, const char *key,
                 const std::string &where) -> Expected<std::string> {
    auto it = obj.find(key);
    if (it == obj.end())
      return Status::error(where + "missing field '" + key + "'");
    if (!it->is_string())
      return Status::error(where + "field '" + key +
                           "' must be a string, not " + it->type_name());
    return it->get<std::string>();
  };
  if (j.contains("messages")) {
    if (j.contains("prompt") || j.contains("response"))
      return Status::error("give either 'messages' or 'prompt'/'response', "
                           "not both");
    const json &m = j["messages"];
    if (!m.is_array())
      return Status::error("field 'messages' must be a list, not " +
                           std::string(m.type_name()));
    for (size_t i = 0; i < m.size(); ++i) {
      std::string where = "messages[" + std::to_string(i) + "]: ";
      if (!m[i].is_object())
        return Status::error(where + "expected an object, found " +
                             std::string(m[i].type_name()));
      Expected<std::string> role = str(m[i], "role", where);
      if (!role)
        return role.status();
      Expected<std::string> content = str(m[i], "content", where);
      if (!content)
        return content.status();
      msgs.push_back({*role, *content});
    }
  } else if (j.contains("prompt") || j.contains("response")) {
    Expected<std::string> prompt = str(j, "prompt", "");
    if (!prompt)
      return prompt.status();
    Expected<std::string> response = str(j, "response", "");
    if (!response)
      return response.status();
    if (j.contains("system")) {
      Expected<std::string> system = str(j, "system", "");
      if (!system)
        return system.status();
      msgs.push_back({"system", *system});
    }
    msgs.push_back({"user", *prompt});
    msgs.push_back({"assistant", *response});
  } else {
    return Status::error("expected 'messages' or 'prompt' and 'response'");
  }
  bool any = false;
  for (const ChatMessage &c : msgs)
    any = any || c.role == "assistant";
  if (!any)
    return Status::error("no assistant message (nothing to train)");
  return msgs;
}

Expected<std::string> renderChat(const ChatFormat &format,
                                 const std::vector<ChatMessage> &messages,
                                 bool addGenerationPrompt) {
  json ctx = json::object();
  json msgs = json::array();
  for (const ChatMessage &m : messages)
    msgs.push_back({{"role", m.role}, {"content", m.content}});
  ctx["messages"] = std::move(msgs);
  ctx["add_generation_prompt"] = addGenerationPrompt;
  // transformers passes tools and documents (None without them).
  ctx["tools"] = nullptr;
  ctx["documents"] = nullptr;
  if (format.bosToken)
    ctx["bos_token"] = *format.bosToken;
  if (format.eosToken)
    ctx["eos_token"] = *format.eosToken;
  if (format.unkToken)
    ctx["unk_token"] = *format.unkToken;
  if (format.padToken)
    ctx["pad_token"] = *format.padToken;
  return format.tmpl.render(ctx.dump());
}

namespace {

size_t commonPrefix(const std::vector<uint32_t> &a,
                    const std::vector<uint32_t> &b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k])
    ++k;
  return k;
}

bool startsWith(const std::string &s, const std::string &prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

} // namespace

Expected<EncodedConversation>
encodeConversation(const Tokenizer &tok, const ChatFormat &format,
                   const std::vector<ChatMessage> &messages) {
  Expected<std::string> full = renderChat(format, messages, false);
  if (!full)
    return full.status();
  Expected<std::vector<uint32_t>> ids = tok.encode(*full);
  if (!ids)
    return ids.status();
  EncodedConversation out;
  out.ids = std::move(*ids);
  out.mask.assign(out.ids.size(), 0);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant")
      continue;
    std::vector<ChatMessage> before(messages.begin(), messages.begin() + i);
    std::vector<ChatMessage> through(messages.begin(),
                                     messages.begin() + i + 1);
    Expected<std::string> p = renderChat(format, before, true);
    if (!p)
      return p.status();
    if (!startsWith(*full, *p))
      return Status::error(
          format.origin + ": the text before assistant message " +
          std::to_string(i) +
          " (rendered with add_generation_prompt) is not a prefix of the "
          "whole conversation's text, so its tokens cannot be located");
    Expected<std::vector<uint32_t>> pe = tok.encode(*p);
    if (!pe)
      return pe.status();
    size_t start = commonPrefix(*pe, out.ids);
    Expected<std::string> q = renderChat(format, through, false);
    if (!q)
      return q.status();
    Expected<std::vector<uint32_t>> qe = tok.encode(*q);
    if (!qe)
      return qe.status();
    size_t end = commonPrefix(*qe, out.ids);
    if (startsWith(*full, *q) && end < qe->size())
      end = std::min(end + 1, out.ids.size()); // a token straddles the end
    for (size_t k = start; k < end; ++k)
      out.mask[k] = 1;
  }
  return out;
}

} // namespace mtc::tok
