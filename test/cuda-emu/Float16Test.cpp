//===- Float16Test.cpp - bf16 / fp16 conversions of the CUDA emulator -----===//
//
// Part of mtc. The emulator's __nv_bfloat16 and __half conversions
// (cuda_emu/Float16.h) against two references written here from the
// semantics of cuda_bf16.h / cuda_fp16.h -- the toolkit's bit-level rounding
// rule, and an arithmetic one (nearbyint of the value scaled to the target's
// ulp) -- and, when the toolkit is installed, against its headers' own host
// code (Float16Toolkit.cpp):
//
// - float -> bf16 on every 4099th bit pattern of all 2^32 (about a million,
//   every sign, exponent and NaN payload class), plus every pattern whose low
//   16 bits are a rounding edge (0, 1, 0x7fff, 0x8000, 0x8001, 0xffff) for
//   all 65536 high halves, plus the specials (all 2^32 patterns in a
//   disabled test, run by hand);
// - float -> fp16 on the same, plus every fp16 value, its midpoints with its
//   neighbours and one float ulp either side of them;
// - bf16 -> float and fp16 -> float for all 65536 patterns;
// - double -> bf16 just above, at and below every rounding tie, where
//   rounding twice (double -> float -> bf16) would go wrong;
// - bf16 / fp16 arithmetic against the correctly rounded result.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "cuda_emu.h"

#ifdef MTC_HAVE_CUDA_TOOLKIT_HEADERS
#include "test/cuda-emu/Float16Toolkit.h"
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

/// cuda_bf16.h's rule: keep the high 16 bits and round up when the discarded
/// half is above 0x8000, or exactly 0x8000 with the kept part odd; every NaN
/// becomes 0x7fff.
uint16_t ruleBf16(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return 0x7fff;
  uint16_t kept = static_cast<uint16_t>(u >> 16);
  uint32_t rest = u & 0xffffu;
  if (rest > 0x8000u || (rest == 0x8000u && (kept & 1u)))
    ++kept;
  return kept;
}

/// Rounds |x| to an integer number of units of 2^(lowExp), ties to even, for
/// a format with `mantBits` stored mantissa bits, minimum normal exponent
/// `minExp` and maximum exponent `maxExp`; returns the encoding's magnitude.
uint16_t roundArithmetic(double x, int mantBits, int minExp, int maxExp) {
  int e;
  std::frexp(x, &e); // x = f * 2^e, f in [0.5, 1)
  int exp = std::max(e - 1, minExp);
  double q = std::nearbyint(std::ldexp(x, mantBits - exp)); // ties to even
  if (q >= std::ldexp(1.0, mantBits + 1)) { // rounded up to the next binade
    q /= 2;
    ++exp;
  }
  if (exp > maxExp)
    return static_cast<uint16_t>(((maxExp - minExp + 2) << mantBits)); // inf
  bool normal = q >= std::ldexp(1.0, mantBits);
  uint32_t biasedExp = normal ? static_cast<uint32_t>(exp - minExp + 1) : 0;
  uint32_t mant = static_cast<uint32_t>(q) & ((1u << mantBits) - 1);
  return static_cast<uint16_t>((biasedExp << mantBits) | mant);
}

/// The arithmetic references: round the exact value once.
uint16_t arithBf16(double x) {
  if (std::isnan(x))
    return 0x7fff;
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isinf(x))
    return sign | 0x7f80;
  return sign | roundArithmetic(std::fabs(x), 7, -126, 127);
}
uint16_t arithHalf(double x) {
  if (std::isnan(x))
    return 0x7fff;
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isinf(x))
    return sign | 0x7c00;
  return sign | roundArithmetic(std::fabs(x), 10, -14, 15);
}
float arithHalfToFloat(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (e == 0x1f)
    return m ? floatOf(0x7fffffffu) : sign * INFINITY;
  if (e == 0)
    return sign * std::ldexp(static_cast<float>(m), -24);
  return sign * std::ldexp(static_cast<float>(m + 1024), e - 25);
}

/// The float bit patterns the conversion tests sweep (see the banner).
std::vector<uint32_t> floatSamples() {
  std::vector<uint32_t> s;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4099)
    s.push_back(static_cast<uint32_t>(u));
  for (uint32_t hi = 0; hi < 0x10000; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      s.push_back(hi << 16 | lo);
  for (uint32_t u :
       {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f800001u,
        0xff800001u, 0x7fc00000u, 0xffc00000u, 0x7fffffffu, 0xffffffffu,
        0x7f7fffffu, 0xff7fffffu, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7f8001u,
        0x00000001u, 0x807fffffu, 0x00800000u, 0x477fe000u, 0x477fefffu,
        0x477ff000u, 0x33000000u, 0x33000001u, 0x387fc000u})
    s.push_back(u);
  return s;
}

} // namespace

