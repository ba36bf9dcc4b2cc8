//===- mtc.cpp - The mtc command-line driver --------------------*- C++ -*-===//
//
// Part of mtc. `mtc <command> ...`: one entry point for users. Each command
// parses its own flags; `mtc --help` lists the commands.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/BundleWriter.h"
#include "dialects/mt/MtDialect.h"
#include "frontend/ASTPrinter.h"
#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"
#include "frontend/Sema.h"
#include "frontend/Summary.h"
#include "lib/Support/Diagnostics.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

struct Command {
  const char *name;
  const char *usage;
  const char *summary;
  int (*run)(const std::vector<std::string> &args);
};

int runCompile(const std::vector<std::string> &args);
int runHelp(const std::vector<std::string> &args);

const Command kCommands[] = {
    {"compile",
     "mtc compile MODEL.mt [--emit=ast|mlir|mlir-grad|summary|bundle] "
     "[-o FILE]",
     "check a model; print its AST, IR (mlir-grad: with backward functions) "
     "or parameter summary, or write a bundle (-o model.mtb)",
     runCompile},
    {"help", "mtc help [COMMAND]", "show this list, or one command's usage",
     runHelp},
};

const Command *findCommand(const std::string &name) {
  for (const Command &c : kCommands)
    if (name == c.name)
      return &c;
  return nullptr;
}

void printUsage(std::ostream &os) {
  os << "mtc - compile and train transformer models larger than device "
        "memory\n\n"
        "usage: mtc <command> [options]\n\ncommands:\n";
  for (const Command &c : kCommands)
    os << "  " << c.name << std::string(10 - std::strlen(c.name), ' ')
       << c.summary << "\n";
  os << "\nRun 'mtc help COMMAND' for a command's options.\n";
}

int error(const std::string &message) {
  std::cerr << "mtc: error: " << message << "\n";
  return 1;
}

/// Reads \p path whole, refusing anything that is not a regular file or is
/// larger than the frontend accepts.
bool readSource(const std::string &path, std::string &out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    error("cannot open '" + path + "': " + std::strerror(errno));
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error("'" + path + "' is not a regular file");
    return false;
  }
  if (static_cast<uint64_t>(st.st_size) > mtc::kMaxSourceBytes) {
    error(path + ": file is " + std::to_string(st.st_size) +
          " bytes; model sources are limited to " +
          std::to_string(mtc::kMaxSourceBytes) + " bytes");
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error("cannot open '" + path + "': " + std::strerror(errno));
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

/// Writes \p text to \p path atomically (a temporary file, then rename), or to
/// stdout when \p path is empty or "-".
bool writeOutput(const std::string &path, const std::string &text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    return true;
  }
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      error("cannot write '" + tmp + "': " + std::strerror(errno));
      return false;
    }
    out << text;
    out.flush();
    if (!out) {
      error("cannot write '" + tmp + "': " + std::strerror(errno));
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error("cannot rename '" + tmp + "' to '" + path +
          "': " + std::strerror(errno));
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

int runCompile(const std::vector<std::string> &args) {
  std::string input, output, emit;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a.rfind("--emit=", 0) == 0) {
      emit = a.substr(7);
    } else if (a == "--emit" && i + 1 < args.size()) {
      emit = args[++i];
    } else if (a == "-o" && i + 1 < args.size()) {
      output = args[++i];
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: " << kCommands[0].usage << "\n";
      return 0;
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      return error("compile: unknown option '" + a + "'");
    } else if (input.empty()) {
      input = a;
    } else {
      return error("compile: more than one input file ('" + input + "', '" +
                   a + "')");
    }
  }
  if (input.empty())
    return error("compile: no input file\nusage: " +
                 std::string(kCommands[0].usage));
  if (emit.empty()) {
    bool toBundle = output.size() > 4 &&
                    output.compare(output.size() - 4, 4, ".mtb") == 0;
    emit = toBundle ? "bundle" : "summary";
  }
  if (emit != "ast" && emit != "mlir" && emit != "mlir-grad" &&
      emit != "summary" && emit != "bundle")
    return error("compile: unknown --emit value '" + emit +
                 "' (expected ast, mlir, mlir-grad, summary or bundle)");

  std::string source;
  if (!readSource(input, source))
    return 1;
  mtc::DiagnosticEngine diags(input, source, std::cerr);

  if (emit == "ast") {
    std::optional<mtc::ast::Model> model = mtc::parseModel(diags);
    diags.printSummary();
    if (!model)
      return 1;
    std::ostringstream os;
    mtc::printAST(*model, os);
    return writeOutput(output, os.str()) ? 0 : 1;
  }

  mtc::CheckedModel checked;
  bool ok = mtc::parseAndCheck(diags, checked);
  diags.printSummary();
  if (!ok)
    return 1;

  if (emit == "summary") {
    std::ostringstream os;
    mtc::printSummary(checked, os);
    return writeOutput(output, os.str()) ? 0 : 1;
  }

  mlir::MLIRContext context;
  context.loadDialect<mtc::mt::MtDialect, mlir::func::FuncDialect>();
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    std::string msg;
    llvm::raw_string_ostream ms(msg);
    ms << d;
    mtc::SourceLoc loc;
    if (auto fl = llvm::dyn_cast<mlir::FileLineColLoc>(d.getLocation()))
      loc = {fl.getLine(), fl.getColumn()};
    diags.error(loc, msg);
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mtc::mlirGen(context, checked, input);
  if (!module) {
    diags.printSummary();
    return 1;
  }
  if (emit != "mlir") {
    mlir::PassManager pm(&context);
    mtc::buildTrainingPipeline(pm);
    if (mlir::failed(pm.run(*module))) {
      diags.printSummary();
      return 1;
    }
  }
  std::string text;
  if (emit == "bundle") {
    mtc::bundle::Bundle b;
    if (mlir::failed(mtc::translateToBundle(*module, b))) {
      diags.printSummary();
      return 1;
    }
    text = mtc::bundle::toJson(b);
  } else {
    llvm::raw_string_ostream os(text);
    module->print(os);
    os.flush();
  }
  return writeOutput(output, text) ? 0 : 1;
}

int runHelp(const std::vector<std::string> &args) {
  if (args.empty()) {
    printUsage(std::cout);
    return 0;
  }
  const Command *c = findCommand(args[0]);
  if (!c)
    return error("unknown command '" + args[0] + "'");
  std::cout << "usage: " << c->usage << "\n" << c->summary << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    printUsage(std::cerr);
    return 1;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h") {
    printUsage(std::cout);
    return 0;
  }
  const Command *command = findCommand(name);
  if (!command) {
    std::cerr << "mtc: error: unknown command '" << name << "'\n\n";
    printUsage(std::cerr);
    return 1;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  return command->run(args);
}
