//===- ASTPrinter.h - Readable dump of the .mt AST --------------*- C++ -*-===//
//
// Part of mtc. Prints the AST as an indented tree (`mtc compile --emit=ast`).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_FRONTEND_ASTPRINTER_H
#define MTC_FRONTEND_ASTPRINTER_H

#include "frontend/AST.h"

#include <ostream>
#include <string>

namespace mtc {

/// Prints \p model as an indented tree, one declaration or statement per line,
/// each followed by its `@line:col`. Expressions are printed in infix form
/// with every unary and binary operation parenthesised, so the tree's
/// grouping is visible: `a + b * c` prints as `(a + (b * c))`, `-a ** 2` as
/// `(-(a ** 2))`. Numbers that were written as floats keep a `.0`.
void printAST(const ast::Model &model, std::ostream &os);

/// Prints one expression in the form printAST uses.
std::string formatExpr(const ast::Expr &expr);

} // namespace mtc

#endif // MTC_FRONTEND_ASTPRINTER_H
