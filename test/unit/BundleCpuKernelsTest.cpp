//===- BundleCpuKernelsTest.cpp - The bundle's cpu_kernels field ----------===//
//
// Part of mtc. Base64 and the validation of "cpu_kernels" on read (the
// compiled kernels themselves are tested in test/unit-compiler).
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Bundle.h"
#include "lib/Support/Hash.h"

#include <gtest/gtest.h>

using namespace mtc::bundle;
using mtc::Expected;

TEST(Base64, RoundTripsEveryLengthAndByte) {
  std::string bytes;
  for (int i = 0; i < 300; ++i)
    bytes += static_cast<char>(i * 37 + 11);
  for (size_t len = 0; len < 8; ++len) {
    std::string in = bytes.substr(0, len), out;
    std::string text = base64Encode(in);
    EXPECT_EQ(text.size() % 4, 0u);
    ASSERT_TRUE(base64Decode(text, out)) << text;
    EXPECT_EQ(out, in);
  }
  std::string out;
  ASSERT_TRUE(base64Decode(base64Encode(bytes), out));
  EXPECT_EQ(out, bytes);
  EXPECT_EQ(base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64Encode("fo"), "Zm8=");
}

TEST(Base64, RejectsMalformedText) {
  std::string out;
  EXPECT_FALSE(base64Decode("Zm9", out));      // length
  EXPECT_FALSE(base64Decode("Zm9v!mFy", out)); // alphabet
  EXPECT_FALSE(base64Decode("Zm=vYmFy", out)); // padding inside
}

namespace {

/// A bundle whose "cpu_kernels" has this format, base64 data and checksum
/// (by default the checksum of the decoded data). It has no fused ops:
/// fused_xxh64 is the XXH64 of nothing.
std::string withKernels(const std::string &format, const std::string &data,
                        std::string sum = "") {
  std::string bytes;
  if (sum.empty())
    sum = base64Decode(data, bytes)
              ? mtc::hex64(mtc::xxh64(bytes.data(), bytes.size()))
              : "0000000000000000";
  return R"({"format": "mtc-bundle", "version": 1, "model": "M", "config": {},
  "params": [], "layers": [], "functions": {}, "cpu_kernels": {"format": ")" +
         format + R"(", "target": "x", "xxh64": ")" + sum +
         R"(", "fused_xxh64": "ef46db3751d8e999", "data": ")" + data + R"("}})";
}

/// The error of reading \p text (empty, and a test failure, if it reads).
std::string readError(const std::string &text) {
  Expected<Bundle> b = fromJson(text);
  EXPECT_FALSE(b.ok()) << "the bundle was accepted";
  return b.message();
}

} // namespace

TEST(BundleCpuKernels, RoundTrip) {
  Bundle b;
  b.model = "M";
  b.cpuKernels = std::string("\177ELF\0\1\2", 7);
  b.cpuKernelsTarget = "znver4";
  Expected<Bundle> back = fromJson(toJson(b));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->cpuKernels, b.cpuKernels);
  EXPECT_EQ(back->cpuKernelsTarget, "znver4");
  // The writer records the checksum of the bytes.
  EXPECT_NE(toJson(b).find(mtc::hex64(mtc::xxh64(b.cpuKernels.data(), 7))),
            std::string::npos);
  // Absent when there are none.
  b.cpuKernels.clear();
  EXPECT_EQ(toJson(b).find("cpu_kernels"), std::string::npos);
}

TEST(BundleCpuKernels, Errors) {
  std::string err = readError(withKernels("pe", "f0VMRg=="));
  EXPECT_NE(err.find("cpu_kernels: unsupported format 'pe'"), std::string::npos)
      << err;
  err = readError(withKernels("elf-shared-object", "not base64"));
  EXPECT_NE(err.find("'data' is not valid base64"), std::string::npos) << err;
  err = readError(withKernels("elf-shared-object", "Zm9vYmFy"));
  EXPECT_NE(err.find("'data' is not an ELF file"), std::string::npos) << err;
  Expected<Bundle> b = fromJson(withKernels("elf-shared-object", "f0VMRg=="));
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->cpuKernels, "\177ELF");
}

// Damaged kernel bytes would run (and crash) in the trainer; their checksum
// no longer matches the one the compiler recorded.
TEST(BundleCpuKernels, ChecksumMismatchIsRefused) {
  std::string sum = mtc::hex64(mtc::xxh64("\177ELF", 4));
  Expected<Bundle> b =
      fromJson(withKernels("elf-shared-object", "f0VMRg==", sum));
  ASSERT_TRUE(b.ok()) << b.message();
  std::string err;
  // "\177ELG": one bit flipped.
  err = readError(withKernels("elf-shared-object", "f0VMRw==", sum));
  EXPECT_NE(err.find("bundle: cpu_kernels: checksum mismatch: the kernels "
                     "hash to xxh64 "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("the bundle records " + sum), std::string::npos) << err;
  err = readError(withKernels("elf-shared-object", "f0VMRg==", "12"));
  EXPECT_NE(err.find("'xxh64' must be 16 hex digits"), std::string::npos)
      << err;
  std::string noSum = withKernels("elf-shared-object", "f0VMRg==");
  noSum.erase(noSum.find("\"xxh64\""), 29);
  err = readError(noSum);
  EXPECT_NE(err.find("cpu_kernels: missing field 'xxh64'"), std::string::npos)
      << err;
}

// A kernel trusts the shapes of the fused body it was compiled from; the
// bundle records a checksum of those bodies (and the kernels' names).
TEST(BundleCpuKernels, FusedOpsChecksum) {
  Bundle b;
  b.model = "M";
  b.cpuKernels = "\177ELF";
  std::string text = toJson(b);
  EXPECT_NE(text.find("\"fused_xxh64\": \"ef46db3751d8e999\""),
            std::string::npos)
      << text;
  size_t at = text.find("ef46db3751d8e999");
  text.replace(at, 16, "ef46db3751d8e998");
  std::string err = readError(text);
  EXPECT_NE(err.find("cpu_kernels: checksum mismatch: the fused ops that name "
                     "compiled kernels hash to xxh64 ef46db3751d8e999, the "
                     "bundle records ef46db3751d8e998"),
            std::string::npos)
      << err;
}
