//===- Diagnostics.h - User-facing error reporting --------------*- C++ -*-===//
//
// Part of mtc. Errors that name the file, line and column, print the source
// line and a caret under the column:
//
//   model.mt:12:17: error: shape mismatch in '+': [B, S, 256] and [B, S, 128]
//         x = x + h @ w
//                   ^
//
// Pure C++ (no LLVM), shared by the frontend and the tools.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_LIB_SUPPORT_DIAGNOSTICS_H
#define MTC_LIB_SUPPORT_DIAGNOSTICS_H

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace mtc {

/// A 1-based position in a source file; line 0 means "no position".
struct SourceLoc {
  uint32_t line = 0;
  uint32_t col = 0;
};

/// Collects and prints diagnostics for one source buffer.
class DiagnosticEngine {
public:
  /// \p fileName is printed in every message; \p source is the whole text
  /// (used to print the offending line).
  DiagnosticEngine(std::string fileName, std::string source, std::ostream &out);

  void error(SourceLoc loc, const std::string &message);
  void note(SourceLoc loc, const std::string &message);

  unsigned errorCount() const { return numErrors; }
  bool hasErrors() const { return numErrors != 0; }
  /// After this many errors further ones are counted but not printed.
  static constexpr unsigned kMaxPrinted = 20;
  /// Prints "N errors generated." when there were any (call once at the end).
  void printSummary();

  const std::string &fileName() const { return file; }
  const std::string &source() const { return text; }

private:
  void emit(const char *kind, SourceLoc loc, const std::string &message);

  std::string file;
  std::string text;
  std::vector<size_t> lineStarts;
  std::ostream &os;
  unsigned numErrors = 0;
  unsigned numPrinted = 0;
};

} // namespace mtc

#endif // MTC_LIB_SUPPORT_DIAGNOSTICS_H
