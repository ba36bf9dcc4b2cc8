//===- JsonParse.h - JSON text into a value, every failure an error -*- C++ -*-===//
//
// Part of mtc. The one way the project turns untrusted JSON text (bundles,
// hardware profiles, HF configs, tokenizer files, checkpoints' state) into a
// nlohmann::json. nlohmann's parser throws more than parse_error: a number
// too large for a double ("1e999") is an out_of_range exception, which a
// catch of parse_error alone lets through to std::terminate. Here every
// exception of the library becomes an error naming the origin and, where it
// can be found, the line and column. The parser itself is iterative (no
// recursion per nesting level) and linear in the size of the text.
// Header-only; include it only where nlohmann-json is available.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_JSONPARSE_H
#define MTC_LIB_SUPPORT_JSONPARSE_H

#include "lib/Support/Status.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace mtc {

namespace detail {

/// "line L, column C" of byte \p pos of \p text (both from 1).
inline std::string jsonPlace(std::string_view text, size_t pos) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

/// nlohmann's message without its "[json.exception.x.N] " tag.
inline std::string jsonMessage(const nlohmann::json::exception &e) {
  std::string m = e.what();
  if (!m.empty() && m[0] == '[') {
    size_t close = m.find("] ");
    if (close != std::string::npos)
      m.erase(0, close + 2);
  }
  return m;
}

} // namespace detail

/// Parses \p text as one JSON document. Errors: "<origin>: not valid JSON:
/// parse error at line 3, column 7: ..." for syntax, "<origin>: line 2,
/// column 9: number 1e999 is out of the range of a double" for an overflowing
/// number, and any other exception of the library with its message.
inline Expected<nlohmann::json> parseJson(std::string_view text,
                                          const std::string &origin) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error &e) {
    return Status::error(origin + ": not valid JSON: " +
                         detail::jsonMessage(e));
  } catch (const nlohmann::json::out_of_range &e) {
    // "number overflow parsing '1e999'": find the literal for its place.
    std::string m = detail::jsonMessage(e);
    size_t q1 = m.find('\''), q2 = m.rfind('\'');
    if (e.id == 406 && q1 != std::string::npos && q2 > q1 + 1) {
      std::string literal = m.substr(q1 + 1, q2 - q1 - 1);
      size_t at = text.find(literal);
      return Status::error(
          origin + ": " +
          (at == std::string_view::npos ? std::string()
                                        : detail::jsonPlace(text, at) + ": ") +
          "number " + literal + " is out of the range of a double");
    }
    return Status::error(origin + ": not valid JSON: " + m);
  } catch (const nlohmann::json::exception &e) {
    return Status::error(origin + ": not valid JSON: " +
                         detail::jsonMessage(e));
  }
}

} // namespace mtc

#endif // MTC_LIB_SUPPORT_JSONPARSE_H
