//===- HashTest.cpp - XXH64 and its text form -------------------*- C++ -*-===//
//
// Part of mtc. lib/Support/Hash against xxHash's reference values.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Hash.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace mtc;

TEST(Hash, Xxh64MatchesReferenceVectors) {
  EXPECT_EQ(xxh64("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(xxh64("abc", 3), 0x44BC2CF5AD770999ULL);
  const char *s = "Nobody inspects the spammish repetition";
  EXPECT_EQ(xxh64(s, std::strlen(s)), 0xFBCEA83C8A378BF1ULL);
}

TEST(Hash, Hex64RoundTrips) {
  EXPECT_EQ(hex64(0xEF46DB3751D8E999ULL), "ef46db3751d8e999");
  EXPECT_EQ(hex64(1), "0000000000000001");
  uint64_t v = 0;
  ASSERT_TRUE(parseHex64("EF46db3751D8E999", v));
  EXPECT_EQ(v, 0xEF46DB3751D8E999ULL);
  EXPECT_FALSE(parseHex64("ef46db3751d8e99", v));  // 15 digits
  EXPECT_FALSE(parseHex64("-f46db3751d8e999", v)); // sign
  EXPECT_FALSE(parseHex64(" f46db3751d8e999", v)); // space
  EXPECT_FALSE(parseHex64("0xf46db3751d8e99", v)); // prefix
}
