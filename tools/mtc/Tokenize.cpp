//===- Tokenize.cpp - mtc tokenize ------------------------------*- C++ -*-===//
//
// Part of mtc. `mtc tokenize`: text or instruction data to a token file
// (and a loss mask), and token ids back to text.
//
//===----------------------------------------------------------------------===//

#include "tools/mtc/Tool.h"

#include "lib/Support/Files.h"
#include "lib/Tokenizer/Instruct.h"
#include "lib/Tokenizer/TokenFile.h"
#include "lib/Tokenizer/Tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <set>
#include <string>
#include <vector>

namespace mtc::cli {

namespace {

/// The ids of --decode's input: an llm.c token file, or integers separated
/// by whitespace or commas.
bool parseIds(const std::string &name, const std::string &bytes,
              std::vector<uint32_t> &ids) {
  size_t pos = 0, n = bytes.size();
  while (pos < n) {
    char c = bytes[pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',') {
      ++pos;
      continue;
    }
    size_t start = pos;
    uint64_t v = 0;
    while (pos < n && bytes[pos] >= '0' && bytes[pos] <= '9' &&
           v <= 0xFFFFFFFFull)
      v = v * 10 + static_cast<uint64_t>(bytes[pos++] - '0');
    bool sep = pos == n || bytes[pos] == ' ' || bytes[pos] == '\t' ||
               bytes[pos] == '\n' || bytes[pos] == '\r' || bytes[pos] == ',';
    if (pos == start || !sep || v > 0xFFFFFFFFull) {
      size_t end = bytes.find_first_of(" \t\r\n,", start);
      error("tokenize: " + name + ": '" +
            bytes.substr(start, std::min<size_t>(end - start, 20)) +
            "' at byte " + std::to_string(start) + " is not a token id");
      return false;
    }
    ids.push_back(static_cast<uint32_t>(v));
  }
  return true;
}

/// `mtc tokenize` of instruction data (a .jsonl): ids and a loss mask.
int tokenizeInstructions(const mtc::tok::Tokenizer &tok,
                         const std::string &tokPath,
                         const std::string &chatTemplate,
                         const std::string &input, const std::string &output,
                         bool print) {
  mtc::Expected<mtc::tok::ChatFormat> fmt =
      mtc::tok::loadChatFormat(tok, tokPath, chatTemplate);
  if (!fmt)
    return error("tokenize: " + fmt.message());
  // A regular file only: a FIFO would block the read forever.
  mtc::Expected<std::string> data = mtc::readRegularFile(input);
  if (!data)
    return error("tokenize: " + data.message());
  std::vector<uint32_t> ids;
  std::vector<uint8_t> mask;
  std::string line;
  size_t lineNo = 0, examples = 0;
  for (size_t pos = 0; pos < data->size();) {
    size_t end = std::min(data->find('\n', pos), data->size());
    line.assign(*data, pos, end - pos);
    pos = end + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;
    std::string where = input + ":" + std::to_string(lineNo) + ": ";
    mtc::Expected<std::vector<mtc::tok::ChatMessage>> msgs =
        mtc::tok::parseInstructionLine(line);
    if (!msgs)
      return error("tokenize: " + where + msgs.message());
    mtc::Expected<mtc::tok::EncodedConversation> enc =
        mtc::tok::encodeConversation(tok, *fmt, *msgs);
    if (!enc)
      return error("tokenize: " + where + enc.message());
    if (print) {
      std::string out;
      for (size_t i = 0; i < enc->ids.size(); ++i) {
        if (i)
          out += ' ';
        std::string id = std::to_string(enc->ids[i]);
        out += enc->mask[i] ? id : "[" + id + "]";
      }
      std::cout << out << "\n";
    }
    ids.insert(ids.end(), enc->ids.begin(), enc->ids.end());
    mask.insert(mask.end(), enc->mask.begin(), enc->mask.end());
    ++examples;
  }
  if (examples == 0)
    return error("tokenize: " + input + ": no examples");
  size_t trained = 0;
  for (uint8_t m : mask)
    trained += m;
  if (!output.empty()) {
    int version = 0;
    mtc::Status s =
        mtc::tok::writeTokenFile(output, ids, tok.vocabSize(), &version);
    if (s.ok())
      s = mtc::tok::writeLossMask(mtc::tok::lossMaskPath(output), mask);
    if (!s)
      return error(s.message());
    (print ? std::cerr : std::cout)
        << "wrote " << output << ": " << ids.size() << " tokens ("
        << (version == 1 ? "uint16" : "uint32") << ", llm.c version " << version
        << ") from " << examples << " examples, " << trained
        << " trained; loss mask " << mtc::tok::lossMaskPath(output)
        << "; chat template: " << fmt->origin << "\n";
  }
  return 0;
}

} // namespace

int runTokenize(const std::vector<std::string> &args) {
  if (wantsHelp("tokenize", args))
    return 0;
  bool print = false, decode = false, addSpecial = false, skipSpecial = false;
  std::vector<std::string> normalized, pos;
  for (const std::string &a : args) {
    if (a == "--print")
      print = true;
    else if (a == "--decode")
      decode = true;
    else if (a == "--add-special-tokens")
      addSpecial = true;
    else if (a == "--skip-special-tokens")
      skipSpecial = true;
    else
      normalized.push_back(a == "-o" ? "--output" : a);
  }
  std::string tokPath, output, text, chatTemplate;
  std::set<std::string> given;
  if (!parseArgs("tokenize", normalized,
                 {{Flag::String, "--tokenizer", &tokPath},
                  {Flag::String, "--output", &output},
                  {Flag::Text, "--text", &text},
                  {Flag::String, "--chat-template", &chatTemplate}},
                 pos, &given))
    return 1;
  if (tokPath.empty())
    return error("tokenize: --tokenizer DIR|tokenizer.json is required\n"
                 "usage: " +
                 std::string(findCommand("tokenize")->usage));
  bool fromText = given.count("--text") != 0;
  std::string input;
  if (fromText) {
    if (!pos.empty())
      return error("tokenize: give either an input file or --text, not both");
    input = "--text";
  } else if (!onePositional("tokenize", pos, input)) {
    return 1;
  }
  if (decode && addSpecial)
    return error("tokenize: --add-special-tokens is for encoding; --decode "
                 "takes --skip-special-tokens");
  if (!decode && skipSpecial)
    return error("tokenize: --skip-special-tokens needs --decode");
  if (!decode && output.empty() && !print)
    return error("tokenize: nothing to do: give -o OUT.bin and/or --print");

  bool jsonl = !fromText && input.size() > 6 &&
               input.compare(input.size() - 6, 6, ".jsonl") == 0;
  if (given.count("--chat-template") && !jsonl)
    return error("tokenize: --chat-template is for instruction data "
                 "(a .jsonl input)");
  if (jsonl && (decode || addSpecial))
    return error(std::string("tokenize: ") +
                 (decode ? "--decode" : "--add-special-tokens") +
                 " does not apply to instruction data (.jsonl): the chat "
                 "template places the special tokens");

  {
    std::vector<mtc::NamedPath> inputs = {
        {"--tokenizer", mtc::tok::tokenizerJsonPath(tokPath)},
        {"--chat-template", chatTemplate}};
    if (!fromText)
      inputs.push_back({"the input", input});
    std::vector<mtc::NamedPath> outputs = {{"-o", output}};
    if (jsonl && !output.empty()) {
      // The mask goes beside the token file: a device or a descriptor has
      // no "beside".
      mtc::Expected<mtc::OutputTarget> t = mtc::resolveOutput(output);
      if (t && t->kind != mtc::OutputTarget::Kind::Replace)
        return error("tokenize: -o " + output +
                     ": instruction data writes a token file and its loss "
                     "mask beside it (OUT.bin.mask); give a file path");
      outputs.push_back({"the loss mask", mtc::tok::lossMaskPath(output)});
    }
    if (mtc::Status st = mtc::checkOutputs(outputs, inputs); !st.ok())
      return error("tokenize: " + st.message());
  }
  mtc::Expected<mtc::tok::Tokenizer> tok = mtc::tok::Tokenizer::load(tokPath);
  if (!tok)
    return error(tok.message());
  if (jsonl)
    return tokenizeInstructions(*tok, tokPath, chatTemplate, input, output,
                                print);

  std::string bytes;
  if (fromText) {
    bytes = text;
  } else {
    mtc::Expected<std::string> data = mtc::readRegularFile(input);
    if (!data)
      return error("tokenize: " + data.message());
    bytes = std::move(*data);
  }

  if (decode) {
    std::vector<uint32_t> ids;
    int32_t magic = 0;
    if (bytes.size() >= 4)
      std::memcpy(&magic, bytes.data(), 4);
    if (!fromText && magic == mtc::tok::kTokenFileMagic) {
      mtc::Expected<std::vector<uint32_t>> r = mtc::tok::readTokenFile(input);
      if (!r)
        return error(r.message());
      ids = std::move(*r);
    } else if (!parseIds(input, bytes, ids)) {
      return 1;
    }
    uint32_t vocab = tok->vocabSize();
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= vocab || !tok->idToToken(ids[i]))
        return error("tokenize: " + input + ": token " +
                     std::to_string(ids[i]) + " at position " +
                     std::to_string(i) + " is not in the vocabulary of " +
                     tok->name() + " (size " + std::to_string(vocab) + ")");
    mtc::Expected<std::string> out = tok->decodeChecked(ids, skipSpecial);
    if (!out)
      return error("tokenize: " + input + ": " + out.message());
    return writeOutput(output, *out) ? 0 : 1;
  }

  mtc::Expected<std::vector<uint32_t>> ids = tok->encode(bytes, addSpecial);
  if (!ids)
    return error("tokenize: " + input + ": " + ids.message());
  if (print) {
    std::string line;
    for (size_t i = 0; i < ids->size(); ++i) {
      if (i)
        line += ' ';
      line += std::to_string((*ids)[i]);
    }
    std::cout << line << "\n";
  }
  if (!output.empty()) {
    int version = 0;
    mtc::Status s =
        mtc::tok::writeTokenFile(output, *ids, tok->vocabSize(), &version);
    if (!s)
      return error(s.message());
    (print ? std::cerr : std::cout)
        << "wrote " << output << ": " << ids->size() << " tokens ("
        << (version == 1 ? "uint16" : "uint32") << ", llm.c version " << version
        << ") from " << bytes.size() << " bytes; vocabulary "
        << tok->vocabSize() << " (" << tok->describe() << ")\n";
  }
  return 0;
}

} // namespace mtc::cli
