//===- ChatTemplateLexer.cpp - Jinja lexer --------------------------------===//
//
// Part of mtc. Splits a chat template into text and tags, applying Jinja2's
// whitespace rules (`-` markers, trim_blocks, lstrip_blocks, the dropped
// trailing newline), and a tag's inside into tokens.
//
//===----------------------------------------------------------------------===//

#include "lib/Tokenizer/ChatTemplateInternal.h"
#include "lib/Tokenizer/Unicode.h"

#include <cctype>
#include <cstring>

namespace mtc::tok::jinja {

std::vector<Piece> splitTemplate(const std::string &raw) {
  // Jinja2 reads \r\n and \r as \n, and drops one trailing newline
  // (keep_trailing_newline = False).
  std::string src;
  for (size_t k = 0; k < raw.size(); ++k) {
    if (raw[k] == '\r') {
      src += '\n';
      if (k + 1 < raw.size() && raw[k + 1] == '\n')
        ++k;
    } else {
      src += raw[k];
    }
  }
  if (!src.empty() && src.back() == '\n')
    src.pop_back();
  std::vector<Piece> out;
  size_t pos = 0;
  int line = 1;
  bool stripNext = false, trimNewline = false;
  auto countLines = [](const std::string &s, size_t b, size_t e) {
    int n = 0;
    for (size_t k = b; k < e; ++k)
      n += s[k] == '\n';
    return n;
  };
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() &&
           src[open + 1] != '{' && src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open != std::string::npos && open + 1 >= src.size())
      open = std::string::npos;
    size_t textEnd = open == std::string::npos ? src.size() : open;
    std::string text = src.substr(pos, textEnd - pos);
    int textLine = line;
    line += countLines(src, pos, textEnd);
    if (trimNewline && !text.empty() && text[0] == '\n')
      text.erase(0, 1);
    if (stripNext) {
      size_t k = 0;
      while (k < text.size() &&
             std::isspace(static_cast<unsigned char>(text[k])))
        ++k;
      text.erase(0, k);
    }
    stripNext = trimNewline = false;
    if (open == std::string::npos) {
      if (!text.empty())
        out.push_back({PieceKind::Text, text, textLine});
      break;
    }
    char kind = src[open + 1];
    char closeChar = kind == '{' ? '}' : kind;
    size_t inner = open + 2;
    bool stripBefore = false, keepBefore = false;
    if (inner < src.size() && src[inner] == '-') {
      stripBefore = true;
      ++inner;
    } else if (inner < src.size() && src[inner] == '+' && kind != '{') {
      keepBefore = true;
      ++inner;
    }
    std::string closer = std::string(1, closeChar) + "}";
    size_t close = src.find(closer, inner);
    // A string literal may hold the closer; skip quoted parts in tags.
    if (kind != '#') {
      size_t k = inner;
      char quote = 0;
      close = std::string::npos;
      for (; k + 1 < src.size(); ++k) {
        char c = src[k];
        if (quote) {
          if (c == '\\')
            ++k;
          else if (c == quote)
            quote = 0;
        } else if (c == '\'' || c == '"') {
          quote = c;
        } else if (c == closeChar && src[k + 1] == '}') {
          close = k;
          break;
        }
      }
    }
    if (close == std::string::npos)
      fail(line, std::string("unclosed '{") + kind + "' tag");
    size_t innerEnd = close;
    bool stripAfter = false, keepAfter = false;
    if (innerEnd > inner && src[innerEnd - 1] == '-') {
      stripAfter = true;
      --innerEnd;
    } else if (innerEnd > inner && src[innerEnd - 1] == '+' && kind != '{') {
      keepAfter = true;
      --innerEnd;
    }
    if (stripBefore) {
      size_t e = text.size();
      while (e > 0 && std::isspace(static_cast<unsigned char>(text[e - 1])))
        --e;
      text.resize(e);
    } else if (kind != '{' && !keepBefore) {
      // lstrip_blocks: spaces and tabs from the start of the line (in the
      // source) up to the tag.
      size_t k = open;
      while (k > 0 && (src[k - 1] == ' ' || src[k - 1] == '\t' ||
                       src[k - 1] == '\f' || src[k - 1] == '\v'))
        --k;
      if (k == 0 || src[k - 1] == '\n') {
        size_t e = text.size();
        while (e > 0 && text.size() - e < open - k &&
               (text[e - 1] == ' ' || text[e - 1] == '\t' ||
                text[e - 1] == '\f' || text[e - 1] == '\v'))
          --e;
        text.resize(e);
      }
    }
    if (!text.empty())
      out.push_back({PieceKind::Text, text, textLine});
    int tagLine = line;
    line += countLines(src, open, close + 2);
    if (kind != '#')
      out.push_back({kind == '{' ? PieceKind::Expr : PieceKind::Stmt,
                     src.substr(inner, innerEnd - inner), tagLine});
    stripNext = stripAfter;
    trimNewline = kind != '{' && !stripAfter && !keepAfter;
    pos = close + 2;
  }
  return out;
}

