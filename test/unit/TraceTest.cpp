//===- TraceTest.cpp - Unit tests of runtime/device/Trace -----------------===//
//
// Part of mtc. The Chrome trace writer: escaping, the span limit, write
// errors. Device spans are tested by the device conformance suite
// (DeviceConformanceTest.cpp, TraceHasOneEventPerCommand).
//
//===----------------------------------------------------------------------===//

#include "runtime/device/Trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

using namespace mtc::device;
using mtc::Status;

namespace {

TEST(Trace, EscapesAndLimits) {
  Trace trace(2);
  auto t = Trace::Clock::now();
  trace.span("a \"quoted\"\ttrack", "line\nbreak \\ \x01", t, t);
  trace.span("a", "2", t, t);
  trace.span("a", "3", t, t);
  EXPECT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace.dropped(), 1u);
  nlohmann::json j = nlohmann::json::parse(trace.json());
  bool found = false;
  for (const auto &ev : j.at("traceEvents"))
    if (ev.at("ph") == "X" && ev.at("name") == "line\nbreak \\ \x01")
      found = true;
  EXPECT_TRUE(found);
  trace.clear();
  EXPECT_EQ(trace.size(), 0u);
}

TEST(Trace, WriteFailureNamesThePath) {
  Trace trace;
  auto t = Trace::Clock::now();
  trace.span("a", "1", t, t);
  Status st = trace.write("/nonexistent-dir/x/trace.json");
  EXPECT_FALSE(st.ok());
  const std::string &err = st.message();
  EXPECT_NE(err.find("/nonexistent-dir/x/trace.json"), std::string::npos)
      << err;
}

} // namespace
