//===- Policies.cpp - Streaming policies as users spell them ----*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "compiler/Transforms/Policies.h"

using namespace mtc;

namespace {

/// The `save=` vocabulary: what a layer keeps under each policy.
struct SaveName {
  RecomputePolicy policy;
  const char *name;
  const char *help;
};
constexpr SaveName kSaveNames[] = {
    {RecomputePolicy::Full, "input",
     "its input only; the backward recomputes the rest"},
    {RecomputePolicy::None, "all",
     "every intermediate the backward reads, which the forward also returns"},
    {RecomputePolicy::Selective, "selective",
     "the results of its matmul, attention and moe ops; the backward "
     "recomputes the cheap ops from them"},
};

llvm::cl::OptionEnumValue saveValue(const SaveName &s) {
  return clEnumValN(s.policy, s.name, s.help);
}

llvm::cl::OptionEnumValue recomputeValue(RecomputePolicy p, const char *help) {
  return clEnumValN(p, stream::stringifyRecomputePolicy(p), help);
}

llvm::cl::OptionEnumValue checkpointsValue(CheckpointPlacement p,
                                           const char *help) {
  return clEnumValN(p, stream::stringifyCheckpointPlacement(p), help);
}

} // namespace

llvm::StringRef mtc::saveName(RecomputePolicy policy) {
  for (const SaveName &s : kSaveNames)
    if (s.policy == policy)
      return s.name;
  return "";
}

std::optional<RecomputePolicy> mtc::policyOfSaveName(llvm::StringRef name) {
  for (const SaveName &s : kSaveNames)
    if (name == s.name)
      return s.policy;
  return std::nullopt;
}

std::string mtc::describeDifferentiation(RecomputePolicy policy) {
  return ("mtc-autodiff save=" + saveName(policy) + " (recompute " +
          stream::stringifyRecomputePolicy(policy) + ")")
      .str();
}

llvm::cl::ValuesClass mtc::saveOptionValues() {
  return llvm::cl::values(saveValue(kSaveNames[0]), saveValue(kSaveNames[1]),
                          saveValue(kSaveNames[2]));
}

llvm::cl::ValuesClass mtc::recomputeOptionValues() {
  return llvm::cl::values(
      recomputeValue(RecomputePolicy::Auto,
                     "the policy the module was differentiated with"),
      recomputeValue(RecomputePolicy::Full, "keep each layer's input"),
      recomputeValue(RecomputePolicy::None, "keep every intermediate"),
      recomputeValue(RecomputePolicy::Selective,
                     "keep the matmul, attention and moe results"));
}

llvm::cl::ValuesClass mtc::checkpointsOptionValues() {
  return llvm::cl::values(
      checkpointsValue(CheckpointPlacement::Device, "in device memory"),
      checkpointsValue(CheckpointPlacement::Host,
                       "in host memory, through two device staging slots"),
      checkpointsValue(CheckpointPlacement::Auto,
                       "device if the plan fits the budget, else host"));
}

llvm::Expected<RecomputePolicy>
mtc::parseRecomputePolicy(llvm::StringRef text) {
  if (std::optional<RecomputePolicy> p = stream::symbolizeRecomputePolicy(text))
    return *p;
  return llvm::createStringError("unknown recompute policy '" + text.str() +
                                 "' (expected full, none, selective or auto)");
}

llvm::Expected<CheckpointPlacement>
mtc::parseCheckpointPlacement(llvm::StringRef text) {
  if (std::optional<CheckpointPlacement> p =
          stream::symbolizeCheckpointPlacement(text))
    return *p;
  return llvm::createStringError("unknown checkpoints placement '" +
                                 text.str() +
                                 "' (expected device, host or auto)");
}
