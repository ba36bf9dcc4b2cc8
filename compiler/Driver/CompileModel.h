//===- CompileModel.h - .mt source to a runtime bundle ----------*- C++ -*-===//
//
// Part of mtc. The whole compiler in one call, for the commands that train or
// check a model straight from its source (`mtc train model.mt`, `mtc
// gradcheck model.mt`).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_COMPILER_DRIVER_COMPILEMODEL_H
#define MTC_COMPILER_DRIVER_COMPILEMODEL_H

#include "frontend/AST.h"
#include "lib/Bundle/Bundle.h"
#include "lib/Support/Diagnostics.h"

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace mtc {

/// `--set name=value`: replaces a config entry's expression by a number
/// before Sema runs (for tiny instances of a model: `--set dim=16`).
using ConfigOverrides = std::vector<std::pair<std::string, double>>;

/// Parses `name=value` into \p out; returns false with a message otherwise.
bool parseConfigOverride(const std::string &text, ConfigOverrides &out,
                         std::string &err);

/// Applies \p overrides to the parsed model; unknown names are errors
/// reported to \p diags.
bool applyConfigOverrides(ast::Model &model, const ConfigOverrides &overrides,
                          DiagnosticEngine &diags);

/// Reads \p path, parses, checks, lowers to the mt dialect, runs the
/// training pipeline and flattens the result into \p out. Every error is
/// printed to \p errs (file:line:col with a caret); returns false then.
bool compileModelFile(const std::string &path,
                      const ConfigOverrides &overrides, std::ostream &errs,
                      bundle::Bundle &out);

/// Reads a model given either as `.mt` source (compiled in-process) or as a
/// `.mtb` bundle.
bool loadModel(const std::string &path, const ConfigOverrides &overrides,
               std::ostream &errs, bundle::Bundle &out);

} // namespace mtc

#endif // MTC_COMPILER_DRIVER_COMPILEMODEL_H
