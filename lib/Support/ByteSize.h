//===- ByteSize.h - Byte sizes on the command line --------------*- C++ -*-===//
//
// Part of mtc. "64MiB", "1.5GiB", "1048576": the byte sizes that
// `--device-memory`, `--max-shard-size` and the memory model accept, and the
// one formatter that writes byte counts for people ("1.5 MiB (1572864
// bytes)", "320.0 MiB", "412 MiB"). Here, without LLVM, so that the compiler
// (compiler/Analysis parseByteSize) and the runtime-only tools (mtc-run) read
// and write them alike.
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

/// How formatBytes writes a byte count. Units are powers of 1024, indexed
/// 0 bytes, 1 KiB, 2 MiB, 3 GiB, 4 TiB, 5 PiB; the count is written in the
/// largest unit in [minUnit, maxUnit] that it reaches (minUnit when it
/// reaches none), with one decimal. The presets are the three forms the
/// tools print.
struct ByteFormat {
  /// How the decimal is rounded.
  enum class Rounding {
    HalfEven, ///< to the nearest tenth, ties to even (as printf "%.1f")
    HalfUp,   ///< to the nearest tenth, ties up
    Up        ///< up (for sizes that must be enough)
  };
  int minUnit = 0;
  int maxUnit = 4;
  Rounding rounding = Rounding::HalfEven;
  /// "2 GiB" rather than "2.0 GiB" when the rounded value is whole.
  bool dropWholeDecimal = false;
  /// Appends " (N bytes)" when the unit is not bytes.
  bool appendExact = true;
  /// The name of unit 0: "bytes" or "B".
  const char *byteName = "bytes";

  /// "512 bytes", "1.5 MiB (1572864 bytes)": error messages that name an
  /// exact size (arena, host store).
  static ByteFormat exact() { return ByteFormat(); }
  /// "320.0 MiB", "1.5 GiB", "4.0 PiB": estimates (host memory needs).
  static ByteFormat approx() {
    ByteFormat f;
    f.minUnit = 2;
    f.maxUnit = 5;
    f.appendExact = false;
    return f;
  }
  /// "412 MiB", "301.5 MiB", "2 GiB", "640 KiB", "100 B": memory plans;
  /// \p roundUp rounds the decimal up, else to the nearest (ties up).
  static ByteFormat compact(bool roundUp = false) {
    ByteFormat f;
    f.maxUnit = 3;
    f.rounding = roundUp ? Rounding::Up : Rounding::HalfUp;
    f.dropWholeDecimal = true;
    f.appendExact = false;
    f.byteName = "B";
    return f;
  }
};

/// Writes \p bytes for people in the form \p format describes (a negative
/// count as "-" and its magnitude).
std::string formatBytes(int64_t bytes,
                        const ByteFormat &format = ByteFormat::exact());

} // namespace mtc

#endif // MTC_LIB_SUPPORT_BYTESIZE_H
