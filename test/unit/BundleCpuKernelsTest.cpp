//===- BundleCpuKernelsTest.cpp - The bundle's cpu_kernels field ----------===//
//
// Part of mtc. Base64 and the validation of "cpu_kernels" on read (the
// compiled kernels themselves are tested in test/unit-compiler).
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Bundle.h"

#include <gtest/gtest.h>

using namespace mtc::bundle;

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

std::string withKernels(const std::string &field) {
  return R"({"format": "mtc-bundle", "version": 1, "model": "M", "config": {},
  "params": [], "layers": [], "functions": {}, "cpu_kernels": )" +
         field + "}";
}

} // namespace

TEST(BundleCpuKernels, RoundTrip) {
  Bundle b;
  b.model = "M";
  b.cpuKernels = std::string("\177ELF\0\1\2", 7);
  b.cpuKernelsTarget = "znver4";
  Bundle back;
  std::string err;
  ASSERT_TRUE(fromJson(toJson(b), back, err)) << err;
  EXPECT_EQ(back.cpuKernels, b.cpuKernels);
  EXPECT_EQ(back.cpuKernelsTarget, "znver4");
  // Absent when there are none.
  b.cpuKernels.clear();
  EXPECT_EQ(toJson(b).find("cpu_kernels"), std::string::npos);
}

TEST(BundleCpuKernels, Errors) {
  Bundle b;
  std::string err;
  EXPECT_FALSE(fromJson(withKernels(R"({"format": "pe", "target": "x",
      "data": "f0VMRg=="})"),
                        b, err));
  EXPECT_NE(err.find("cpu_kernels: unsupported format 'pe'"), std::string::npos)
      << err;
  EXPECT_FALSE(fromJson(withKernels(R"({"format": "elf-shared-object",
      "target": "x", "data": "not base64"})"),
                        b, err));
  EXPECT_NE(err.find("'data' is not valid base64"), std::string::npos) << err;
  EXPECT_FALSE(fromJson(withKernels(R"({"format": "elf-shared-object",
      "target": "x", "data": "Zm9vYmFy"})"),
                        b, err));
  EXPECT_NE(err.find("'data' is not an ELF file"), std::string::npos) << err;
  ASSERT_TRUE(fromJson(withKernels(R"({"format": "elf-shared-object",
      "target": "x", "data": "f0VMRg=="})"),
                       b, err))
      << err;
  EXPECT_EQ(b.cpuKernels, "\177ELF");
}
