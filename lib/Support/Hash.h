//===- Hash.h - XXH64 checksums ---------------------------------*- C++ -*-===//
//
// Part of mtc. The one checksum of the project: XXH64 (checkpoint files, the
// fingerprint of training data, the CPU kernels embedded in a bundle) and its
// text form, 16 lowercase hex digits. Pure C++, no dependencies.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_HASH_H
#define MTC_LIB_SUPPORT_HASH_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace mtc {

/// XXH64 of \p n bytes at \p data (little-endian hosts).
uint64_t xxh64(const void *data, size_t n, uint64_t seed = 0);

/// \p v as 16 lowercase hex digits.
std::string hex64(uint64_t v);

/// Parses exactly 16 hex digits (either case) into \p out; false otherwise.
bool parseHex64(const std::string &text, uint64_t &out);

} // namespace mtc

#endif // MTC_LIB_SUPPORT_HASH_H
