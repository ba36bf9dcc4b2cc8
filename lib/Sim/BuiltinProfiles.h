//===- BuiltinProfiles.h - The profiles built into the tool -----*- C++ -*-===//
//
// Part of mtc. The text of every data/hardware/*.json, embedded at build
// time by lib/Sim/EmbedProfiles.cmake (BuiltinProfilesTable.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SIM_BUILTINPROFILES_H
#define MTC_LIB_SIM_BUILTINPROFILES_H

#include <vector>

namespace mtc::sim {

/// One embedded profile: its file name without ".json", and its text.
struct BuiltinProfile {
  const char *name;
  const char *text;
};

/// Every data/hardware/*.json, in file-name order.
const std::vector<BuiltinProfile> &builtinProfiles();

} // namespace mtc::sim

#endif // MTC_LIB_SIM_BUILTINPROFILES_H
