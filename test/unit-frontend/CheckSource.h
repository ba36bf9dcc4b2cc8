//===- CheckSource.h - Parse and check a model source in tests --*- C++ -*-===//
//
// Part of mtc. What the frontend unit tests run on a source string: the
// parser, then Sema, with the diagnostics kept as text.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TEST_UNIT_FRONTEND_CHECKSOURCE_H
#define MTC_TEST_UNIT_FRONTEND_CHECKSOURCE_H

#include "frontend/Parser.h"
#include "frontend/Sema.h"

#include <optional>
#include <sstream>
#include <string>

namespace mtc::test {

/// The outcome of checkSource.
struct Checked {
  bool parsed = false; ///< the parser produced a model
  bool ok = false;     ///< and Sema accepted it
  std::string diags;   ///< every diagnostic printed, as "test.mt:L:C: ..."
  CheckedModel model;
};

/// Parses \p source (named test.mt in diagnostics) and checks it.
inline Checked checkSource(const std::string &source) {
  Checked r;
  std::ostringstream os;
  DiagnosticEngine diags("test.mt", source, os);
  std::optional<ast::Model> model = parseModel(diags);
  r.parsed = model.has_value();
  if (model)
    r.ok = checkModel(*model, diags, r.model);
  r.diags = os.str();
  return r;
}

} // namespace mtc::test

#endif // MTC_TEST_UNIT_FRONTEND_CHECKSOURCE_H
