//===- Bf16Test.cpp - bf16 conversions of the CPU kernels
//--------------------===//
//
// Part of mtc. runtime/cpu/Bf16.h: widening is exact, narrowing rounds to
// nearest even (ties to the even neighbour), NaN stays a quiet NaN of its
// sign, overflow rounds to infinity; the bulk conversions (threaded above
// 64Ki elements) give the scalar ones' bits and the CPU device's f32 -> bf16
// copies' bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Bf16.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/device/CpuDevice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace mtc::cpu {
namespace {

float bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(toBF16(1.0f), 0x3f80);
  EXPECT_EQ(toBF16(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7: down.
  EXPECT_EQ(toBF16(bits(0x3f808000u)), 0x3f80);
  // 1 + 3 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(toBF16(bits(0x3f818000u)), 0x3f82);
  // Just above / below halfway.
  EXPECT_EQ(toBF16(bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(toBF16(bits(0x3f807fffu)), 0x3f80);
  // 0.1f = 0x3dcccccd rounds up to 0x3dcd.
  EXPECT_EQ(toBF16(0.1f), 0x3dcd);
}

TEST(Bf16, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(toBF16(inf), 0x7f80);
  EXPECT_EQ(toBF16(-inf), 0xff80);
  // The largest finite float rounds past bf16's largest to infinity.
  EXPECT_EQ(toBF16(std::numeric_limits<float>::max()), 0x7f80);
  // A signalling NaN with only low mantissa bits stays a (quiet) NaN.
  uint16_t nan = toBF16(bits(0x7f800001u));
  EXPECT_TRUE(std::isnan(fromBF16(nan)));
  EXPECT_EQ(nan & 0x0040, 0x0040);
  EXPECT_TRUE(std::signbit(fromBF16(toBF16(bits(0xff800001u)))));
  EXPECT_EQ(toBF16(-0.0f), 0x8000);
  // Subnormals round like any other value.
  EXPECT_EQ(toBF16(bits(0x00008000u)), 0x0000);
  EXPECT_EQ(toBF16(bits(0x00018000u)), 0x0002);
}

TEST(Bf16, WideningIsExactForEveryPattern) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    float x = fromBF16(static_cast<uint16_t>(h));
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    EXPECT_EQ(u, h << 16);
    if (!std::isnan(x)) {
      ASSERT_EQ(toBF16(x), h) << h;
    }
  }
}

TEST(Bf16, BulkConversionsMatchTheScalarOnesAndTheDevice) {
  // Above the threading threshold, with a tail.
  const int64_t n = (int64_t(1) << 17) + 13;
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float &v : x)
    v = dist(rng);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[6] = -std::numeric_limits<float>::infinity();
  const int saved = threads();
  setThreads(2);
  std::vector<uint16_t> narrow(x.size()), device(x.size());
  narrowToBF16(x.data(), narrow.data(), n);
  device::convertF32ToBF16(x.data(), device.data(), n);
  std::vector<float> wide(x.size()), rounded(x.size());
  widenBF16(narrow.data(), wide.data(), n);
  roundThroughBF16(x.data(), rounded.data(), n);
  setThreads(saved);
  EXPECT_EQ(narrow, device);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(narrow[i], toBF16(x[i])) << i;
    uint32_t a, b;
    std::memcpy(&a, &wide[i], 4);
    std::memcpy(&b, &rounded[i], 4);
    ASSERT_EQ(a, static_cast<uint32_t>(narrow[i]) << 16) << i;
    ASSERT_EQ(a, b) << i;
  }
}

} // namespace
} // namespace mtc::cpu