namespace {

// Python's \xHH, \uHHHH, \UHHHHHHHH and \ooo (one to three octal digits)
// escapes, as Jinja2 decodes string literals (unicode-escape): the code point
// appended to \p out as UTF-8. \p at is the escape's letter (or first
// digit) in \p s; returns the position after the escape.
size_t codePointEscape(const std::string &s, size_t at, char kind,
                       std::string &out, int line) {
  uint32_t cp = 0;
  size_t k = at;
  if (kind >= '0' && kind <= '7') {
    for (int n = 0; n < 3 && k < s.size() && s[k] >= '0' && s[k] <= '7';
         ++n, ++k)
      cp = cp * 8 + static_cast<uint32_t>(s[k] - '0');
  } else {
    int digits = kind == 'x' ? 2 : kind == 'u' ? 4 : 8;
    ++k;
    for (int n = 0; n < digits; ++n, ++k) {
      char c = k < s.size() ? s[k] : '\0';
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0)
        fail(line, std::string("truncated \\") + kind + " escape in a string " +
                       "literal (" + std::to_string(digits) +
                       " hex digits expected)");
      cp = cp * 16 + static_cast<uint32_t>(d);
    }
  }
  if (cp > 0x10FFFF)
    fail(line, "illegal Unicode character in a string literal's escape");
  if (cp >= 0xD800 && cp <= 0xDFFF)
    fail(line, "a surrogate code point in a string literal's escape (not "
               "text UTF-8 can hold)");
  appendUtf8(out, cp);
  return k;
}

} // namespace

std::vector<Token> lexExpr(const std::string &s, int line) {
  std::vector<Token> toks;
  size_t k = 0;
  while (k < s.size()) {
    char c = s[k];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++k;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = k;
      while (k < s.size() &&
             (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_'))
        ++k;
      toks.push_back({Tok::Name, s.substr(b, k - b)});
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t b = k;
      bool isFloat = false;
      while (k < s.size() &&
             (std::isdigit(static_cast<unsigned char>(s[k])) || s[k] == '_'))
        ++k;
      if (k + 1 < s.size() && s[k] == '.' &&
          std::isdigit(static_cast<unsigned char>(s[k + 1]))) {
        isFloat = true;
        ++k;
        while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])))
          ++k;
      }
      if (k < s.size() && (s[k] == 'e' || s[k] == 'E')) {
        size_t e = k + 1;
        if (e < s.size() && (s[e] == '+' || s[e] == '-'))
          ++e;
        if (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) {
          isFloat = true;
          k = e;
          while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])))
            ++k;
        }
      }
      std::string num;
      for (size_t q = b; q < k; ++q)
        if (s[q] != '_')
          num += s[q];
      toks.push_back({isFloat ? Tok::Float : Tok::Int, num});
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string v;
      ++k;
      bool closed = false;
      while (k < s.size()) {
        char d = s[k++];
        if (d == c) {
          closed = true;
          break;
        }
        if (d == '\\' && k < s.size()) {
          char e = s[k++];
          switch (e) {
          case 'n':
            v += '\n';
            break;
          case 't':
            v += '\t';
            break;
          case 'r':
            v += '\r';
            break;
          case '\\':
            v += '\\';
            break;
          case '\'':
            v += '\'';
            break;
          case '"':
            v += '"';
            break;
          case '\n':
            break;
          case 'a':
            v += '\a';
            break;
          case 'b':
            v += '\b';
            break;
          case 'f':
            v += '\f';
            break;
          case 'v':
            v += '\v';
            break;
          case 'x':
          case 'u':
          case 'U':
          case '0':
          case '1':
          case '2':
          case '3':
          case '4':
          case '5':
          case '6':
          case '7':
            k = codePointEscape(s, k - 1, e, v, line);
            break;
          case 'N':
            fail(line, "unsupported escape \\N{...} in a string literal "
                       "(write the character itself)");
          default:
            v += '\\';
            v += e;
          }
          continue;
        }
        v += d;
      }
      if (!closed)
        fail(line, "unterminated string literal");
      toks.push_back({Tok::String, v});
      continue;
    }
    static const char *ops[] = {
        "//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
        ">",  "(",  ")",  "[",  "]",  "{",  "}", ",", ".", ":", "|", "="};
    bool matched = false;
    for (const char *op : ops) {
      size_t n = std::strlen(op);
      if (s.compare(k, n, op) == 0) {
        toks.push_back({Tok::Op, op});
        k += n;
        matched = true;
        break;
      }
    }
    if (!matched)
      fail(line, std::string("unexpected character '") + c + "'");
  }
  toks.push_back({Tok::End, ""});
  return toks;
}

} // namespace mtc::tok::jinja
