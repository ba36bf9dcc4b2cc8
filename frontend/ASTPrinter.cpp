//===- ASTPrinter.cpp - Readable dump of the .mt AST ----------------------===//
//
// Part of mtc. The format (one node per line, two spaces of indentation per
// level, `@line:col` at the end of each line):
//
//   Model TinyLlama @1:7
//     Config
//       vocab = 256 @3:5
//       head_dim = (dim / n_heads) @4:5
//     Param tok_emb: [vocab, dim] = normal(0.02) @6:9
//     Layer Block x n_layers @8:9
//       Param wq: [dim, (n_heads * head_dim)] bf16 = normal(0.02) @10:11
//       Expert E x 8 @...
//       Forward(x: [B, S, dim]) -> [B, S, dim] @19:5
//         Assign h = rmsnorm(x, attn_norm, eps) @20:7
//         Assign a, b = split(x, [1, 2], -1) @...
//         Return (x + h) @26:7
//     Forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] @31:3
//       Repeat (n_layers / 2) @...
//         Assign x = Block[1](x) @...
//
// Model items are printed in source order. A dtype is printed only where the
// source wrote one. Expressions: see printAST in ASTPrinter.h.
//
//===----------------------------------------------------------------------===//

#include "frontend/ASTPrinter.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <tuple>

namespace mtc {

namespace {

std::string formatLoc(SourceLoc loc) {
  return "@" + std::to_string(loc.line) + ":" + std::to_string(loc.col);
}

std::string formatNumber(const ast::Expr &e) {
  char buf[64];
  if (e.isInt && std::fabs(e.number) < 1e18) {
    std::snprintf(buf, sizeof buf, "%.0f", e.number);
    return buf;
  }
  // Shortest form that reads back to the same value.
  auto res = std::to_chars(buf, buf + sizeof buf - 1, e.number);
  *res.ptr = '\0';
  std::string s = buf;
  if (!e.isInt && s.find_first_of(".eEn") == std::string::npos)
    s += ".0"; // keep floats recognisable: 10000.0
  return s;
}

std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      out += c;
    }
  }
  return out + "\"";
}

std::string formatList(const std::vector<ast::ExprPtr> &items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += ", ";
    out += items[i] ? formatExpr(*items[i]) : "<null>";
  }
  return out;
}

std::string formatShape(const ast::ShapeDecl &s) {
  std::string out = "[" + formatList(s.dims) + "]";
  if (s.dtype)
    out += std::string(" ") + dtypeName(*s.dtype);
  return out;
}

class Printer {
public:
  explicit Printer(std::ostream &os) : os(os) {}

  void model(const ast::Model &m) {
    line(0) << "Model " << m.name << " " << formatLoc(m.loc) << "\n";
    // Merge the item lists back into source order.
    std::vector<std::pair<SourceLoc, std::function<void()>>> items;
    if (!m.config.empty())
      items.push_back({m.config.front().loc, [&] { config(m); }});
    for (const ast::ParamDecl &p : m.params)
      items.push_back({p.loc, [&, pp = &p] { param(*pp, 1); }});
    for (const ast::LayerDecl &l : m.layers)
      items.push_back({l.loc, [&, lp = &l] { layer(*lp); }});
    if (m.forward)
      items.push_back({m.forward->loc, [&] { forward(*m.forward, 1); }});
    std::sort(items.begin(), items.end(), [](const auto &a, const auto &b) {
      return std::tie(a.first.line, a.first.col) <
             std::tie(b.first.line, b.first.col);
    });
    for (auto &item : items)
      item.second();
  }

private:
  std::ostream &line(unsigned indent) {
    for (unsigned i = 0; i < indent; ++i)
      os << "  ";
    return os;
  }

  void config(const ast::Model &m) {
    line(1) << "Config\n";
    for (const ast::ConfigEntry &c : m.config)
      line(2) << c.name << " = " << (c.value ? formatExpr(*c.value) : "<null>")
              << " " << formatLoc(c.loc) << "\n";
  }

  void param(const ast::ParamDecl &p, unsigned indent) {
    line(indent) << "Param " << p.name << ": " << formatShape(p.shape) << " = "
                 << ast::initKindName(p.init);
    if (!p.initArgs.empty())
      os << "(" << formatList(p.initArgs) << ")";
    os << " " << formatLoc(p.loc) << "\n";
  }

