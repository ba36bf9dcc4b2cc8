//===- JsonString.cpp - JSON string literals ------------------------------===//
//
// Part of mtc. See JsonString.h.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/JsonString.h"

namespace mtc {

void appendJsonString(std::string &out, std::string_view s) {
  // One pass, no formatting call per byte: a chat template's tojson may
  // escape megabytes of control characters.
  static const char hex[] = "0123456789abcdef";
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && ch != '"' && ch != '\\') {
      out += ch;
      continue;
    }
    out += '\\';
    switch (c) {
    case '"':
    case '\\':
      out += ch;
      break;
    case '\b':
      out += 'b';
      break;
    case '\f':
      out += 'f';
      break;
    case '\n':
      out += 'n';
      break;
    case '\r':
      out += 'r';
      break;
    case '\t':
      out += 't';
      break;
    default:
      out += "u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  out += '"';
}

} // namespace mtc
