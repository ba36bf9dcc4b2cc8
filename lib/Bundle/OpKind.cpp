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
#define MTC_OP(Kind, Name) Name,
#include "lib/Bundle/Ops.def"
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumOpKinds);

} // namespace

const char *opKindName(OpKind kind) {
  return kNames[static_cast<size_t>(kind)];
}

std::optional<OpKind> opKindOf(const std::string &name) {
  static const std::unordered_map<std::string, OpKind> index = [] {
    std::unordered_map<std::string, OpKind> m;
    for (size_t k = 0; k < kNumOpKinds; ++k)
      m.emplace(kNames[k], static_cast<OpKind>(k));
    return m;
  }();
  auto it = index.find(name);
  if (it == index.end())
    return std::nullopt;
  return it->second;
}

} // namespace mtc::bundle
