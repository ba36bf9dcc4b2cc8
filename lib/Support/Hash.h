//===- Hash.h - xxh64 -------------------------------------------*- C++ -*-===//
//
// Part of mtc. The one content hash of the project: checkpoint file checksums,
// data fingerprints, kernel cache keys, bundle kernel checksums.
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

} // namespace mtc

#endif // MTC_LIB_SUPPORT_HASH_H
