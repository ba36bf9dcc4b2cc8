//===- mtc-run.cpp - The runtime-only trainer -------------------*- C++ -*-===//
//
// Part of mtc. `mtc-run train|generate ...`: `mtc train` and `mtc generate`
// for bundles compiled elsewhere (`mtc compile MODEL.mt ... -o MODEL.mtb`),
// with the same flags and behaviour, linked without the compiler (no MLIR,
// LLVM or ANTLR), so that it runs on a machine without the toolchain, such as
// a GPU machine (docs/cuda.md, "Running the checks on a GPU machine").
//
//===----------------------------------------------------------------------===//

#include "runtime/driver/CommandLine.h"
#include "runtime/driver/TrainCommand.h"

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

const mtc::driver::Tool kTool = {"mtc-run", /*compiles=*/false};

struct Command {
  const char *name;
  std::string usage;
  std::string summary;
  const char *details; ///< more help after the usage, or nullptr
};

const Command kCommands[] = {
    {"train", mtc::driver::trainUsage(kTool), mtc::driver::trainSummary(kTool),
     mtc::driver::trainDetails()},
    {"generate", mtc::driver::generateUsage(kTool),
     mtc::driver::generateSummary(), nullptr},
    {"help", "mtc-run help [COMMAND]", "show this list, or one command's usage",
     nullptr},
};

const Command *findCommand(const std::string &name) {
  for (const Command &c : kCommands)
    if (name == c.name)
      return &c;
  return nullptr;
}

void printUsage(std::ostream &os) {
  os << "mtc-run - train and sample compiled mtc bundles (no compiler "
        "needed)\n\n"
        "usage: mtc-run <command> [options]\n\ncommands:\n";
  for (const Command &c : kCommands)
    os << "  " << c.name << std::string(10 - std::strlen(c.name), ' ')
       << c.summary << "\n";
  os << "\nBundles come from `mtc compile MODEL.mt ... -o MODEL.mtb` (with "
        "--device-memory SIZE\n--batch N --seq N for a step plan; --device "
        "cuda for the CUDA backend).\nRun 'mtc-run help COMMAND' for a "
        "command's options.\n";
}

void printHelp(const Command &c, bool withSummary) {
  std::cout << "usage: " << c.usage << "\n";
  if (withSummary)
    std::cout << c.summary << "\n";
  if (c.details)
    std::cout << "\n" << c.details << "\n";
}

int error(const std::string &message) {
  std::cerr << "mtc-run: error: " << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    printUsage(std::cerr);
    return 1;
  }
  std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (name == "--help" || name == "-h") {
    printUsage(std::cout);
    return 0;
  }
  if (name == "help") {
    if (args.empty()) {
      printUsage(std::cout);
      return 0;
    }
    const Command *c = findCommand(args[0]);
    if (!c)
      return error("unknown command '" + args[0] + "'");
    printHelp(*c, /*withSummary=*/true);
    return 0;
  }
  const Command *command = findCommand(name);
  if (!command) {
    std::cerr << "mtc-run: error: unknown command '" << name << "'";
    if (name == "compile" || name == "plan" || name == "gradcheck" ||
        name == "import-hf" || name == "export-hf" || name == "tokenize")
      std::cerr << " (mtc-run trains and samples bundles; `mtc " << name
                << "` needs the compiler's build of mtc)";
    std::cerr << "\n\n";
    printUsage(std::cerr);
    return 1;
  }
  if (mtc::driver::wantsHelp(args)) {
    printHelp(*command, /*withSummary=*/false);
    return 0;
  }
  if (name == "generate")
    return mtc::driver::runGenerateCommand(kTool, args, std::cout, std::cerr);
  mtc::driver::TrainCommand cmd;
  if (mtc::Status st = mtc::driver::parseTrainCommand(kTool, args, cmd);
      !st.ok())
    return error(st.message());
  return mtc::driver::trainBundle(kTool, cmd, std::cout, std::cerr);
}
