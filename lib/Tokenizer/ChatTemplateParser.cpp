//===- ChatTemplateParser.cpp - Jinja statement parser --------------------===//
//
// Part of mtc. Turns a chat template's pieces into a tree of statements:
// if/elif/else, for (unpacking, `if` filter, else), set (a name or a
// namespace attribute), break, continue and generation blocks; anything
// else is an error naming the tag.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplateInternal.h"

#include <cctype>

namespace mtc::tok::jinja {

namespace {

Node makeNode(Node::Kind k) {
  Node n;
  n.kind = k;
  return n;
}

class TemplateParser {
public:
  explicit TemplateParser(std::vector<Piece> pieces)
      : pieces(std::move(pieces)) {}

  Body parseAll() {
    Body b = parseBody({});
    if (idx < pieces.size()) {
      const Piece &p = pieces[idx];
      fail(p.line, "unexpected '{% " + firstWord(p.text) + " %}'");
    }
    return b;
  }

private:
  static std::string firstWord(const std::string &s) {
    size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos)
      return "";
    size_t e = b;
    while (e < s.size() &&
           (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_'))
      ++e;
    return s.substr(b, e - b);
  }

  // Parses nodes until a statement whose first word is in \p stops (left
  // unconsumed) or the end; blocks nest at most kMaxDepth levels.
  Body parseBody(const std::vector<std::string> &stops) {
    if (depth > kMaxDepth)
      fail(idx > 0 ? pieces[idx - 1].line : 1, "blocks nest more than " +
                                                   std::to_string(kMaxDepth) +
                                                   " levels deep");
    ++depth;
    Body body = parseBlock(stops);
    --depth;
    return body;
  }

  Body parseBlock(const std::vector<std::string> &stops) {
    Body body;
    while (idx < pieces.size()) {
      const Piece &p = pieces[idx];
      if (p.kind == PieceKind::Text) {
        Node n = makeNode(Node::Text);
        n.text = p.text;
        n.line = p.line;
        body.push_back(std::move(n));
        ++idx;
        continue;
      }
      if (p.kind == PieceKind::Expr) {
        ExprParser ep(lexExpr(p.text, p.line), p.line);
        Node n = makeNode(Node::Output);
        n.expr = ep.parseExpression();
        ep.expectEnd();
        n.line = p.line;
        body.push_back(std::move(n));
        ++idx;
        continue;
      }
      std::string word = firstWord(p.text);
      for (const std::string &s : stops)
        if (word == s)
          return body;
      body.push_back(parseStatement(word));
    }
    return body;
  }

  void expectTag(const std::string &word, int openLine,
                 const std::string &opener) {
    if (idx >= pieces.size())
      fail(openLine,
           "'{% " + opener + " %}' has no '{% " + word + " %}' to close it");
    ++idx;
  }

  Node parseStatement(const std::string &word) {
    const Piece &p = pieces[idx];
    int line = p.line;
    ExprParser ep(lexExpr(p.text, line), line);
    ep.pos = 1; // after the keyword
    if (word == "if") {
      Node n = makeNode(Node::If);
      n.line = line;
      ExprP cond = ep.parseExpression();
      ep.expectEnd();
      ++idx;
      while (true) {
        Body b = parseBody({"elif", "else", "endif"});
        n.branches.emplace_back(cond, std::move(b));
        if (idx >= pieces.size())
          fail(line, "'{% if %}' has no '{% endif %}' to close it");
        std::string w = firstWord(pieces[idx].text);
        int l = pieces[idx].line;
        ExprParser ep2(lexExpr(pieces[idx].text, l), l);
        ep2.pos = 1;
        ++idx;
        if (w == "endif") {
          ep2.expectEnd();
          break;
        }
        if (w == "else") {
          ep2.expectEnd();
          Body eb = parseBody({"endif", "elif", "else"});
          if (idx >= pieces.size() || firstWord(pieces[idx].text) != "endif")
            fail(line, "'{% if %}' has no '{% endif %}' to close it");
          ++idx;
          n.branches.emplace_back(nullptr, std::move(eb));
          break;
        }
        cond = ep2.parseExpression();
        ep2.expectEnd();
      }
      return n;
    }
    if (word == "for") {
      Node n = makeNode(Node::For);
      n.line = line;
      n.vars.push_back(ep.expectName());
      while (ep.isOp(",")) {
        ++ep.pos;
        n.vars.push_back(ep.expectName());
      }
      if (!ep.isName("in"))
        fail(line, "expected 'in' in '{% for %}'");
      ++ep.pos;
      n.expr = ep.parseExpression(false);
      if (ep.isName("if")) {
        ++ep.pos;
        n.filter = ep.parseExpression(false);
      }
      if (ep.isName("recursive"))
        fail(line, "unsupported Jinja construct: recursive loops");
      ep.expectEnd();
      ++idx;
      n.body = parseBody({"endfor", "else"});
      if (idx >= pieces.size())
        fail(line, "'{% for %}' has no '{% endfor %}' to close it");
      if (firstWord(pieces[idx].text) == "else") {
        ++idx;
        n.elseBody = parseBody({"endfor"});
        if (idx >= pieces.size())
          fail(line, "'{% for %}' has no '{% endfor %}' to close it");
      }
      ++idx;
      return n;
    }
    if (word == "set") {
      Node n = makeNode(Node::Set);
      n.line = line;
      n.vars.push_back(ep.expectName());
      if (ep.isOp(".")) {
        ++ep.pos;
        n.vars.push_back(ep.expectName());
      }
      if (ep.isOp(","))
        fail(line, "unsupported Jinja construct: '{% set %}' with several "
                   "targets");
      if (ep.atEnd())
        fail(line, "unsupported Jinja construct: block '{% set %}'");
      ep.expectOp("=");
      n.expr = ep.parseExpression();
      ep.expectEnd();
      ++idx;
      return n;
    }
    if (word == "break" || word == "continue") {
      ep.expectEnd();
      ++idx;
      Node n = makeNode(word == "break" ? Node::Break : Node::Continue);
      n.line = line;
      return n;
    }
    if (word == "generation") {
      ep.expectEnd();
      ++idx;
      Body b = parseBody({"endgeneration"});
      if (idx >= pieces.size())
        fail(line,
             "'{% generation %}' has no '{% endgeneration %}' to close it");
      ++idx;
      Node n = makeNode(Node::If);
      n.line = line;
      ExprP always = std::make_shared<Expr>();
      always->kind = Expr::Lit;
      always->lit = Value::boolean(true);
      n.branches.emplace_back(always, std::move(b));
      return n;
    }
    if (word == "endif" || word == "endfor" || word == "elif" ||
        word == "else" || word == "endgeneration")
      fail(line, "unexpected '{% " + word + " %}'");
    if (word.empty())
      fail(line, "empty '{% %}' tag");
    fail(line, "unsupported Jinja construct: '{% " + word + " %}'");
  }

  std::vector<Piece> pieces;
  size_t idx = 0;
  int depth = 0; // blocks being parsed
};

} // namespace

Body parseTemplate(std::vector<Piece> pieces) {
  return TemplateParser(std::move(pieces)).parseAll();
}

} // namespace mtc::tok::jinja
