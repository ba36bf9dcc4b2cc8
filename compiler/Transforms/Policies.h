//===- Policies.h - Streaming policies as users spell them ------*- C++ -*-===//
//
// Part of mtc. The recompute policy and the checkpoint placement are the
// stream dialect's enums (dialects/stream/StreamBase.td). Users spell the
// policy two ways: `mtc --recompute` and mtc-insert-recompute say what a
// layer recomputes (full | none | selective | auto: the enum's keywords),
// mtc-autodiff `save=` says what it keeps (input | all | selective). This
// header converts between them (the save names are written once, in
// Policies.cpp), builds the values of the pass options that take them, and
// gives those options a parser whose error lists the values.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_TRANSFORMS_POLICIES_H
#define MTC_COMPILER_TRANSFORMS_POLICIES_H

#include "dialects/stream/StreamDialect.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>

namespace mtc {

using stream::CheckpointPlacement;
using stream::RecomputePolicy;

/// mtc-autodiff's `save=` name of \p policy, which is also the backward's
/// `mt.save`: "input" (full), "all" (none), "selective" (selective); empty
/// for auto.
llvm::StringRef saveName(RecomputePolicy policy);

/// The policy whose `save=` name is \p name.
std::optional<RecomputePolicy> policyOfSaveName(llvm::StringRef name);

/// How a module differentiated with \p policy says so in diagnostics:
/// "mtc-autodiff save=all (recompute none)".
std::string describeDifferentiation(RecomputePolicy policy);

/// Values of a `save=` pass option: input, all, selective.
llvm::cl::ValuesClass saveOptionValues();

/// Values of a `recompute=` pass option: auto, full, none, selective.
llvm::cl::ValuesClass recomputeOptionValues();

/// Values of a `checkpoints=` pass option: device, host, auto.
llvm::cl::ValuesClass checkpointsOptionValues();

/// `--recompute TEXT` (full, none, selective or auto); any other text is an
/// error naming the values.
llvm::Expected<RecomputePolicy> parseRecomputePolicy(llvm::StringRef text);

/// `--checkpoints TEXT` (device, host or auto); any other text is an error
/// naming the values.
llvm::Expected<CheckpointPlacement>
parseCheckpointPlacement(llvm::StringRef text);

/// llvm::cl's parser of an enum option (cl::parser<E>), whose error for an
/// unknown value lists the values: "'some' is not one of input, all,
/// selective". The specialisations below make every cl option (pass options
/// included) of these enums use it.
template <typename E>
class EnumOptionParser : public llvm::cl::generic_parser_base {
protected:
  struct OptionInfo : public GenericOptionInfo {
    OptionInfo(llvm::StringRef name, E v, llvm::StringRef help)
        : GenericOptionInfo(name, help), V(v) {}
    llvm::cl::OptionValue<E> V;
  };
  llvm::SmallVector<OptionInfo, 4> Values;

public:
  using parser_data_type = E;

  EnumOptionParser(llvm::cl::Option &o) : generic_parser_base(o) {}

  unsigned getNumOptions() const override { return Values.size(); }
  llvm::StringRef getOption(unsigned n) const override {
    return Values[n].Name;
  }
  llvm::StringRef getDescription(unsigned n) const override {
    return Values[n].HelpStr;
  }
  const llvm::cl::GenericOptionValue &
  getOptionValue(unsigned n) const override {
    return Values[n].V;
  }

  /// Returns true on error.
  bool parse(llvm::cl::Option &o, llvm::StringRef argName, llvm::StringRef arg,
             E &value) {
    llvm::StringRef text = Owner.hasArgStr() ? arg : argName;
    for (const OptionInfo &info : Values)
      if (info.Name == text) {
        value = info.V.getValue();
        return false;
      }
    std::string names;
    for (const OptionInfo &info : Values)
      names += (names.empty() ? "" : ", ") + info.Name.str();
    return o.error("'" + text + "' is not one of " + names);
  }

  template <class DT>
  void addLiteralOption(llvm::StringRef name, const DT &value,
                        llvm::StringRef help) {
    Values.push_back(OptionInfo(name, static_cast<E>(value), help));
    AddLiteralOption(Owner, name);
  }

  void removeLiteralOption(llvm::StringRef name) {
    Values.erase(Values.begin() + findOption(name));
  }
};

} // namespace mtc

namespace llvm::cl {
template <>
class parser<mtc::RecomputePolicy>
    : public mtc::EnumOptionParser<mtc::RecomputePolicy> {
public:
  using EnumOptionParser::EnumOptionParser;
};
template <>
class parser<mtc::CheckpointPlacement>
    : public mtc::EnumOptionParser<mtc::CheckpointPlacement> {
public:
  using EnumOptionParser::EnumOptionParser;
};
} // namespace llvm::cl

#endif // MTC_COMPILER_TRANSFORMS_POLICIES_H
