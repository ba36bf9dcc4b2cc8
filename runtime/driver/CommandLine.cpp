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
    char *end = nullptr;
    errno = 0;
    switch (flag->kind) {
    case Flag::Int:
    case Flag::Uint: {
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (errno || end == value.c_str() || *end != '\0' || v < flag->min)
        return Status::error(
            bad + "an integer >= " + std::to_string((long long)flag->min) +
            ", got '" + value + "'");
      if (flag->kind == Flag::Int)
        *static_cast<int64_t *>(flag->target) = v;
      else
        *static_cast<uint64_t *>(flag->target) = static_cast<uint64_t>(v);
      break;
    }
    case Flag::Double: {
      double v = std::strtod(value.c_str(), &end);
      if (errno || end == value.c_str() || *end != '\0' || !(v >= flag->min) ||
          !std::isfinite(v))
        return Status::error(bad +
                             "a finite number >= " + std::to_string(flag->min) +
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
