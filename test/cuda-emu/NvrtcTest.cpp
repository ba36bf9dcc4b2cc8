//===- NvrtcTest.cpp - Every CUDA C source through NVRTC ------------------===//
//
// Part of mtc. Compiles the CUDA C the emulator runs -- the demonstration
// kernels (kernels/*.cu) and every library kernel (runtime/cuda/kernels/,
// embedded) -- with NVRTC down to a cubin, so that ptxas checks the inline
// PTX too: the tensor-core / PTX path (what a GPU runs) for sm_80 and sm_90,
// and the portable path (-DMTC_CUDA_PORTABLE, what the emulator executes;
// compiled here only to show it is valid CUDA C) for sm_90 alone. Prints each
// kernel's registers, shared memory, stack and spills, and requires no spills.
// Needs NVRTC (runtime/cuda/Nvrtc, opened with dlopen), not a GPU; skipped with
// the reason where NVRTC or the toolkit's headers are missing.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Nvrtc.h"
#include "runtime/cuda/kernels/KernelSources.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace mtc;
using namespace mtc::cuda;

namespace {

struct Source {
  std::string name, text;
};

/// The demonstration kernels, then the library kernels (headers excluded).
std::vector<Source> sources() {
  std::vector<Source> out;
  std::stringstream list(MTC_CUDA_DEMO_KERNELS);
  for (std::string path; std::getline(list, path, ',');) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    out.push_back({path.substr(path.rfind('/') + 1), text.str()});
  }
  for (const KernelSource &k : libraryKernelSources())
    if (!k.header)
      out.push_back({k.name, k.text});
  return out;
}

class CudaNvrtcTest : public testing::TestWithParam<const char *> {};

/// The one arch the portable path is compiled for: the path never runs on a
/// GPU, and a second arch would double the test's time for nothing.
constexpr const char *kPortableArch = "sm_90";

} // namespace

TEST_P(CudaNvrtcTest, EveryKernelCompilesWithoutSpills) {
  Expected<std::shared_ptr<const Nvrtc>> nvrtc = Nvrtc::load();
  if (!nvrtc)
    GTEST_SKIP() << nvrtc.message();
  Expected<std::string> include = cudaToolkitIncludeDir();
  if (!include)
    GTEST_SKIP() << include.message();
  const std::string arch = GetParam();
  std::printf("%s, %s\n", (*nvrtc)->identity().c_str(), arch.c_str());
  int kernels = 0, spills = 0;
  for (const Source &src : sources()) {
    for (bool portable : {false, true}) {
      if (portable && arch != kPortableArch)
        continue;
      NvrtcOptions o;
      o.arch = arch;
      o.includeDirs = {*include};
      o.headers = libraryKernelHeaders();
      o.extra = {"-lineinfo"};
      if (portable)
        o.extra.push_back("-DMTC_CUDA_PORTABLE");
      Expected<CompiledModule> m = (*nvrtc)->compile(src.text, src.name, o);
      ASSERT_TRUE(m.ok()) << m.message();
      ASSERT_FALSE(m->stats.empty()) << src.name << ": no ptxas statistics in\n"
                                     << m->log;
      for (const KernelStats &s : m->stats) {
        std::printf("  %-16s %-9s %-40s regs=%3d smem=%6lld stack=%4lld "
                    "spill=%lld/%lld\n",
                    src.name.c_str(), portable ? "portable" : "PTX",
                    s.name.c_str(), s.registers, (long long)s.sharedBytes,
                    (long long)s.stackBytes, (long long)s.spillStores,
                    (long long)s.spillLoads);
        EXPECT_GT(s.registers, 0) << s.name;
        EXPECT_EQ(s.spillStores + s.spillLoads, 0)
            << src.name << " " << s.name << " spills on " << arch;
        ++kernels;
        spills += s.spillStores + s.spillLoads > 0;
      }
      // The MTC_CUDA_PORTABLE switch: sgemm's tile loads are cp.async only
      // on the PTX path.
      if (src.name == "sgemm.cu") {
        EXPECT_EQ(m->ptx.find("cp.async") != std::string::npos, !portable)
            << "portable " << portable;
      }
      // attention.cu's bf16 tiles use tensor cores only on the PTX path.
      if (src.name == "attention.cu") {
        EXPECT_EQ(m->ptx.find("mma.sync.aligned.m16n8k16") != std::string::npos,
                  !portable)
            << "portable " << portable;
      }
    }
  }
  std::printf("kernels: %d, spills: %d\n", kernels, spills);
}

INSTANTIATE_TEST_SUITE_P(Arch, CudaNvrtcTest,
                         testing::Values("sm_80", "sm_90"));
