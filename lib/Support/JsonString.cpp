//===- JsonString.cpp - JSON string literals ------------------------------===//
//
// Part of mtc. See JsonString.h.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/JsonString.h"

#include <cstdio>

namespace mtc {

void appendJsonString(std::string &out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += ch;
      }
    }
  }
  out += '"';
}

} // namespace mtc