TEST(CudaFloat16Test, FloatToBf16) {
  size_t n = 0;
  for (uint32_t u : floatSamples()) {
    float f = floatOf(u);
    uint16_t got = __bfloat16_as_ushort(__float2bfloat16(f));
    ASSERT_EQ(got, ruleBf16(u)) << std::hex << "float bits 0x" << u;
    ASSERT_EQ(got, arithBf16(f)) << std::hex << "float bits 0x" << u;
    ASSERT_EQ(__bfloat16_as_ushort(__float2bfloat16_rn(f)), got);
    ASSERT_EQ(__nv_bfloat16(f).__x, got);
    uint16_t rz = (u & 0x7fffffffu) > 0x7f800000u ? 0x7fff : u >> 16;
    ASSERT_EQ(__bfloat16_as_ushort(__float2bfloat16_rz(f)), rz);
#ifdef MTC_HAVE_CUDA_TOOLKIT_HEADERS
    ASSERT_EQ(got, mtc::emu::toolkit::floatToBf16(f)) << std::hex << u;
    ASSERT_EQ(got, mtc::emu::toolkit::floatToBf16Rn(f)) << std::hex << u;
    ASSERT_EQ(rz, mtc::emu::toolkit::floatToBf16Rz(f)) << std::hex << u;
#endif
    ++n;
  }
  EXPECT_GT(n, 1400000u);
}

/// Every one of the 2^32 float bit patterns (about 25 s of CPU under the
/// sanitizers, so not part of the suite; run with
/// --gtest_also_run_disabled_tests --gtest_filter=*AllPatterns).
TEST(CudaFloat16Test, DISABLED_FloatToBf16AndHalfAllPatterns) {
  uint64_t mismatches = 0;
  for (uint64_t v = 0; v <= 0xffffffffu; ++v) {
    auto u = static_cast<uint32_t>(v);
    float f = floatOf(u);
    uint16_t b = __bfloat16_as_ushort(__float2bfloat16(f));
    mismatches += b != ruleBf16(u);
#ifdef MTC_HAVE_CUDA_TOOLKIT_HEADERS
    mismatches += b != mtc::emu::toolkit::floatToBf16(f);
    mismatches +=
        __half_as_ushort(__float2half(f)) != mtc::emu::toolkit::floatToHalf(f);
#endif
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(CudaFloat16Test, Bf16ToFloatAndBack) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = __bfloat162float(__ushort_as_bfloat16(static_cast<uint16_t>(h)));
    ASSERT_EQ(bitsOf(f), h << 16) << std::hex << h;
    bool nan = (h & 0x7fff) > 0x7f80;
    ASSERT_EQ(__bfloat16_as_ushort(__float2bfloat16(f)), nan ? 0x7fff : h);
#ifdef MTC_HAVE_CUDA_TOOLKIT_HEADERS
    ASSERT_EQ(bitsOf(mtc::emu::toolkit::bf16ToFloat(static_cast<uint16_t>(h))),
              h << 16);
#endif
  }
}

TEST(CudaFloat16Test, DoubleToBf16RoundsOnce) {
  // For consecutive bf16 magnitudes b < c with tie t = (b + c) / 2: just
  // below t rounds to b, just above to c, t itself to the even one. As
  // doubles, t +- 2^-40 t round to t in float: double rounding would be
  // wrong.
  int checked = 0;
  for (uint32_t b = 0; b < 0x7f80; ++b) {
    double lo = __bfloat162float(__ushort_as_bfloat16(b));
    double hi = b + 1 == 0x7f80 ? std::ldexp(1.0, 128)
                                : __bfloat162float(__ushort_as_bfloat16(b + 1));
    double tie = (lo + hi) / 2;
    double eps = std::ldexp(tie, -40);
    uint16_t even = (b & 1) ? b + 1 : b;
    for (double sign : {1.0, -1.0}) {
      uint16_t s = sign < 0 ? 0x8000 : 0;
      struct {
        double value;
        uint16_t want;
      } cases[] = {{tie - eps, static_cast<uint16_t>(s | b)},
                   {tie, static_cast<uint16_t>(s | even)},
                   {tie + eps, static_cast<uint16_t>(s | (b + 1))}};
      for (auto c : cases) {
        double d = sign * c.value;
        ASSERT_EQ(__bfloat16_as_ushort(__double2bfloat16(d)), c.want)
            << std::hexfloat << d;
        ASSERT_EQ(arithBf16(d), c.want) << std::hexfloat << d;
#ifdef MTC_HAVE_CUDA_TOOLKIT_HEADERS
        ASSERT_EQ(mtc::emu::toolkit::doubleToBf16(d), c.want)
            << std::hexfloat << d;
#endif
        ++checked;
      }
    }
  }
  EXPECT_EQ(__bfloat16_as_ushort(__double2bfloat16(NAN)), 0x7fff);
  EXPECT_EQ(__bfloat16_as_ushort(__double2bfloat16(1e300)), 0x7f80);
  EXPECT_EQ(__bfloat16_as_ushort(__double2bfloat16(-1e-300)), 0x8000);
  EXPECT_EQ(checked, 6 * 0x7f80);
}

