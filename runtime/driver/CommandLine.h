//===- CommandLine.h - Flags of the mtc commands ----------------*- C++ -*-===//
//
// Part of mtc. The one flag parser of the command-line tools (`mtc`, built
// with the compiler, and `mtc-run`, runtime only): a command declares its
// flags as a table of names and targets, and parseFlags fills them. Runtime
// side (no LLVM) so that both tools parse the same flags the same way.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_DRIVER_COMMANDLINE_H
#define MTC_RUNTIME_DRIVER_COMMANDLINE_H

#include "lib/Support/Status.h"

#include <set>
#include <string>
#include <vector>

namespace mtc::driver {

/// One command-line flag of a command: `--name VALUE` (or `--name=VALUE`).
/// String values must not be empty (a path or a choice given as "" is a
/// mistake, never "use the default"); Text values may be. A List flag may be
/// repeated: each value is appended to a std::vector<std::string>.
struct Flag {
  enum Kind { Int, Uint, Double, String, Text, List } kind;
  const char *name;
  /// Int: int64_t, Uint: uint64_t, Double: double, String and Text:
  /// std::string, List: std::vector<std::string>.
  void *target;
  double min = 0; ///< Int/Uint/Double: smallest accepted value
};

/// Parses \p args against \p flags; positional arguments go to
/// \p positional, the names of the flags given to \p given (when not null).
/// On bad input the error names \p command and the flag ("train: --steps
/// expects an integer >= 1, got 'x'").
Status parseFlags(const char *command, const std::vector<std::string> &args,
                  const std::vector<Flag> &flags,
                  std::vector<std::string> &positional,
                  std::set<std::string> *given = nullptr);

/// Exactly one positional argument (the model or checkpoint); the error
/// for none shows \p usage.
Expected<std::string> onePositional(const char *command,
                                    const std::vector<std::string> &pos,
                                    const std::string &usage);

/// Whether \p args asks for help (-h or --help).
bool wantsHelp(const std::vector<std::string> &args);

/// Whether \p path names a bundle (ends in .mtb).
bool isBundlePath(const std::string &path);

} // namespace mtc::driver

#endif // MTC_RUNTIME_DRIVER_COMMANDLINE_H
