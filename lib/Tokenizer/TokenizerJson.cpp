//===- TokenizerJson.cpp - tokenizer.json field access --------------------===//
//
// Part of mtc. Reading tokenizer.json's fields with the JSON path of the
// field in every message (`model.merges[3]: ...`); the components' parsers
// are built on these.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/TokenizerInternal.h"

#include "lib/Tokenizer/Unicode.h"

#include <nlohmann/json.hpp>

namespace mtc::tok::hf {

void fail(const std::string &path, const std::string &msg) {
  throw LoadError{path.empty() ? msg : path + ": " + msg};
}

const char *typeName(const json &v) {
  switch (v.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::object:
    return "an object";
  case json::value_t::array:
    return "an array";
  case json::value_t::string:
    return "a string";
  case json::value_t::boolean:
    return "a boolean";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
    return "an integer";
  case json::value_t::number_float:
    return "a number";
  default:
    return "a binary value";
  }
}

std::string shortText(const std::string &s) {
  if (s.size() <= 40)
    return s;
  size_t cut = 40;
  while (cut > 0 && (static_cast<uint8_t>(s[cut]) & 0xC0) == 0x80)
    --cut;
  return s.substr(0, cut) + "...";
}

std::string join(const std::string &path, const char *key) {
  return path.empty() ? std::string(key) : path + "." + key;
}
std::string index(const std::string &path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

void expectObject(const json &v, const std::string &path) {
  if (!v.is_object())
    fail(path, std::string("expected an object, got ") + typeName(v));
}

/// The member \p key of object \p obj (at \p path); an error when missing.
const json &member(const json &obj, const std::string &path, const char *key) {
  auto it = obj.find(key);
  if (it == obj.end())
    fail(path, std::string("missing field '") + key + "'");
  return *it;
}

/// The member, or null when it is missing or null.
const json *optional(const json &obj, const char *key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null())
    return nullptr;
  return &*it;
}

std::string asString(const json &v, const std::string &path) {
  if (!v.is_string())
    fail(path, std::string("expected a string, got ") + typeName(v));
  return v.get<std::string>();
}

std::string stringField(const json &obj, const std::string &path,
                        const char *key) {
  return asString(member(obj, path, key), join(path, key));
}

bool boolField(const json &obj, const std::string &path, const char *key,
               bool def) {
  const json *v = optional(obj, key);
  if (!v)
    return def;
  if (!v->is_boolean())
    fail(join(path, key),
         std::string("expected a boolean, got ") + typeName(*v));
  return v->get<bool>();
}

int64_t asInt(const json &v, const std::string &path, int64_t lo, int64_t hi) {
  if (!v.is_number_integer())
    fail(path, std::string("expected an integer, got ") + typeName(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    fail(path, "integer out of range");
  int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    fail(path, "value " + std::to_string(x) + " out of range [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

static constexpr int64_t kMaxId = (int64_t(1) << 31) - 1;

uint32_t asId(const json &v, const std::string &path) {
  return static_cast<uint32_t>(asInt(v, path, 0, kMaxId));
}

/// A single code point given as a JSON string (Metaspace replacement, Strip
/// content).
uint32_t charField(const json &obj, const std::string &path, const char *key) {
  std::string s = stringField(obj, path, key);
  size_t pos = 0;
  if (s.empty() || (nextCodePoint(s, pos), pos != s.size()))
    fail(join(path, key), "expected a single character, got '" + s + "'");
  pos = 0;
  return nextCodePoint(s, pos);
}

std::string typeOf(const json &obj, const std::string &path) {
  if (std::count(path.begin(), path.end(), '[') > 32)
    fail(path, "Sequence nesting deeper than 32 levels");
  expectObject(obj, path);
  return stringField(obj, path, "type");
}

void unsupportedType(const std::string &path, const std::string &type,
                     const char *supported) {
  throw LoadError{path + ".type '" + type +
                  "' is not supported (supported: " + supported + ")"};
}

/// A {"String": s} or {"Regex": r} pattern (Split, Replace).
Regex patternField(const json &obj, const std::string &path) {
  const json &p = member(obj, path, "pattern");
  std::string pp = join(path, "pattern");
  expectObject(p, pp);
  if (const json *s = optional(p, "String"))
    return Regex::literal(asString(*s, pp + ".String"));
  if (const json *r = optional(p, "Regex")) {
    std::string src = asString(*r, pp + ".Regex");
    Regex re;
    if (Status st = re.compile(src); !st)
      fail(pp + ".Regex", "unsupported regex: " + st.message() + " (pattern '" +
                              shortText(src) + "')");
    return re;
  }
  fail(pp, "expected {\"String\": ...} or {\"Regex\": ...}");
}

} // namespace mtc::tok::hf
