//===- BundleJsonTest.cpp - Reading hostile .mtb JSON -----------*- C++ -*-===//
//
// Part of mtc. Regression tests for inputs found while fuzzing bundle::fromJson
// (test/fuzz/BundleFuzzer.cpp): every one must end in an error message.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Bundle.h"

#include <gtest/gtest.h>

using namespace mtc::bundle;

namespace {
std::string header(const std::string &version) {
  return "{\"format\": \"mtc-bundle\", \"version\": " + version +
         ", \"model\": \"m\", \"config\": {}, \"params\": [], \"layers\": [], "
         "\"functions\": {}}";
}
} // namespace

TEST(BundleJson, MinimalBundleRoundTrips) {
  Bundle b;
  std::string err;
  ASSERT_TRUE(fromJson(header("1"), b, err)) << err;
  Bundle again;
  ASSERT_TRUE(fromJson(toJson(b), again, err)) << err;
  EXPECT_EQ(toJson(again), toJson(b));
}

// The version was read with get<int>(), which truncated 2^32 + 1 to 1.
TEST(BundleJson, VersionIsNotTruncated) {
  Bundle b;
  std::string err;
  EXPECT_FALSE(fromJson(header("4294967297"), b, err));
  EXPECT_NE(err.find("unsupported bundle version 4294967297"),
            std::string::npos)
      << err;
}

// Error messages quoted values with json::dump, which recurses once per level:
// a value nested a million arrays deep overflowed the stack.
TEST(BundleJson, DeeplyNestedValueIsAnErrorNotACrash) {
  const size_t depth = 1000000;
  std::string deep = std::string(depth, '[') + std::string(depth, ']');
  Bundle b;
  std::string err;
  EXPECT_FALSE(fromJson(header(deep), b, err));
  EXPECT_NE(err.find("unsupported bundle version [[[["), std::string::npos)
      << err.substr(0, 200);
  EXPECT_LT(err.size(), 200u);
}
