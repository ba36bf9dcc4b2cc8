//===- Must.h - Test helpers for Status and Expected results ----*- C++ -*-===//
//
// Part of mtc. must() unwraps a call the test expects to succeed: its error
// ends the test (an exception gtest reports as a failure, with the message).
// errorOf() is the message of a call the test expects to fail. Both take a
// Status or an Expected (found by argument-dependent lookup in namespace
// mtc).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TEST_UNIT_MUST_H
#define MTC_TEST_UNIT_MUST_H

#include "lib/Support/Status.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace mtc {

inline void must(const Status &st) {
  if (!st.ok())
    throw std::runtime_error(st.message());
}

template <typename T> T must(Expected<T> e) {
  if (!e.ok())
    throw std::runtime_error(e.message());
  return std::move(e).value();
}

/// The error message of \p call's result ("" when it succeeded, "(empty
/// message)" for an error without one).
template <typename F> std::string errorOf(F &&call) {
  auto r = call();
  if (r.ok())
    return "";
  return r.message().empty() ? "(empty message)" : r.message();
}

} // namespace mtc

#endif // MTC_TEST_UNIT_MUST_H
