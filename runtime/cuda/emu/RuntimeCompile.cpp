//===- RuntimeCompile.cpp - CUDA C compiled for the emulator at run time --===//
//
// Part of mtc. See RuntimeCompile.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/emu/RuntimeCompile.h"

#include "runtime/cuda/emu/KernelRegistry.h"
#include "runtime/cuda/emu/Wrap.h"
#include "runtime/cuda/kernels/KernelSources.h"

#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <mutex>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MTC_CUDA_EMU_CXX
#define MTC_CUDA_EMU_CXX "c++"
#endif
#ifndef MTC_CUDA_EMU_SOURCE_ROOT
#define MTC_CUDA_EMU_SOURCE_ROOT ""
#endif

namespace mtc::emu {

namespace {

std::string envOr(const char *name, const char *dflt) {
  const char *v = std::getenv(name);
  return v && *v ? v : dflt;
}

bool writeFile(const std::string &path, const std::string &text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  return static_cast<bool>(f);
}

std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Runs \p argv with stdout and stderr into \p logPath; its exit status, or
/// -1 when it could not be started.
int run(const std::vector<std::string> &argv, const std::string &logPath) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    FILE *log = std::fopen(logPath.c_str(), "w");
    if (log) {
      dup2(fileno(log), 1);
      dup2(fileno(log), 2);
    }
    std::vector<char *> args;
    for (const std::string &a : argv)
      args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s\n", args[0]);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Removes the temporary directory's files and the directory.
void removeAll(const std::string &dir, const std::vector<std::string> &files) {
  for (const std::string &f : files)
    std::remove((dir + "/" + f).c_str());
  rmdir(dir.c_str());
}

} // namespace

Status compileAndRegister(const std::string &module, const std::string &text) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (!registeredKernels(module).empty())
    return Status::success();
  std::string where = module + ": compiling for the CUDA emulator: ";
  std::string root = envOr("MTC_CUDA_EMU_SOURCE", MTC_CUDA_EMU_SOURCE_ROOT);
  std::string include = root + "/runtime/cuda/emu/include";
  struct stat st;
  if (root.empty() || stat((include + "/cuda_emu.h").c_str(), &st) != 0)
    return Status::error(where + "no emulator headers at '" + include +
                         "/cuda_emu.h' (set MTC_CUDA_EMU_SOURCE to a "
                         "checkout of mtc)");
  std::string tmp = envOr("TMPDIR", "/tmp") + "/mtc-emu-XXXXXX";
  if (!mkdtemp(tmp.data()))
    return Status::error(where + "cannot create a directory under " +
                         envOr("TMPDIR", "/tmp"));
  std::vector<std::string> files;
  auto put = [&](const std::string &name, const std::string &content) {
    files.push_back(name);
    return writeFile(tmp + "/" + name, content);
  };
  bool ok = put(module, text);
  for (const auto &[name, header] : cuda::libraryKernelHeaders())
    ok = ok && put(name, header);
  Expected<std::string> wrapper =
      wrapKernelSource(text, tmp + "/" + module, module);
  if (!wrapper) {
    removeAll(tmp, files);
    return Status::error(where + wrapper.message());
  }
  ok = ok && put("wrapper.cpp", *wrapper);
  if (!ok) {
    removeAll(tmp, files);
    return Status::error(where + "cannot write to " + tmp);
  }
  std::string cxx = envOr("MTC_CUDA_EMU_CXX", MTC_CUDA_EMU_CXX);
  files.push_back("kernels.so");
  files.push_back("log.txt");
  int rc =
      run({cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-w", "-I" + include,
           "-I" + root, "-o", tmp + "/kernels.so", tmp + "/wrapper.cpp"},
          tmp + "/log.txt");
  if (rc != 0) {
    std::string log = readFile(tmp + "/log.txt");
    removeAll(tmp, files);
    if (log.size() > 4000)
      log = log.substr(0, 4000) + "\n...";
    return Status::error(
        where + cxx + (rc == 127 || rc < 0 ? " could not be run" : " failed") +
        " (set MTC_CUDA_EMU_CXX to a C++17 compiler):\n" + log);
  }
  // Registration happens while the object loads; it stays loaded (its
  // entries are in the process-wide registry).
  void *handle = dlopen((tmp + "/kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string dlError = handle ? "" : dlerror();
  removeAll(tmp, files);
  if (!handle)
    return Status::error(where +
                         "loading the compiled kernels failed: " + dlError);
  if (registeredKernels(module).empty())
    return Status::error(where + "the source has no entry points (`extern "
                                 "\"C\" __global__ void NAME(`)");
  return Status::success();
}

} // namespace mtc::emu
