//===- AST.h - Abstract syntax tree of the .mt language ---------*- C++ -*-===//
//
// Part of mtc. The parser (Parser.cpp, over the ANTLR4 grammar Mt.g4) builds
// this tree; Sema checks it and produces a CheckedModel (Sema.h). The tree
// keeps every source position so that later errors can point at the text.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_FRONTEND_AST_H
#define MTC_FRONTEND_AST_H

#include "lib/Support/Diagnostics.h"
#include "lib/Support/Shape.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mtc::ast {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

/// `name = value` inside a call's argument list.
struct NamedArg {
  std::string name;
  SourceLoc loc;
  ExprPtr value;
};

/// Every expression form of the language (config expressions, dims, tensor
/// expressions and call arguments share it; Sema decides what is legal where).
struct Expr {
  enum class Kind {
    Number, ///< 688, 1e-5           (number, isInt)
    Bool,   ///< true / false        (boolean)
    String, ///< "tanh"              (text, without quotes)
    Name,   ///< x, dim, B           (text)
    Unary,  ///< -e                  (op = '-', operands[0])
    Binary, ///< a OP b              (op in + - * / % @ ^ ; ^ is **)
    Call,   ///< f(args), L[k](x)    (text = callee, index, operands, named)
    List,   ///< [e, e, ...]         (operands)
  };
  Kind kind;
  SourceLoc loc;
  double number = 0;
  bool isInt = false;
  bool boolean = false;
  std::string text;
  char op = 0;
  /// Call only: the `[k]` of a layer application `Block[k](x)`.
  ExprPtr index;
  std::vector<ExprPtr> operands;
  std::vector<NamedArg> named;
};

struct ShapeDecl {
  SourceLoc loc;
  std::vector<ExprPtr> dims;
  std::optional<DType> dtype; ///< absent: f32
  SourceLoc dtypeLoc;
};

enum class InitKind { Zeros, Ones, Normal, ScaledNormal, Uniform };
/// The language's name of \p k ("zeros", "scaled_normal", ...).
const char *initKindName(InitKind k);

struct ParamDecl {
  std::string name;
  SourceLoc loc;
  ShapeDecl shape;
  InitKind init = InitKind::Zeros;
  SourceLoc initLoc;
  std::vector<ExprPtr> initArgs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

struct Stmt {
  enum class Kind { Assign, Return, Repeat };
  Kind kind;
  SourceLoc loc;
  std::vector<std::string> names; ///< Assign: targets (several for split)
  std::vector<SourceLoc> nameLocs;
  ExprPtr value;             ///< Assign/Return value, Repeat count
  std::vector<StmtPtr> body; ///< Repeat body
};

struct ArgDecl {
  std::string name;
  SourceLoc loc;
  ShapeDecl shape;
};

struct ForwardDecl {
  SourceLoc loc;
  std::vector<ArgDecl> args;
  ShapeDecl result;
  std::vector<StmtPtr> body;
};

struct ExpertDecl {
  std::string name;
  SourceLoc loc;
  ExprPtr count;
  std::vector<ParamDecl> params;
  std::optional<ForwardDecl> forward;
};

struct LayerDecl {
  std::string name;
  SourceLoc loc;
  ExprPtr count;
  std::vector<ParamDecl> params;
  std::vector<ExpertDecl> experts;
  std::optional<ForwardDecl> forward;
};

struct ConfigEntry {
  std::string name;
  SourceLoc loc;
  ExprPtr value;
};

struct Model {
  std::string name;
  SourceLoc loc;
  std::vector<ConfigEntry> config;
  std::vector<ParamDecl> params;
  std::vector<LayerDecl> layers;
  std::optional<ForwardDecl> forward;
  /// Source order of items is kept only through the locations.
};

} // namespace mtc::ast

#endif // MTC_FRONTEND_AST_H
