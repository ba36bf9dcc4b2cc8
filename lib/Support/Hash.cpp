//===- Hash.cpp - XXH64 checksums -------------------------------*- C++ -*-===//
//
// Part of mtc. XXH64 as specified by xxHash (Yann Collet), checked against its
// reference values in test/unit/HashTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Hash.h"

#include <cstdio>
#include <cstring>

namespace mtc {

uint64_t xxh64(const void *data, size_t n, uint64_t seed) {
  constexpr uint64_t P1 = 11400714785074694791ULL;
  constexpr uint64_t P2 = 14029467366897019727ULL;
  constexpr uint64_t P3 = 1609587929392839161ULL;
  constexpr uint64_t P4 = 9650029242287828579ULL;
  constexpr uint64_t P5 = 2870177450012600261ULL;
  auto rotl = [](uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  auto read64 = [](const uint8_t *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v; // little-endian hosts only (as the safetensors code)
  };
  auto read32 = [](const uint8_t *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return static_cast<uint64_t>(v);
  };
  auto round = [&](uint64_t acc, uint64_t input) {
    acc += input * P2;
    acc = rotl(acc, 31);
    return acc * P1;
  };
  auto merge = [&](uint64_t acc, uint64_t val) {
    acc ^= round(0, val);
    return acc * P1 + P4;
  };
  const uint8_t *p = static_cast<const uint8_t *>(data);
  const uint8_t *end = p + n;
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
    const uint8_t *limit = end - 32;
    do {
      v1 = round(v1, read64(p));
      v2 = round(v2, read64(p + 8));
      v3 = round(v3, read64(p + 16));
      v4 = round(v4, read64(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge(h, v1);
    h = merge(h, v2);
    h = merge(h, v3);
    h = merge(h, v4);
  } else {
    h = seed + P5;
  }
  h += static_cast<uint64_t>(n);
  for (; p + 8 <= end; p += 8) {
    h ^= round(0, read64(p));
    h = rotl(h, 27) * P1 + P4;
  }
  if (p + 4 <= end) {
    h ^= read32(p) * P1;
    h = rotl(h, 23) * P2 + P3;
    p += 4;
  }
  for (; p < end; ++p) {
    h ^= static_cast<uint64_t>(*p) * P5;
    h = rotl(h, 11) * P1;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(v));
  return buf;
}

bool parseHex64(const std::string &text, uint64_t &out) {
  if (text.size() != 16)
    return false;
  uint64_t v = 0;
  for (char c : text) {
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0)
      return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  out = v;
  return true;
}

} // namespace mtc
