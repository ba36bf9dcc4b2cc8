//===- Status.h - Errors as values ------------------------------*- C++ -*-===//
//
// Part of mtc. `Status` is either ok or an error carrying a user-facing message
// (lowercase, names the file and the object concerned, no trailing period).
// `Expected<T>` is a T or an error Status. Neither throws; both are cheap to
// move. Pure C++ (no LLVM), header-only.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_STATUS_H
#define MTC_LIB_SUPPORT_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace mtc {

class [[nodiscard]] Status {
public:
  /// The ok status.
  Status() = default;
  static Status success() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed = true;
    s.msg = std::move(message);
    return s;
  }

  bool ok() const { return !failed; }
  explicit operator bool() const { return ok(); }
  /// Empty when ok().
  const std::string &message() const { return msg; }

  /// Returns a copy whose message is "prefix: message" (no-op when ok()).
  Status withPrefix(const std::string &prefix) const {
    if (ok())
      return *this;
    return error(prefix + ": " + msg);
  }

private:
  bool failed = false;
  std::string msg;
};

template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : val(std::move(value)) {}
  /// \p error must not be ok().
  Expected(Status error) : st(std::move(error)) {
    assert(!st.ok() && "Expected constructed from an ok Status");
  }

  bool ok() const { return val.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status &status() const { return st; }
  const std::string &message() const { return st.message(); }

  T &value() & {
    assert(ok());
    return *val;
  }
  const T &value() const & {
    assert(ok());
    return *val;
  }
  T &&value() && {
    assert(ok());
    return std::move(*val);
  }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }

private:
  std::optional<T> val;
  Status st;
};

} // namespace mtc

#endif // MTC_LIB_SUPPORT_STATUS_H
