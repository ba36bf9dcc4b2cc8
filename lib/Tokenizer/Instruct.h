//===- Instruct.h - Instruction data with a loss mask -----------*- C++ -*-===//
//
// Part of mtc. Turns instruction examples (a jsonl line: {"prompt": ...,
// "response": ...} or {"messages": [{"role": ..., "content": ...}, ...]})
// into token ids and a loss mask: only the assistant's tokens (and the
// end-of-turn text the template puts after them) are trained.
//
// The text comes from the tokenizer's chat template (chat_template.jinja or
// tokenizer_config.json's `chat_template` beside tokenizer.json), or from
// kDefaultChatTemplate. Masking renders conversation prefixes and tokenizes
// incrementally (docs/hf.md, "Instruction data and chat templates"):
//
//   R  = render(messages, add_generation_prompt = false); ids = encode(R)
//   for each assistant message i:
//     P = render(messages[:i], add_generation_prompt = true)   (must be a
//         prefix of R), start = common prefix of encode(P) and ids
//     Q = render(messages[:i+1], add_generation_prompt = false)
//         end = len(encode(Q)) when Q is a prefix of R and encode(Q) a prefix
//         of ids; one more when the last token straddles the boundary; the
//         common prefix of encode(Q) and ids when Q is not a prefix of R
//     ids [start, end) are trained
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_TOKENIZER_INSTRUCT_H
#define MTC_LIB_TOKENIZER_INSTRUCT_H

#include "lib/Support/Status.h"
#include "lib/Tokenizer/ChatTemplate.h"
#include "lib/Tokenizer/Tokenizer.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mtc::tok {

/// The template used when the tokenizer has none (documented in docs/hf.md).
extern const char *const kDefaultChatTemplate;

struct ChatMessage {
  std::string role; ///< system | user | assistant (others are kept, masked)
  std::string content;
};

struct ChatFormat {
  ChatTemplate tmpl;
  /// Where the template came from: a file, "DIR/tokenizer_config.json:
  /// chat_template", or "the default template".
  std::string origin;
  /// tokenizer_config.json's tokens (or, without that file, the tokenizer's
  /// added special tokens by name); unset ones are undefined in the template.
  std::optional<std::string> bosToken, eosToken, unkToken, padToken;
};

/// The chat format for the tokenizer at \p tokenizerPath (a tokenizer.json or
/// its directory): \p templateFile if not empty, else chat_template.jinja,
/// else tokenizer_config.json's chat_template (a string, or a list whose
/// "default" entry is used), else kDefaultChatTemplate. Without
/// tokenizer_config.json, bos is the first added special token of <s>,
/// <bos>, <|begin_of_text|>, <|startoftext|>, and eos the first of </s>,
/// <eos>, <|end_of_text|>, <|endoftext|>.
Expected<ChatFormat> loadChatFormat(const Tokenizer &tok,
                                    const std::string &tokenizerPath,
                                    const std::string &templateFile = "");

/// Parses one jsonl line. Errors (without file and line): malformed JSON, not
/// an object, neither "messages" nor "prompt"/"response", a field of the
/// wrong type, a message without "role" or "content", no assistant message.
/// "system" (a string) may accompany prompt/response. Other fields are
/// ignored.
Expected<std::vector<ChatMessage>> parseInstructionLine(std::string_view line);

/// Renders \p messages with \p format (add_generation_prompt as given).
Expected<std::string> renderChat(const ChatFormat &format,
                                 const std::vector<ChatMessage> &messages,
                                 bool addGenerationPrompt);

struct EncodedConversation {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> mask; ///< 1: trained, 0: masked; one per id
};

/// Tokenizes a conversation and marks the assistant spans (see above).
Expected<EncodedConversation>
encodeConversation(const Tokenizer &tok, const ChatFormat &format,
                   const std::vector<ChatMessage> &messages);

} // namespace mtc::tok

#endif // MTC_LIB_TOKENIZER_INSTRUCT_H
