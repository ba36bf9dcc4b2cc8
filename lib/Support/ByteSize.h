//===- ByteSize.h - Byte sizes on the command line --------------*- C++ -*-===//
//
// Part of mtc. "64MiB", "1.5GiB", "1048576": the byte sizes that
// `--device-memory`, `--max-shard-size` and the memory model accept. Here,
// without LLVM, so that the compiler (compiler/Analysis parseByteSize) and
// the runtime-only tools (mtc-run) read them alike.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_BYTESIZE_H
#define MTC_LIB_SUPPORT_BYTESIZE_H

#include "lib/Support/Status.h"

#include <cstdint>
#include <string>

namespace mtc {

/// Parses a byte size: a bare number is bytes; suffixes KiB, MiB, GiB, TiB
/// (powers of 1024; also K/KB, M/MB, G/GB, T/TB, case-insensitive, as
/// powers of 1024) after an integer or decimal number ("64MiB", "1.5GiB",
/// "512KiB", "1048576"). Fractional results are rounded down to a byte.
/// Anything else, negative sizes and sizes beyond 2^62 bytes are errors that
/// quote \p text and show the accepted forms.
Expected<int64_t> parseByteSize(const std::string &text);

/// parseByteSize for a device budget (`--device-memory`): zero is an error
/// too ("device memory must be positive, got '0'").
Expected<int64_t> parseDeviceBudget(const std::string &text);

} // namespace mtc

#endif // MTC_LIB_SUPPORT_BYTESIZE_H
