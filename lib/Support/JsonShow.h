//===- JsonShow.h - Short, bounded renderings of JSON values ----*- C++ -*-===//
//
// Part of mtc. Error messages quote the offending JSON value. nlohmann's
// json::dump recurses once per nesting level, so quoting a value nested
// millions deep (a hostile config or bundle) would overflow the stack; these
// helpers recurse at most 16 levels and stop after 60 characters.
// Header-only; include it only where nlohmann-json is available.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_JSONSHOW_H
#define MTC_LIB_SUPPORT_JSONSHOW_H

#include <nlohmann/json.hpp>

#include <string>

namespace mtc {

/// Appends the compact JSON text of \p v to \p s, stopping once \p s is
/// longer than \p limit and writing arrays and objects nested deeper than
/// \p depth as "[...]" / "{...}".
inline void showJsonInto(const nlohmann::json &v, std::string &s, size_t limit,
                         int depth) {
  if (s.size() > limit)
    return;
  if (!v.is_structured()) {
    s += v.dump();
    return;
  }
  bool array = v.is_array();
  if (depth <= 0) {
    s += array ? "[...]" : "{...}";
    return;
  }
  s += array ? '[' : '{';
  bool first = true;
  for (auto it = v.begin(); it != v.end() && s.size() <= limit; ++it) {
    if (!first)
      s += ',';
    first = false;
    if (!array)
      s += nlohmann::json(it.key()).dump() + ':';
    showJsonInto(it.value(), s, limit, depth - 1);
  }
  s += array ? ']' : '}';
}

/// A short rendering of a JSON value for messages.
inline std::string showJson(const nlohmann::json &v) {
  std::string s;
  showJsonInto(v, s, 60, 16);
  if (s.size() > 60)
    s = s.substr(0, 57) + "...";
  return s;
}

} // namespace mtc

#endif // MTC_LIB_SUPPORT_JSONSHOW_H