TEST(CudaFloat16Test, FloatToHalf) {
  std::vector<uint32_t> samples = floatSamples();
  for (uint32_t h = 0; h < 0x7c00; ++h) { // every finite fp16 and midpoint
    float v = arithHalfToFloat(static_cast<uint16_t>(h));
    float next = h + 1 == 0x7c00
                     ? 65536.0f
                     : arithHalfToFloat(static_cast<uint16_t>(h + 1));
    float mid = (v + next) / 2; // exact: fp16 has 11 bits
    for (float f :
         {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      samples.push_back(bitsOf(f));
      samples.push_back(bitsOf(-f));
    }
  }
  for (uint32_t u : samples) {
    float f = floatOf(u);
    uint16_t got = __half_as_ushort(__float2half(f));
    ASSERT_EQ(got, arithHalf(f)) << std::hex << "float bits 0x" << u;
    ASSERT_EQ(__half(f).__x, got);
#ifdef MTC_HAVE_CUDA_TOOLKIT_HEADERS
    ASSERT_EQ(got, mtc::emu::toolkit::floatToHalf(f)) << std::hex << u;
#endif
  }
}

TEST(CudaFloat16Test, HalfToFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float got = __half2float(__ushort_as_half(static_cast<uint16_t>(h)));
    float want = arithHalfToFloat(static_cast<uint16_t>(h));
    ASSERT_EQ(bitsOf(got), bitsOf(want)) << std::hex << h;
#ifdef MTC_HAVE_CUDA_TOOLKIT_HEADERS
    ASSERT_EQ(bitsOf(got),
              bitsOf(mtc::emu::toolkit::halfToFloat(static_cast<uint16_t>(h))))
        << std::hex << h;
#endif
  }
}

TEST(CudaFloat16Test, ArithmeticRoundsOnce) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> pattern(0, 0xffff);
  for (int i = 0; i < 200000; ++i) {
    __nv_bfloat16 a = __ushort_as_bfloat16(static_cast<uint16_t>(pattern(rng)));
    __nv_bfloat16 b = __ushort_as_bfloat16(static_cast<uint16_t>(pattern(rng)));
    double x = __bfloat162float(a), y = __bfloat162float(b);
    // Correctly rounded results: the double result rounded once (double has
    // more than 2 * 8 + 2 bits, so rounding it again is harmless).
    ASSERT_EQ((a + b).__x, arithBf16(x + y)) << x << " + " << y;
    ASSERT_EQ((a - b).__x, arithBf16(x - y)) << x << " - " << y;
    ASSERT_EQ((a * b).__x, arithBf16(x * y)) << x << " * " << y;
    ASSERT_EQ((a / b).__x, arithBf16(x / y)) << x << " / " << y;
    __half p = __ushort_as_half(static_cast<uint16_t>(pattern(rng)));
    __half q = __ushort_as_half(static_cast<uint16_t>(pattern(rng)));
    double s = __half2float(p), t = __half2float(q);
    ASSERT_EQ(__hadd(p, q).__x, arithHalf(s + t)) << s << " + " << t;
    ASSERT_EQ(__hmul(p, q).__x, arithHalf(s * t)) << s << " * " << t;
  }
}

TEST(CudaFloat16Test, PairsAndSizes) {
  static_assert(sizeof(__nv_bfloat16) == 2 && alignof(__nv_bfloat16) == 2, "");
  static_assert(sizeof(__nv_bfloat162) == 4 && alignof(__nv_bfloat162) == 4,
                "");
  static_assert(sizeof(__half2) == 4 && alignof(__half2) == 4, "");
  __nv_bfloat162 v = __floats2bfloat162_rn(1.0f, -2.5f);
  EXPECT_EQ(__low2float(v), 1.0f);
  EXPECT_EQ(__high2float(v), -2.5f);
  float2 f = __bfloat1622float2(__float22bfloat162_rn(make_float2(3, 4)));
  EXPECT_EQ(f.x, 3.0f);
  EXPECT_EQ(f.y, 4.0f);
  __half2 h = __floats2half2_rn(0.5f, 65504.0f);
  EXPECT_EQ(__high2float(h), 65504.0f);
  EXPECT_EQ(__half2float(__float2half(70000.0f)), INFINITY);
}
