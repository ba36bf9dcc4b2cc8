//===- CommandLineTest.cpp - The flag parser of mtc and mtc-run -*- C++ -*-===//
//
// Part of mtc. runtime/driver/CommandLine: integers read whole and bounded
// (a value past 64 bits or past the flag's bound is refused naming the flag
// and the bound, never wrapped), seeds over the whole uint64_t range, and
// the tokens-per-step product.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/CommandLine.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace mtc;
using namespace mtc::driver;

namespace {

struct Parsed {
  int64_t threads = 0;
  uint64_t seed = 1;
  double lr = 0;
};

/// parseFlags of "train" with --threads (0..1024), --seed (every uint64_t)
/// and --lr (>= 0) over \p args; the error message, or "" on success.
std::string parse(const std::vector<std::string> &args, Parsed &out) {
  std::vector<std::string> pos;
  Status st = parseFlags("train", args,
                         {{Flag::Int, "--threads", &out.threads, 0, 1024},
                          {Flag::Uint, "--seed", &out.seed, 0},
                          {Flag::Double, "--lr", &out.lr, 0}},
                         pos);
  return st.ok() ? "" : st.message();
}

std::string parse(const std::vector<std::string> &args) {
  Parsed p;
  return parse(args, p);
}

} // namespace

// --threads 2147483648 was accepted and then cast to int (negative: the
// default); a bound refuses it, and every value past 64 bits.
TEST(CommandLine, IntegersAreBoundedNeverWrapped) {
  Parsed p;
  EXPECT_EQ(parse({"--threads", "1024"}, p), "");
  EXPECT_EQ(p.threads, 1024);
  EXPECT_EQ(parse({"--threads=0"}, p), "");
  EXPECT_EQ(p.threads, 0);
  const std::string bound =
      "train: --threads expects an integer from 0 to 1024, got '";
  for (const char *bad : {"2147483648", "1025", "-1", "99999999999999999999",
                          "4294967297", "9223372036854775808", "", " 4", "4 ",
                          "+4", "0x10", "1e3", "4.0", "--", "-", "ten"})
    EXPECT_EQ(parse({"--threads", bad}), bound + bad + "'") << bad;
}

// A seed takes every uint64_t; 18446744073709551615 was refused (read as a
// signed integer).
TEST(CommandLine, SeedsTakeTheWholeUint64Range) {
  Parsed p;
  EXPECT_EQ(parse({"--seed", "18446744073709551615"}, p), "");
  EXPECT_EQ(p.seed, UINT64_MAX);
  EXPECT_EQ(parse({"--seed", "9223372036854775808"}, p), "");
  EXPECT_EQ(p.seed, uint64_t(1) << 63);
  EXPECT_EQ(parse({"--seed", "0"}, p), "");
  EXPECT_EQ(p.seed, 0u);
  const std::string bound = "train: --seed expects an integer from 0 to "
                            "18446744073709551615, got '";
  for (const char *bad : {"18446744073709551616", "-1", "-0", "+1", " 1", ""})
    EXPECT_EQ(parse({"--seed", bad}), bound + bad + "'") << bad;
}

TEST(CommandLine, DoublesStayFiniteAndBounded) {
  Parsed p;
  EXPECT_EQ(parse({"--lr", "2e-3"}, p), "");
  EXPECT_DOUBLE_EQ(p.lr, 2e-3);
  for (const char *bad : {"inf", "nan", "1e400", "-1"})
    EXPECT_NE(parse({"--lr", bad})
                  .find("train: --lr expects a finite number "
                        ">= 0"),
              std::string::npos)
        << bad;
  double x = 0;
  std::vector<std::string> pos;
  Status st =
      parseFlags("t", {"--x", "2.5"}, {{Flag::Double, "--x", &x, 0, 2}}, pos);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "t: --x expects a finite number >= 0.000000 and <= "
                          "2.000000, got '2.5'");
}

// --batch x --seq (x --micro-batches) = 2^62 was accepted by plan and
// simulate; the product is bounded, and never overflows on its way.
TEST(CommandLine, TokensPerStepAreBounded) {
  EXPECT_TRUE(checkStepTokens("plan", 1024, 4096, 1024).ok());
  EXPECT_TRUE(checkStepTokens("plan", 1, limits::kStepTokens, 1).ok());
  Status st = checkStepTokens("plan", 65536, 65536, 2);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "plan: --batch 65536 x --seq 65536 x "
                          "--micro-batches 2 = 8589934592 tokens per step, "
                          "more than the limit of 4294967296 (2^32)");
  st = checkStepTokens("train", int64_t(1) << 31, int64_t(1) << 31, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "train: --batch 2147483648 x --seq 2147483648 = "
                          "4611686018427387904 tokens per step, more than the "
                          "limit of 4294967296 (2^32)");
  st = checkStepTokens("train", int64_t(1) << 40, int64_t(1) << 40, 4);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("= more than 2^63 tokens per step"),
            std::string::npos)
      << st.message();
}

// The flag bounds keep the planner's products within 64 bits.
TEST(CommandLine, FlagLimitsMultiplyWithinSixtyFourBits) {
  int64_t r = 0;
  EXPECT_FALSE(__builtin_mul_overflow(limits::kBatch, limits::kSeq, &r));
  EXPECT_FALSE(__builtin_mul_overflow(r, limits::kMicroBatches, &r));
  EXPECT_LE(limits::kStepTokens, r);
}
