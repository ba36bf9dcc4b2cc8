//===- Wrap.cpp - CUDA C source as host C++ for the emulator --------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/emu/Wrap.h"

#include <regex>
#include <sstream>

namespace mtc::emu {

std::vector<std::string> kernelEntryPoints(const std::string &text) {
  static const std::regex entry(
      R"(extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*\()");
  std::vector<std::string> names;
  for (std::sregex_iterator it(text.begin(), text.end(), entry), end; it != end;
       ++it)
    names.push_back((*it)[1]);
  return names;
}

Expected<std::string> wrapKernelSource(const std::string &text,
                                       const std::string &path,
                                       const std::string &module) {
  static const std::regex shared(R"(extern\s+__shared__)");
  static const std::regex array(R"(([A-Za-z_][A-Za-z0-9_]*)\s*\[\s*\])");
  std::ostringstream out;
  out << "// Generated (runtime/cuda/emu/Wrap.h): " << module
      << " compiled as host C++ for the CUDA emulator.\n"
      << "#include \"cuda_emu.h\"\n";
  std::istringstream lines(text);
  int lineNo = 0;
  for (std::string line; std::getline(lines, line);) {
    ++lineNo;
    if (!std::regex_search(line, shared))
      continue;
    std::smatch m;
    if (!std::regex_search(line, m, array))
      return Status::error(path + ":" + std::to_string(lineNo) +
                           ": no array name in '" + line +
                           "' (write `extern __shared__ T name[];` on one "
                           "line)");
    out << "#define " << m[1] << " MTC_EMU_DYNAMIC_SHARED\n";
  }
  out << "#include \"" << path << "\"\n"
      << "#include \"runtime/cuda/emu/KernelRegistry.h\"\n";
  for (const std::string &name : kernelEntryPoints(text))
    out << "static const mtc::emu::KernelRegistration mtc_emu_registration_"
        << name << "(\"" << module << "\", \"" << name << "\", &" << name
        << ");\n";
  return out.str();
}

} // namespace mtc::emu
