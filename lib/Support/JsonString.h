//===- JsonString.h - JSON string literals ----------------------*- C++ -*-===//
//
// Part of mtc. The one JSON string escaper of the project (metrics lines,
// trace files, chat-template `tojson`): `"` and `\` escaped, \b \f \n \r \t
// by name, other control characters as \u00XX, everything else (UTF-8
// included) as is — what Python's json.dumps(ensure_ascii=False) writes.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_JSONSTRING_H
#define MTC_LIB_SUPPORT_JSONSTRING_H

#include <string>
#include <string_view>

namespace mtc {

/// Appends \p s as a quoted JSON string literal to \p out.
void appendJsonString(std::string &out, std::string_view s);

/// \p s as a quoted JSON string literal.
inline std::string jsonString(std::string_view s) {
  std::string out;
  appendJsonString(out, s);
  return out;
}

} // namespace mtc

#endif // MTC_LIB_SUPPORT_JSONSTRING_H
