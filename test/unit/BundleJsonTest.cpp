//===- BundleJsonTest.cpp - Reading hostile .mtb JSON -----------*- C++ -*-===//
//
// Part of mtc. Regression tests for inputs found while fuzzing bundle::fromJson
// (test/fuzz/BundleFuzzer.cpp): every one must end in an error message.
//
//===----------------------------------------------------------------------===//

#include "lib/Bundle/Bundle.h"

#include <gtest/gtest.h>

using namespace mtc::bundle;
using mtc::Expected;

namespace {
std::string header(const std::string &version) {
  return "{\"format\": \"mtc-bundle\", \"version\": " + version +
         ", \"model\": \"m\", \"config\": {}, \"params\": [], \"layers\": [], "
         "\"functions\": {}}";
}
} // namespace

TEST(BundleJson, MinimalBundleRoundTrips) {
  Expected<Bundle> b = fromJson(header("1"));
  ASSERT_TRUE(b.ok()) << b.message();
  Expected<Bundle> again = fromJson(toJson(*b));
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(toJson(*again), toJson(*b));
}

// The version was read with get<int>(), which truncated 2^32 + 1 to 1.
TEST(BundleJson, VersionIsNotTruncated) {
  Expected<Bundle> b = fromJson(header("4294967297"));
  EXPECT_FALSE(b.ok());
  const std::string &err = b.message();
  EXPECT_NE(err.find("unsupported bundle version 4294967297"),
            std::string::npos)
      << err;
}

// A number past a double's range is an error with its place (mtc::parseJson),
// not nlohmann's exception text.
TEST(BundleJson, NumberBeyondADoubleIsAnErrorWithItsPlace) {
  Expected<Bundle> b = fromJson(header("1e999"));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.message(), "bundle: line 1, column 37: number 1e999 is out of "
                         "the range of a double");
  b = fromJson("{\"format\": \"mtc-bundle\",\n \"x\": -1e400}");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.message(), "bundle: line 2, column 7: number -1e400 is out of "
                         "the range of a double");
}

// Error messages quoted values with json::dump, which recurses once per level:
// a value nested a million arrays deep overflowed the stack.
TEST(BundleJson, DeeplyNestedValueIsAnErrorNotACrash) {
  const size_t depth = 1000000;
  std::string deep = std::string(depth, '[') + std::string(depth, ']');
  Expected<Bundle> b = fromJson(header(deep));
  EXPECT_FALSE(b.ok());
  const std::string &err = b.message();
  EXPECT_NE(err.find("unsupported bundle version [[[["), std::string::npos)
      << err.substr(0, 200);
  EXPECT_LT(err.size(), 200u);
}

namespace {

/// A minimal valid bundle with one parameter of the given JSON shape.
std::string bundleWithShape(const std::string &shape) {
  return R"({"format": "mtc-bundle", "version": 1, "model": "M", "config": {},
    "params": [{"name": "w", "shape": )" +
         shape + R"(, "dtype": "f32", "init": "zeros", "init_args": []}],
    "layers": [], "functions": {}})";
}

TEST(BundleJson, RejectsShapesWhoseElementCountOverflows) {
  Expected<Bundle> b = fromJson(bundleWithShape("[4, 8]"));
  EXPECT_TRUE(b.ok()) << b.message();
  b = fromJson(bundleWithShape("[2147483647, 2147483647, 2147483647]"));
  EXPECT_FALSE(b.ok());
  EXPECT_NE(b.message().find("too many elements"), std::string::npos)
      << b.message();
  b = fromJson(bundleWithShape("[4294967296]"));
  EXPECT_FALSE(b.ok());
  EXPECT_NE(b.message().find("invalid dimension"), std::string::npos)
      << b.message();
}

TEST(BundleJson, RejectsIntegerAttributesBeyond64Bits) {
  std::string text = R"({"format": "mtc-bundle", "version": 1, "model": "M",
    "config": {}, "params": [], "layers": [], "functions": {"forward": {
      "args": [], "results": [], "values": [{"shape": [], "dtype": "f32"}],
      "ops": [{"op": "constant", "operands": [], "results": [0],
               "attrs": {"value": 18446744073709551615}}]}}})";
  Expected<Bundle> b = fromJson(text);
  EXPECT_FALSE(b.ok());
  EXPECT_NE(b.message().find("does not fit in 64 bits"), std::string::npos)
      << b.message();
}

} // namespace

namespace {
/// bundleWithShape("[4, 8]") with an "hf_names" member.
std::string bundleWithHFNames(const std::string &names) {
  std::string s = bundleWithShape("[4, 8]");
  return s.substr(0, s.rfind('}')) + ", \"hf_names\": " + names + "}";
}
} // namespace

TEST(BundleJson, HFNamesRoundTripAndAreValidated) {
  Expected<Bundle> b = fromJson(bundleWithHFNames(
      R"({"w": {"tensor": "lm_head.weight", "transpose": true}})"));
  ASSERT_TRUE(b.ok()) << b.message();
  ASSERT_EQ(b->hfNames.size(), 1u);
  EXPECT_EQ(b->hfNames.at("w").tensor, "lm_head.weight");
  EXPECT_TRUE(b->hfNames.at("w").transpose);
  Expected<Bundle> again = fromJson(toJson(*b));
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->hfNames.at("w").tensor, "lm_head.weight");
  EXPECT_EQ(toJson(*again), toJson(*b));

  auto errorOf = [](const std::string &text) {
    Expected<Bundle> r = fromJson(text);
    EXPECT_FALSE(r.ok());
    return r.message();
  };
  std::string err = errorOf(
      bundleWithHFNames(R"({"v": {"tensor": "x", "transpose": false}})"));
  EXPECT_NE(err.find("'v': is not a parameter instance"), std::string::npos)
      << err;
  err = errorOf(bundleWithHFNames(R"({"w": {"tensor": "x", "transpose": 1}})"));
  EXPECT_NE(err.find("'transpose' must be true or false"), std::string::npos)
      << err;
  err = errorOf(bundleWithHFNames("[]"));
  EXPECT_NE(err.find("hf_names: must be an object"), std::string::npos) << err;
}
