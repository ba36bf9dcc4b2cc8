//===- Parser.h - .mt source to AST -----------------------------*- C++ -*-===//
//
// Part of mtc. Parses .mt text with the ANTLR4 grammar Mt.g4 and builds the
// AST. Robust against any bytes: inputs larger than kMaxSourceBytes or nested
// deeper than kMaxNesting are rejected with a diagnostic before ANTLR sees
// them, so the recursive-descent parser cannot exhaust the stack.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_FRONTEND_PARSER_H
#define MTC_FRONTEND_PARSER_H

#include "frontend/AST.h"
#include "lib/Support/Diagnostics.h"

#include <optional>

namespace mtc {

constexpr size_t kMaxSourceBytes = 16u << 20;
constexpr unsigned kMaxNesting = 200;

/// Parses the source held by \p diags. Syntax errors go to \p diags; returns
/// the model when there were none.
std::optional<ast::Model> parseModel(DiagnosticEngine &diags);

/// Parse + Sema in one call (what the tools and the fuzzer use).
struct CheckedModel;
bool parseAndCheck(DiagnosticEngine &diags, CheckedModel &out);

} // namespace mtc

#endif // MTC_FRONTEND_PARSER_H
