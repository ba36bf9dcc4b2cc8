//===- OpKind.h - The ops of the bundle format as an enum -------*- C++ -*-===//
//
// Part of mtc. OpKind numbers the ops of Ops.def, so that the runtime decodes
// an op's name once, at load, and afterwards switches or indexes tables on a
// small integer instead of comparing strings.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_BUNDLE_OPKIND_H
#define MTC_LIB_BUNDLE_OPKIND_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace mtc::bundle {

/// One enumerator per line of Ops.def, in its order.
enum class OpKind : uint8_t {
#define MTC_OP(Kind, Name) Kind,
#include "lib/Bundle/Ops.def"
};

/// The number of op kinds (the size of a kernel table).
constexpr size_t kNumOpKinds = 0
#define MTC_OP(Kind, Name) +1
#include "lib/Bundle/Ops.def"
    ;

/// The bundle name of \p kind ("matmul").
const char *opKindName(OpKind kind);
/// The kind of the op named \p name, or nothing for a name the runtime does
/// not know.
std::optional<OpKind> opKindOf(const std::string &name);

} // namespace mtc::bundle

#endif // MTC_LIB_BUNDLE_OPKIND_H
