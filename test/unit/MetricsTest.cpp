//===- MetricsTest.cpp - Unit tests of runtime/train/Metrics --------------===//
//
// Part of mtc. Number, duration and progress formatting; JSONL output; the
// non-TTY reporter. The live TTY line is not tested.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

using namespace mtc;
using namespace mtc::train;

namespace {

TEST(Format, Duration) {
  EXPECT_EQ(formatDuration(0), "0s");
  EXPECT_EQ(formatDuration(45.4), "45s");
  EXPECT_EQ(formatDuration(59.6), "1m00s");
  EXPECT_EQ(formatDuration(72), "1m12s");
  EXPECT_EQ(formatDuration(3599), "59m59s");
  EXPECT_EQ(formatDuration(3600 * 2 + 180), "2h03m");
  EXPECT_EQ(formatDuration(86400 * 3 + 3600 * 4 + 5), "3d04h");
  EXPECT_EQ(formatDuration(-1), "--");
  EXPECT_EQ(formatDuration(NAN), "--");
  EXPECT_EQ(formatDuration(INFINITY), "--");
}

TEST(Format, Count) {
  EXPECT_EQ(formatCount(0), "0");
  EXPECT_EQ(formatCount(950), "950");
  EXPECT_EQ(formatCount(999.4), "999");
  EXPECT_EQ(formatCount(999.6), "1.00k");
  EXPECT_EQ(formatCount(1234), "1.23k");
  EXPECT_EQ(formatCount(12345), "12.3k");
  EXPECT_EQ(formatCount(123456), "123k");
  EXPECT_EQ(formatCount(999999), "1.00M");
  EXPECT_EQ(formatCount(4.56e6), "4.56M");
  EXPECT_EQ(formatCount(1.2e9), "1.20G");
  EXPECT_EQ(formatCount(NAN), "--");
}

TEST(Format, LrAndProgress) {
  EXPECT_EQ(formatLr(3e-4), "3.0e-04");
  EXPECT_EQ(formatLr(0), "0.0e+00");
  ProgressInfo p;
  p.step = 120;
  p.totalSteps = 500;
  p.loss = 2.34561;
  p.lr = 3e-4;
  p.tokensPerSecond = 12345;
  p.etaSeconds = 72;
  EXPECT_EQ(
      formatProgress(p),
      "step 120/500 | loss 2.3456 | lr 3.0e-04 | 12.3k tok/s | ETA 1m12s");
  p.loss = NAN;
  p.etaSeconds = -1;
  EXPECT_EQ(formatProgress(p),
            "step 120/500 | loss nan | lr 3.0e-04 | 12.3k tok/s | ETA --");
}

TEST(Json, NumbersRoundTrip) {
  EXPECT_EQ(formatJsonNumber(0.1), "0.1");
  EXPECT_EQ(formatJsonNumber(3.0), "3");
  EXPECT_EQ(formatJsonNumber(1e-5), "1e-05");
  EXPECT_EQ(formatJsonNumber(NAN), "null");
  EXPECT_EQ(formatJsonNumber(-INFINITY), "null");
  for (double d : {2.3456789012345678, 1.0 / 3.0, 6.02214076e23, 5e-324,
                   static_cast<double>(2.3456f)}) {
    std::string s = formatJsonNumber(d);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), d) << s;
  }
}

TEST(Json, Lines) {
  EXPECT_EQ(formatJsonLine({{"step", 12},
                            {"loss", 2.5},
                            {"tag", "a\"b\n"},
                            {"ok", true},
                            {"tokens", 1234567890123ull}}),
            R"({"step": 12, "loss": 2.5, "tag": "a\"b\n", "ok": true, )"
            R"("tokens": 1234567890123})");
  EXPECT_EQ(jsonQuote(std::string("\x01", 1)), "\"\\u0001\"");
}

TEST(Jsonl, WritesOneFlushedLinePerCall) {
  std::string path = ::testing::TempDir() + "/mtc-metrics-" +
                     std::to_string(::getpid()) + ".jsonl";
  {
    Expected<JsonlWriter> w = JsonlWriter::open(path);
    ASSERT_TRUE(w.ok()) << w.message();
    ASSERT_TRUE(w->write({{"step", 1}, {"loss", 3.25f}}).ok());
    // Flushed: readable before the writer closes.
    std::ifstream in(path);
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    EXPECT_EQ(line, R"({"step": 1, "loss": 3.25})");
  }
  {
    Expected<JsonlWriter> w = JsonlWriter::open(path, /*append=*/true);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->write({{"step", 2}}).ok());
  }
  std::ifstream in(path);
  std::string a, b;
  std::getline(in, a);
  std::getline(in, b);
  EXPECT_EQ(b, R"({"step": 2})");
  Expected<JsonlWriter> bad = JsonlWriter::open("/nonexistent-dir/m.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("/nonexistent-dir/m.jsonl: cannot create: "
                               "directory '/nonexistent-dir'"),
            std::string::npos)
      << bad.message();
}

TEST(ProgressReporter, PlainLinesWhenNotATty) {
  std::string path = ::testing::TempDir() + "/mtc-progress-" +
                     std::to_string(::getpid()) + ".txt";
  FILE *f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  {
    ProgressReporter r(25, f, 10);
    EXPECT_FALSE(r.isTty());
    for (int64_t s = 1; s <= 25; ++s)
      r.updateAt(s, 2.0, 1e-3, 1000, static_cast<double>(s)); // 1 step/s
    r.finish();
    EXPECT_EQ(r.lastLine(),
              "step 25/25 | loss 2.0000 | lr 1.0e-03 | 1.00k tok/s | ETA 0s");
  }
  std::fclose(f);
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  ASSERT_EQ(lines.size(), 3u); // steps 10, 20, 25
  EXPECT_EQ(lines[0],
            "step 10/25 | loss 2.0000 | lr 1.0e-03 | 1.00k tok/s | ETA 15s");
  EXPECT_EQ(lines[1].substr(0, 10), "step 20/25");
}

} // namespace
