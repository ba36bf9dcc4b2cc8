//===- ByteSizeTest.cpp - Byte sizes read and written ---------------------===//
//
// Part of mtc. lib/Support/ByteSize.h: parseByteSize and the one byte
// formatter, in each of the forms the tools print.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/ByteSize.h"

#include <gtest/gtest.h>

using mtc::ByteFormat;
using mtc::formatBytes;

TEST(ByteSize, ParsesSuffixes) {
  EXPECT_EQ(*mtc::parseByteSize("64MiB"), int64_t(64) << 20);
  EXPECT_EQ(*mtc::parseByteSize("1.5GiB"), int64_t(3) << 29);
  EXPECT_EQ(*mtc::parseByteSize("1048576"), int64_t(1) << 20);
  EXPECT_FALSE(mtc::parseByteSize("lots").ok());
}

TEST(ByteSize, ExactForm) {
  EXPECT_EQ(formatBytes(100), "100 bytes");
  EXPECT_EQ(formatBytes(1536), "1.5 KiB (1536 bytes)");
  EXPECT_EQ(formatBytes(int64_t(3) << 19), "1.5 MiB (1572864 bytes)");
  EXPECT_EQ(formatBytes(int64_t(2) << 40), "2.0 TiB (2199023255552 bytes)");
  // Beyond TiB the exact form stays in TiB.
  EXPECT_EQ(formatBytes(int64_t(1) << 50),
            "1024.0 TiB (1125899906842624 bytes)");
  // Ties go to the even tenth, as printf("%.1f") does: 1.25 MiB, 1.75 KiB.
  EXPECT_EQ(formatBytes(int64_t(5) << 18), "1.2 MiB (1310720 bytes)");
  EXPECT_EQ(formatBytes(1792), "1.8 KiB (1792 bytes)");
  EXPECT_EQ(formatBytes(-2048), "-2.0 KiB (2048 bytes)");
}

TEST(ByteSize, ApproxForm) {
  EXPECT_EQ(formatBytes(int64_t(320) << 20, ByteFormat::approx()), "320.0 MiB");
  EXPECT_EQ(formatBytes(int64_t(3) << 29, ByteFormat::approx()), "1.5 GiB");
  EXPECT_EQ(formatBytes(int64_t(4) << 50, ByteFormat::approx()), "4.0 PiB");
  // Nothing smaller than MiB.
  EXPECT_EQ(formatBytes(int64_t(300) << 10, ByteFormat::approx()), "0.3 MiB");
}

TEST(ByteSize, CompactForm) {
  EXPECT_EQ(formatBytes(int64_t(412) << 20, ByteFormat::compact()), "412 MiB");
  EXPECT_EQ(formatBytes(100, ByteFormat::compact()), "100 B");
  EXPECT_EQ(formatBytes(1536, ByteFormat::compact()), "1.5 KiB");
  EXPECT_EQ(formatBytes((int64_t(301) << 20) + 1, ByteFormat::compact(true)),
            "301.1 MiB");
  EXPECT_EQ(formatBytes((int64_t(301) << 20) + 1, ByteFormat::compact()),
            "301 MiB");
  // Ties go up: 1.25 MiB.
  EXPECT_EQ(formatBytes(int64_t(5) << 18, ByteFormat::compact()), "1.3 MiB");
  // GiB is the largest unit.
  EXPECT_EQ(formatBytes(int64_t(1) << 62, ByteFormat::compact()),
            "4294967296 GiB");
}
