//===- mtc-cuda-emu-wrap.cpp - The emulator wrapper of a .cu file ---------===//
//
// Part of mtc. A build tool: `mtc-cuda-emu-wrap IN.cu OUT.cpp [MODULE]`
// writes the host-C++ wrapper of IN.cu for the CUDA emulator
// (runtime/cuda/emu/Wrap.h; MODULE defaults to IN's file name). OUT is only
// rewritten when its text changes.
//
//===----------------------------------------------------------------------===//

#include "lib/Support/Files.h"
#include "runtime/cuda/emu/Wrap.h"

#include <cstdio>
#include <fstream>
#include <string>

int main(int argc, char **argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: mtc-cuda-emu-wrap IN.cu OUT.cpp [MODULE]\n");
    return 2;
  }
  std::string in = argv[1], outPath = argv[2];
  std::string module =
      argc == 4 ? argv[3] : in.substr(in.find_last_of('/') + 1);
  mtc::Expected<std::string> text = mtc::readRegularFile(in);
  if (!text) {
    std::fprintf(stderr, "mtc-cuda-emu-wrap: %s\n", text.message().c_str());
    return 1;
  }
  mtc::Expected<std::string> wrapper =
      mtc::emu::wrapKernelSource(*text, in, module);
  if (!wrapper) {
    std::fprintf(stderr, "%s\n", wrapper.message().c_str());
    return 1;
  }
  if (mtc::Expected<std::string> old = mtc::readRegularFile(outPath);
      old && *old == *wrapper)
    return 0;
  std::ofstream out(outPath, std::ios::binary | std::ios::trunc);
  out << *wrapper;
  out.close();
  if (!out) {
    std::fprintf(stderr, "mtc-cuda-emu-wrap: cannot write %s\n",
                 outPath.c_str());
    return 1;
  }
  return 0;
}
