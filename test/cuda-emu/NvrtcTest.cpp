//===- NvrtcTest.cpp - The demonstration kernels through NVRTC ------------===//
//
// Part of mtc. Compiles the CUDA C text the emulator runs (kernels/*.cu) with
// NVRTC for sm_80 and sm_90 -- the tensor-core / PTX path, and the portable
// path (-DMTC_CUDA_PORTABLE) that the emulator executes -- down to a CUBIN,
// so that ptxas checks the inline PTX too. Prints each kernel's registers,
// stack frame and spills (ptxas -v) and requires no spills. Needs the CUDA
// toolkit (NVRTC), not a GPU; built only when CMake finds the toolkit.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include <nvrtc.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> kernelFiles() {
  std::vector<std::string> files;
  std::stringstream list(MTC_CUDA_KERNELS);
  for (std::string f; std::getline(list, f, ',');)
    files.push_back(f);
  return files;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Compiled {
  bool ok = false;
  std::string log, ptx;
  size_t cubinBytes = 0;
};

Compiled compile(const std::string &path, const std::string &arch,
                 bool portable) {
  Compiled out;
  std::string source = readFile(path);
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, source.c_str(), path.c_str(), 0, nullptr,
                         nullptr) != NVRTC_SUCCESS) {
    out.log = "nvrtcCreateProgram failed";
    return out;
  }
  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "-std=c++17",
                                   "--include-path=" MTC_CUDA_INCLUDE_DIR,
                                   "--ptxas-options=-v", "-lineinfo"};
  if (portable)
    opts.push_back("-DMTC_CUDA_PORTABLE");
  std::vector<const char *> argv;
  for (const std::string &o : opts)
    argv.push_back(o.c_str());
  nvrtcResult r =
      nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  out.log.resize(n);
  nvrtcGetProgramLog(prog, out.log.data());
  if (r == NVRTC_SUCCESS) {
    nvrtcGetCUBINSize(prog, &out.cubinBytes);
    size_t ptxBytes = 0;
    if (nvrtcGetPTXSize(prog, &ptxBytes) == NVRTC_SUCCESS) {
      out.ptx.resize(ptxBytes);
      nvrtcGetPTX(prog, out.ptx.data());
    }
    out.ok = out.cubinBytes > 0;
  }
  nvrtcDestroyProgram(&prog);
  return out;
}

/// One kernel's ptxas -v statistics.
struct Stats {
  std::string kernel;
  int registers = -1;
  int stackBytes = 0, spillStores = 0, spillLoads = 0;
};

std::vector<Stats> parsePtxasLog(const std::string &log) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(R"((\d+) bytes stack frame, )"
                                R"((\d+) bytes spill stores, )"
                                R"((\d+) bytes spill loads)");
  static const std::regex regs(R"(Used (\d+) registers)");
  std::vector<Stats> stats;
  std::stringstream lines(log);
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, entry)) {
      stats.push_back(Stats{m[1], -1, 0, 0, 0});
    } else if (!stats.empty() && std::regex_search(line, m, frame)) {
      stats.back().stackBytes = std::stoi(m[1]);
      stats.back().spillStores = std::stoi(m[2]);
      stats.back().spillLoads = std::stoi(m[3]);
    } else if (!stats.empty() && std::regex_search(line, m, regs)) {
      stats.back().registers = std::stoi(m[1]);
    }
  }
  return stats;
}

class CudaNvrtcTest : public testing::TestWithParam<const char *> {};

} // namespace

TEST_P(CudaNvrtcTest, DemonstrationKernelsCompile) {
  const std::string arch = GetParam();
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  std::printf("NVRTC %d.%d, %s\n", major, minor, arch.c_str());
  for (const std::string &path : kernelFiles()) {
    std::string name = path.substr(path.rfind('/') + 1);
    for (bool portable : {false, true}) {
      Compiled c = compile(path, arch, portable);
      ASSERT_TRUE(c.ok) << name << (portable ? " (portable)" : "") << ":\n"
                        << c.log;
      std::vector<Stats> stats = parsePtxasLog(c.log);
      ASSERT_FALSE(stats.empty()) << name << ": no ptxas statistics in\n"
                                  << c.log;
      for (const Stats &s : stats) {
        std::printf("  %-12s %-9s %-18s %3d registers, %4d bytes stack, "
                    "spills %d/%d bytes (stores/loads), cubin %zu bytes\n",
                    name.c_str(), portable ? "portable" : "PTX",
                    s.kernel.c_str(), s.registers, s.stackBytes, s.spillStores,
                    s.spillLoads, c.cubinBytes);
        EXPECT_GT(s.registers, 0) << s.kernel;
        EXPECT_EQ(s.spillStores + s.spillLoads, 0)
            << name << " " << s.kernel << " spills on " << arch;
      }
      // The MTC_CUDA_PORTABLE switch: sgemm's tile loads are cp.async only
      // on the PTX path.
      if (name == "sgemm.cu") {
        ASSERT_FALSE(c.ptx.empty());
        EXPECT_EQ(c.ptx.find("cp.async") != std::string::npos, !portable)
            << "portable " << portable;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Arch, CudaNvrtcTest,
                         testing::Values("sm_80", "sm_90"));
