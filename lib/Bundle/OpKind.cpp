//===- OpKind.cpp - The ops of the bundle format as an enum ---------------===//
//
// Part of mtc. See OpKind.h.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/OpKind.h"

#include <unordered_map>

namespace mtc::bundle {

namespace {

const char *const kNames[] = {
#define MTC_OP(Kind, Name, ...) Name,
#include "lib/Bundle/Ops.def"
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumOpKinds);

const char *const kUnaryNames[] = {
#define MTC_UNARY_FN(Enum, Name, Param) Name,
#include "lib/Bundle/UnaryFns.def"
};
const bool kUnaryParams[] = {
#define MTC_UNARY_FN(Enum, Name, Param) Param != 0,
#include "lib/Bundle/UnaryFns.def"
};
static_assert(sizeof(kUnaryNames) / sizeof(kUnaryNames[0]) == kNumUnaryFns);

/// The enumerator named \p name in \p names (the enum's order), or nothing.
/// One name table per enum: the index is built once per E.
template <typename E, size_t N>
std::optional<E> lookup(const char *const (&names)[N],
                        const std::string &name) {
  static const std::unordered_map<std::string, E> index = [&] {
    std::unordered_map<std::string, E> m;
    for (size_t k = 0; k < N; ++k)
      m.emplace(names[k], static_cast<E>(k));
    return m;
  }();
  auto it = index.find(name);
  if (it == index.end())
    return std::nullopt;
  return it->second;
}

} // namespace

const char *opKindName(OpKind kind) {
  return kNames[static_cast<size_t>(kind)];
}

std::optional<OpKind> opKindOf(const std::string &name) {
  return lookup<OpKind>(kNames, name);
}

const char *unaryFnName(UnaryFn fn) {
  return kUnaryNames[static_cast<size_t>(fn)];
}

std::optional<UnaryFn> unaryFnOf(const std::string &name) {
  return lookup<UnaryFn>(kUnaryNames, name);
}

bool unaryFnTakesParam(UnaryFn fn) {
  return kUnaryParams[static_cast<size_t>(fn)];
}

std::string unaryFnNames() {
  std::string out;
  for (const char *n : kUnaryNames)
    out += (out.empty() ? "'" : ", '") + std::string(n) + "'";
  return out;
}

} // namespace mtc::bundle