  void layer(const ast::LayerDecl &l) {
    line(1) << "Layer " << l.name << " x "
            << (l.count ? formatExpr(*l.count) : "<null>") << " "
            << formatLoc(l.loc) << "\n";
    for (const ast::ParamDecl &p : l.params)
      param(p, 2);
    for (const ast::ExpertDecl &e : l.experts) {
      line(2) << "Expert " << e.name << " x "
              << (e.count ? formatExpr(*e.count) : "<null>") << " "
              << formatLoc(e.loc) << "\n";
      for (const ast::ParamDecl &p : e.params)
        param(p, 3);
      if (e.forward)
        forward(*e.forward, 3);
    }
    if (l.forward)
      forward(*l.forward, 2);
  }

  void forward(const ast::ForwardDecl &f, unsigned indent) {
    line(indent) << "Forward(";
    for (size_t i = 0; i < f.args.size(); ++i)
      os << (i ? ", " : "") << f.args[i].name << ": "
         << formatShape(f.args[i].shape);
    os << ") -> " << formatShape(f.result) << " " << formatLoc(f.loc) << "\n";
    for (const ast::StmtPtr &s : f.body)
      stmt(*s, indent + 1);
  }

  void stmt(const ast::Stmt &s, unsigned indent) {
    std::string value = s.value ? formatExpr(*s.value) : "<null>";
    switch (s.kind) {
    case ast::Stmt::Kind::Assign: {
      line(indent) << "Assign ";
      for (size_t i = 0; i < s.names.size(); ++i)
        os << (i ? ", " : "") << s.names[i];
      os << " = " << value << " " << formatLoc(s.loc) << "\n";
      break;
    }
    case ast::Stmt::Kind::Return:
      line(indent) << "Return " << value << " " << formatLoc(s.loc) << "\n";
      break;
    case ast::Stmt::Kind::Repeat:
      line(indent) << "Repeat " << value << " " << formatLoc(s.loc) << "\n";
      for (const ast::StmtPtr &inner : s.body)
        stmt(*inner, indent + 1);
      break;
    }
  }

  std::ostream &os;
};

} // namespace

std::string formatExpr(const ast::Expr &e) {
  using Kind = ast::Expr::Kind;
  switch (e.kind) {
  case Kind::Number:
    return formatNumber(e);
  case Kind::Bool:
    return e.boolean ? "true" : "false";
  case Kind::String:
    return quote(e.text);
  case Kind::Name:
    return e.text;
  case Kind::Unary:
    return std::string("(") + e.op +
           (e.operands.empty() || !e.operands[0] ? "<null>"
                                                 : formatExpr(*e.operands[0])) +
           ")";
  case Kind::Binary: {
    if (e.operands.size() != 2 || !e.operands[0] || !e.operands[1])
      return "<bad binary>";
    std::string op = e.op == '^' ? "**" : std::string(1, e.op);
    return "(" + formatExpr(*e.operands[0]) + " " + op + " " +
           formatExpr(*e.operands[1]) + ")";
  }
  case Kind::Call: {
    std::string out = e.text;
    if (e.index)
      out += "[" + formatExpr(*e.index) + "]";
    out += "(" + formatList(e.operands);
    for (size_t i = 0; i < e.named.size(); ++i) {
      if (i || !e.operands.empty())
        out += ", ";
      out += e.named[i].name + " = " +
             (e.named[i].value ? formatExpr(*e.named[i].value) : "<null>");
    }
    return out + ")";
  }
  case Kind::List:
    return "[" + formatList(e.operands) + "]";
  }
  return "<?>";
}

const char *ast::initKindName(ast::InitKind k) {
  switch (k) {
  case ast::InitKind::Zeros:
    return "zeros";
  case ast::InitKind::Ones:
    return "ones";
  case ast::InitKind::Normal:
    return "normal";
  case ast::InitKind::ScaledNormal:
    return "scaled_normal";
  case ast::InitKind::Uniform:
    return "uniform";
  }
  return "?";
}

void printAST(const ast::Model &model, std::ostream &os) {
  Printer(os).model(model);
}

} // namespace mtc
