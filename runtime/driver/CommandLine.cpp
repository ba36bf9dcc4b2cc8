//===- CommandLine.cpp - Flags of the mtc commands --------------*- C++ -*-===//
//
// Part of mtc. See CommandLine.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/CommandLine.h"

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace mtc::driver {

namespace {

/// A bound of an integer flag as digits (kNoMax: the type's largest).
std::string boundText(const Flag &flag, double bound) {
  if (std::isinf(bound))
    return flag.kind == Flag::Uint
               ? std::to_string(std::numeric_limits<uint64_t>::max())
               : std::to_string(std::numeric_limits<int64_t>::max());
  return std::to_string(static_cast<long long>(bound));
}

/// Parses \p value for the Int or Uint \p flag into its target: decimal
/// digits only (a '-' first for Int), no blanks or '+', no value past the
/// type's range or the flag's [min, max].
Status parseInteger(const Flag &flag, const std::string &value,
                    const std::string &bad) {
  auto refuse = [&] {
    return Status::error(bad + "an integer from " + boundText(flag, flag.min) +
                         " to " + boundText(flag, flag.max) + ", got '" +
                         value + "'");
  };
  const bool isInt = flag.kind == Flag::Int;
  size_t first = isInt && !value.empty() && value[0] == '-' ? 1 : 0;
  if (value.size() == first)
    return refuse();
  for (size_t i = first; i < value.size(); ++i)
    if (value[i] < '0' || value[i] > '9')
      return refuse();
  errno = 0;
  if (isInt) {
    long long v = std::strtoll(value.c_str(), nullptr, 10);
    if (errno == ERANGE || static_cast<double>(v) < flag.min ||
        static_cast<double>(v) > flag.max)
      return refuse();
    *static_cast<int64_t *>(flag.target) = v;
    return Status::success();
  }
  unsigned long long v = std::strtoull(value.c_str(), nullptr, 10);
  if (errno == ERANGE || static_cast<double>(v) < flag.min ||
      (!std::isinf(flag.max) && static_cast<double>(v) > flag.max))
    return refuse();
  *static_cast<uint64_t *>(flag.target) = v;
  return Status::success();
}

} // namespace

Status parseFlags(const char *command, const std::vector<std::string> &args,
                  const std::vector<Flag> &flags,
                  std::vector<std::string> &positional,
                  std::set<std::string> *given) {
  const std::string cmd = command;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], value;
    bool hasValue = false;
    if (a.rfind("--", 0) == 0) {
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        hasValue = true;
      }
    }
    if (a.empty() || a[0] != '-' || a == "-") {
      positional.push_back(a);
      continue;
    }
    const Flag *flag = nullptr;
    for (const Flag &f : flags)
      if (a == f.name)
        flag = &f;
    if (!flag)
      return Status::error(cmd + ": unknown option '" + a + "'");
    if (!hasValue) {
      if (i + 1 >= args.size())
        return Status::error(cmd + ": " + a + " needs a value");
      value = args[++i];
    }
    if (given)
      given->insert(flag->name);
    std::string bad = cmd + ": " + a + " expects ";
    switch (flag->kind) {
    case Flag::Int:
    case Flag::Uint:
      if (Status st = parseInteger(*flag, value, bad); !st.ok())
        return st;
      break;
    case Flag::Double: {
      char *end = nullptr;
      errno = 0;
      double v = std::strtod(value.c_str(), &end);
      if (errno || end == value.c_str() || *end != '\0' || !(v >= flag->min) ||
          !(v <= flag->max) || !std::isfinite(v))
        return Status::error(
            bad + "a finite number >= " + std::to_string(flag->min) +
            (std::isinf(flag->max) ? ""
                                   : " and <= " + std::to_string(flag->max)) +
            ", got '" + value + "'");
      *static_cast<double *>(flag->target) = v;
      break;
    }
    case Flag::String:
      if (value.empty())
        return Status::error(cmd + ": " + a + " needs a value, got ''");
      *static_cast<std::string *>(flag->target) = value;
      break;
    case Flag::Text:
      *static_cast<std::string *>(flag->target) = value;
      break;
    case Flag::List:
      static_cast<std::vector<std::string> *>(flag->target)->push_back(value);
      break;
    }
  }
  return Status::success();
}

Status checkStepTokens(const char *command, int64_t batch, int64_t seq,
                       int64_t microBatches) {
  int64_t tokens = 0;
  bool overflow = __builtin_mul_overflow(batch, seq, &tokens) ||
                  __builtin_mul_overflow(tokens, microBatches, &tokens);
  if (!overflow && tokens <= limits::kStepTokens)
    return Status::success();
  std::string product =
      "--batch " + std::to_string(batch) + " x --seq " + std::to_string(seq) +
      (microBatches == 1
           ? std::string()
           : " x --micro-batches " + std::to_string(microBatches));
  return Status::error(
      std::string(command) + ": " + product + " = " +
      (overflow ? std::string("more than 2^63") : std::to_string(tokens)) +
      " tokens per step, more than the limit of " +
      std::to_string(limits::kStepTokens) + " (2^32)");
}

Expected<std::string> onePositional(const char *command,
                                    const std::vector<std::string> &pos,
                                    const std::string &usage) {
  if (pos.size() == 1)
    return pos[0];
  if (pos.empty())
    return Status::error(std::string(command) +
                         ": missing argument\nusage: " + usage);
  return Status::error(std::string(command) + ": expected one argument, got " +
                       std::to_string(pos.size()) + " ('" + pos[0] + "', '" +
                       pos[1] + "', ...)");
}

bool wantsHelp(const std::vector<std::string> &args) {
  for (const std::string &a : args)
    if (a == "-h" || a == "--help")
      return true;
  return false;
}

bool isBundlePath(const std::string &path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".mtb") == 0;
}

} // namespace mtc::driver
