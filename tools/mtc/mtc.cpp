//===- mtc.cpp - The mtc command-line driver --------------------*- C++ -*-===//
//
// Part of mtc. `mtc <command> ...`: one entry point for users. Each command
// parses its own flags; `mtc --help` lists the commands.
//
//===----------------------------------------------------------------------===//

#include "compiler/Driver/CompileModel.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Target/BundleWriter.h"
#include "dialects/mt/MtDialect.h"
#include "frontend/ASTPrinter.h"
#include "frontend/MLIRGen.h"
#include "frontend/Parser.h"
#include "frontend/Sema.h"
#include "frontend/Summary.h"
#include "lib/Support/Diagnostics.h"
#include "runtime/driver/GradCheck.h"

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
int runGradCheck(const std::vector<std::string> &args);

const Command kCommands[] = {
    {"compile",
     "mtc compile MODEL.mt [--emit=ast|mlir|mlir-grad|summary|bundle] "
     "[-o FILE]",
     "check a model; print its AST, IR (mlir-grad: with backward functions) "
     "or parameter summary, or write a bundle (-o model.mtb)",
     runCompile},
    {"gradcheck",
     "mtc gradcheck MODEL.mt|MODEL.mtb [--batch N] [--seq N] [--seed N] "
     "[--set NAME=VALUE]... [--tolerance X] [--step X]",
     "compare the compiled gradients with finite differences on a small "
     "random instance",
     runGradCheck},
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

/// Parses a non-negative integer flag value; prints an error otherwise.
bool parseInt(const std::string &flag, const std::string &text, int64_t &out,
              int64_t min = 1) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || end == text.c_str() || *end != '\0' || v < min) {
    error(flag + " expects an integer >= " + std::to_string(min) + ", got '" +
          text + "'");
    return false;
  }
  out = v;
  return true;
}

bool parseDouble(const std::string &flag, const std::string &text,
                 double &out) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  if (errno || end == text.c_str() || *end != '\0' || !(v > 0)) {
    error(flag + " expects a positive number, got '" + text + "'");
    return false;
  }
  out = v;
  return true;
}

int runGradCheck(const std::vector<std::string> &args) {
  std::string input;
  mtc::ConfigOverrides overrides;
  mtc::driver::GradCheckOptions opts;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= args.size()) {
        error("gradcheck: " + a + " needs a value");
        return false;
      }
      out = args[++i];
      return true;
    };
    std::string v;
    int64_t n;
    if (a == "--batch" || a == "--seq" || a == "--seed") {
      if (!value(v) || !parseInt(a, v, n, a == "--seed" ? 0 : 1))
        return 1;
      if (a == "--batch")
        opts.batch = n;
      else if (a == "--seq")
        opts.seq = n;
      else
        opts.seed = static_cast<uint64_t>(n);
    } else if (a == "--tolerance" || a == "--step") {
      if (!value(v) ||
          !parseDouble(a, v, a == "--tolerance" ? opts.tolerance : opts.step))
        return 1;
    } else if (a == "--set") {
      std::string err;
      if (!value(v))
        return 1;
      if (!mtc::parseConfigOverride(v, overrides, err))
        return error("gradcheck: --set: " + err);
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: " << findCommand("gradcheck")->usage << "\n";
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return error("gradcheck: unknown option '" + a + "'");
    } else if (input.empty()) {
      input = a;
    } else {
      return error("gradcheck: more than one model ('" + input + "', '" + a +
                   "')");
    }
  }
  if (input.empty())
    return error("gradcheck: no model given\nusage: " +
                 std::string(findCommand("gradcheck")->usage));
  mtc::bundle::Bundle b;
  if (!mtc::loadModel(input, overrides, std::cerr, b))
    return 1;
  int failures = mtc::driver::gradCheck(b, opts, std::cout);
  return failures == 0 ? 0 : 1;
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
