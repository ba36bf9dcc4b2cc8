//===- DiagnosticsTest.cpp - Unit tests of DiagnosticEngine ---------------===//
//
// Part of mtc. The message format, the source line and caret, and the edge
// cases (no location, beyond the end, tabs, non-ASCII text, the error cap).
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Diagnostics.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace mtc;

namespace {

std::string render(const std::string &source, SourceLoc loc,
                   const std::string &message = "bad") {
  std::ostringstream os;
  DiagnosticEngine diags("f.mt", source, os);
  diags.error(loc, message);
  return os.str();
}

TEST(DiagnosticsTest, LineAndCaret) {
  EXPECT_EQ(render("model M {\n  x = a + b\n}\n", {2, 9}, "oops"),
            "f.mt:2:9: error: oops\n"
            "  x = a + b\n"
            "        ^\n");
}

TEST(DiagnosticsTest, FirstAndLastLine) {
  EXPECT_EQ(render("abc", {1, 1}), "f.mt:1:1: error: bad\nabc\n^\n");
  EXPECT_EQ(render("a\nxyz", {2, 3}), "f.mt:2:3: error: bad\nxyz\n  ^\n");
}

TEST(DiagnosticsTest, NoLocation) {
  EXPECT_EQ(render("abc\n", {0, 0}, "file is too large"),
            "f.mt: error: file is too large\n");
}

TEST(DiagnosticsTest, TabsAreKept) {
  EXPECT_EQ(render("\tx = \ty\n", {1, 7}), "f.mt:1:7: error: bad\n"
                                           "\tx = \ty\n"
                                           "\t    \t^\n");
}

TEST(DiagnosticsTest, CRLFIsStripped) {
  EXPECT_EQ(render("ab\r\ncd\r\n", {1, 2}), "f.mt:1:2: error: bad\nab\n ^\n");
}

TEST(DiagnosticsTest, NonAsciiColumnsCountCharacters) {
  // 'é' is two bytes but one column.
  EXPECT_EQ(render("# é x\n", {1, 5}), "f.mt:1:5: error: bad\n# é x\n    ^\n");
}

TEST(DiagnosticsTest, BeyondTheEnd) {
  // Column past the end of the line: the caret goes there.
  EXPECT_EQ(render("ab\n", {1, 5}), "f.mt:1:5: error: bad\nab\n    ^\n");
  // Line past the end of the file: no source line.
  EXPECT_EQ(render("ab\n", {7, 1}), "f.mt:7:1: error: bad\n");
  // The empty line after the final newline.
  EXPECT_EQ(render("ab\n", {2, 1}), "f.mt:2:1: error: bad\n\n^\n");
}

TEST(DiagnosticsTest, EmptyFile) {
  EXPECT_EQ(render("", {1, 1}), "f.mt:1:1: error: bad\n\n^\n");
  EXPECT_EQ(render("", {3, 4}), "f.mt:3:4: error: bad\n");
}

TEST(DiagnosticsTest, ControlCharactersAreBlanked) {
  std::string src("a\0b\x01", 4);
  EXPECT_EQ(render(src, {1, 3}), "f.mt:1:3: error: bad\na b \n  ^\n");
}

TEST(DiagnosticsTest, LongLinesAreWindowed) {
  std::string line(1000, 'a');
  line[600] = 'X';
  std::string out = render(line, {1, 601});
  std::istringstream in(out);
  std::string header, shown, caret;
  std::getline(in, header);
  std::getline(in, shown);
  std::getline(in, caret);
  EXPECT_EQ(header, "f.mt:1:601: error: bad");
  EXPECT_LT(shown.size(), 300u);
  EXPECT_EQ(shown.substr(0, 3), "...");
  ASSERT_EQ(caret.back(), '^');
  EXPECT_EQ(shown[caret.size() - 1], 'X');
}

TEST(DiagnosticsTest, Notes) {
  std::ostringstream os;
  DiagnosticEngine diags("f.mt", "a {\n}\n", os);
  diags.error({2, 1}, "unexpected '}'");
  diags.note({1, 3}, "to match this '{'");
  EXPECT_EQ(os.str(), "f.mt:2:1: error: unexpected '}'\n}\n^\n"
                      "f.mt:1:3: note: to match this '{'\na {\n  ^\n");
  EXPECT_EQ(diags.errorCount(), 1u);
}

TEST(DiagnosticsTest, CountsAndSummary) {
  std::ostringstream os;
  DiagnosticEngine diags("f.mt", "", os);
  EXPECT_FALSE(diags.hasErrors());
  diags.printSummary();
  EXPECT_EQ(os.str(), "");
  diags.error({}, "one");
  EXPECT_TRUE(diags.hasErrors());
  diags.printSummary();
  EXPECT_EQ(os.str(), "f.mt: error: one\n1 error generated.\n");

  std::ostringstream os3;
  DiagnosticEngine three("f.mt", "", os3);
  for (int i = 0; i < 3; ++i)
    three.error({}, "e");
  three.printSummary();
  EXPECT_NE(os3.str().find("3 errors generated.\n"), std::string::npos);
}

TEST(DiagnosticsTest, CapOnPrintedErrors) {
  std::ostringstream os;
  DiagnosticEngine diags("f.mt", "", os);
  unsigned total = DiagnosticEngine::kMaxPrinted + 5;
  for (unsigned i = 0; i < total; ++i) {
    diags.error({}, "e" + std::to_string(i));
    diags.note({}, "n" + std::to_string(i));
  }
  EXPECT_EQ(diags.errorCount(), total);
  std::string out = os.str();
  unsigned last = DiagnosticEngine::kMaxPrinted - 1;
  EXPECT_NE(out.find("error: e" + std::to_string(last) + "\n"),
            std::string::npos);
  EXPECT_NE(out.find("note: n" + std::to_string(last) + "\n"),
            std::string::npos);
  // Neither the errors past the cap nor their notes are printed.
  EXPECT_EQ(out.find("error: e" + std::to_string(last + 1) + "\n"),
            std::string::npos);
  EXPECT_EQ(out.find("note: n" + std::to_string(last + 1) + "\n"),
            std::string::npos);
  diags.printSummary();
  EXPECT_NE(os.str().find(std::to_string(total) + " errors generated"),
            std::string::npos);
}

TEST(DiagnosticsTest, Accessors) {
  std::ostringstream os;
  DiagnosticEngine diags("x.mt", "text", os);
  EXPECT_EQ(diags.fileName(), "x.mt");
  EXPECT_EQ(diags.source(), "text");
}

} // namespace
