//===- Diagnostics.cpp - User-facing error reporting ----------------------===//
//
// Part of mtc. Implements DiagnosticEngine (Diagnostics.h).
//
// Columns are 1-based and count characters, not bytes: every byte that is not
// a UTF-8 continuation byte (10xxxxxx) starts a new column, and a tab is one
// column. This matches ANTLR's charPositionInLine (code points), so the caret
// lands under the right character on lines with non-ASCII text. The caret line
// repeats the tabs of the source line so that it lines up in a terminal.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Diagnostics.h"

#include <algorithm>

namespace mtc {

namespace {

/// Source lines longer than this are shown as a window around the column.
constexpr size_t kMaxShownLine = 240;
/// Bytes shown before the column in such a window.
constexpr size_t kWindowBefore = 100;

bool isContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

/// Byte offset in \p line of the character in column \p col (1-based); the
/// size of the line when the column lies beyond its end. Sets \p pad to the
/// number of columns past the end.
size_t byteOffsetOfColumn(const std::string &line, uint32_t col, size_t &pad) {
  uint32_t cur = 1;
  pad = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (isContinuation(static_cast<unsigned char>(line[i])))
      continue;
    if (cur == col)
      return i;
    ++cur;
  }
  pad = col > cur ? col - cur : 0;
  return line.size();
}

/// Moves \p pos back to the first byte of a character.
size_t charStart(const std::string &s, size_t pos) {
  while (pos > 0 && pos < s.size() &&
         isContinuation(static_cast<unsigned char>(s[pos])))
    --pos;
  return pos;
}

/// Replaces control characters (other than tab) so that a terminal shows the
/// line as text; each stays one column wide.
std::string sanitize(const std::string &s) {
  std::string out = s;
  for (char &c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7F)
      c = ' ';
  }
  return out;
}

} // namespace

DiagnosticEngine::DiagnosticEngine(std::string fileName, std::string source,
                                   std::ostream &out)
    : file(std::move(fileName)), text(std::move(source)), os(out) {
  lineStarts.push_back(0);
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n')
      lineStarts.push_back(i + 1);
}

void DiagnosticEngine::error(SourceLoc loc, const std::string &message) {
  ++numErrors;
  if (numPrinted >= kMaxPrinted)
    return;
  ++numPrinted;
  emit("error", loc, message);
}

void DiagnosticEngine::note(SourceLoc loc, const std::string &message) {
  // A note belongs to the error before it: drop it when that was not shown.
  // Printing stops for good at the cap, so the last error was shown exactly
  // when every error was.
  if (numErrors > numPrinted)
    return;
  emit("note", loc, message);
}

void DiagnosticEngine::printSummary() {
  if (numErrors == 0)
    return;
  os << numErrors << (numErrors == 1 ? " error" : " errors") << " generated";
  if (numErrors > numPrinted)
    os << " (the first " << numPrinted << " are shown)";
  os << ".\n";
  os.flush();
}

void DiagnosticEngine::emit(const char *kind, SourceLoc loc,
                            const std::string &message) {
  if (loc.line == 0) {
    os << file << ": " << kind << ": " << message << "\n";
    return;
  }
  os << file << ":" << loc.line << ":";
  if (loc.col != 0)
    os << loc.col << ":";
  os << " " << kind << ": " << message << "\n";

  if (loc.line > lineStarts.size())
    return; // Beyond the end of the file: no source line to show.
  size_t begin = lineStarts[loc.line - 1];
  size_t end =
      loc.line < lineStarts.size() ? lineStarts[loc.line] - 1 : text.size();
  std::string line = text.substr(begin, end - begin);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n'))
    line.pop_back();
  if (loc.col == 0) {
    os << sanitize(line) << "\n";
    return;
  }

  size_t pad = 0;
  size_t caretByte = byteOffsetOfColumn(line, loc.col, pad);
  std::string prefix;
  if (line.size() > kMaxShownLine) {
    // Show a window around the column so that a huge line (minified or
    // generated input) does not flood the terminal.
    size_t from = caretByte > kWindowBefore ? caretByte - kWindowBefore : 0;
    from = charStart(line, from);
    size_t to = charStart(line, std::min(line.size(), from + kMaxShownLine));
    bool more = to < line.size();
    if (from > 0)
      prefix = "...";
    line = prefix + line.substr(from, to - from) + (more ? "..." : "");
    caretByte = caretByte - from + prefix.size();
  }
  os << sanitize(line) << "\n";
  std::string caret;
  for (size_t i = 0; i < caretByte && i < line.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    if (isContinuation(c))
      continue;
    caret += c == '\t' ? '\t' : ' ';
  }
  caret.append(pad, ' ');
  os << caret << "^\n";
}

} // namespace mtc
