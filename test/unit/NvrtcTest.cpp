//===- NvrtcTest.cpp - Unit tests of runtime/cuda (NVRTC, kernel cache) ---===//
//
// Part of mtc. NVRTC loaded with dlopen compiles CUDA C to PTX and cubin for
// sm_80 and sm_90 without a GPU; ptxas statistics are parsed; compile errors
// carry NVRTC's log; the disk cache hits, keys on what changes the output and
// recompiles damaged entries. Skipped, with a message, where NVRTC is absent.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Nvrtc.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/KernelCache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace mtc;
using namespace mtc::cuda;

namespace {

const char *kScale = R"(
extern "C" __global__ void scale(float *x, int n, float a) {
  __shared__ float tile[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n)
    x[i] = a * tile[threadIdx.x ^ 1];
}
)";

std::shared_ptr<const Nvrtc> nvrtcOrSkip() {
  Expected<std::shared_ptr<const Nvrtc>> n = Nvrtc::load();
  if (!n.ok())
    return nullptr;
  return *n;
}

#define REQUIRE_NVRTC(n)                                                       \
  auto n = nvrtcOrSkip();                                                      \
  if (!n)                                                                      \
    GTEST_SKIP() << "NVRTC not available: " << Nvrtc::load().message();

std::string tempDir() {
  // mkdtemp: a directory left behind by an earlier process with the same
  // pid is never reused.
  std::string d = ::testing::TempDir() + "mtc-nvrtc-XXXXXX";
  if (!::mkdtemp(d.data()))
    ADD_FAILURE() << "mkdtemp " << d << " failed";
  return d;
}

} // namespace

TEST(Nvrtc, ParsesPtxasStatistics) {
  std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z1tILi3EEvPf' for 'sm_80'\n"
      "ptxas info    : Function properties for _Z1tILi3EEvPf\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 "
      "bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers, 360 bytes "
      "cmem[0]\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_80'\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 "
      "bytes spill loads\n"
      "ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem, "
      "364 bytes cmem[0]\n";
  std::vector<KernelStats> s = parsePtxasLog(log);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "_Z1tILi3EEvPf");
  EXPECT_EQ(s[0].registers, 40);
  EXPECT_EQ(s[0].stackBytes, 16);
  EXPECT_EQ(s[0].spillStores, 8);
  EXPECT_EQ(s[0].spillLoads, 12);
  EXPECT_EQ(s[0].sharedBytes, 0);
  EXPECT_EQ(s[0].constantBytes, 360);
  EXPECT_EQ(s[1].name, "k");
  EXPECT_EQ(s[1].registers, 10);
  EXPECT_EQ(s[1].sharedBytes, 256);
}

TEST(Nvrtc, MissingLibraryIsAClearError) {
  ::setenv("MTC_NVRTC", "/nonexistent/libnvrtc.so", 1);
  Expected<DynamicLibrary> lib =
      DynamicLibrary::open({"libnvrtc.so.13"}, "MTC_NVRTC");
  ::unsetenv("MTC_NVRTC");
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.message().rfind("/nonexistent/libnvrtc.so not found", 0), 0u)
      << lib.message();
  Expected<DynamicLibrary> none =
      DynamicLibrary::open({"libmtc-absent.so.1", "libmtc-absent.so"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.message().rfind(
                "libmtc-absent.so.1 or libmtc-absent.so not found", 0),
            0u)
      << none.message();
}

TEST(Nvrtc, CompilesForSm80AndSm90WithoutAGpu) {
  REQUIRE_NVRTC(n);
  for (const char *arch : {"sm_80", "sm_90"}) {
    NvrtcOptions o;
    o.arch = arch;
    Expected<CompiledModule> m = n->compile(kScale, "scale.cu", o);
    ASSERT_TRUE(m.ok()) << m.message();
    EXPECT_NE(m->ptx.find(".entry scale"), std::string::npos);
    EXPECT_NE(m->ptx.find(std::string(".target ") + arch), std::string::npos);
    ASSERT_GE(m->cubin.size(), 4u);
    EXPECT_EQ(m->cubin.compare(0, 4, "\177ELF"), 0);
    ASSERT_EQ(m->stats.size(), 1u) << m->log;
    EXPECT_EQ(m->stats[0].name, "scale");
    EXPECT_GT(m->stats[0].registers, 0);
    EXPECT_EQ(m->stats[0].sharedBytes, 512);
    EXPECT_EQ(m->stats[0].spillStores, 0);
  }
  std::vector<std::string> archs = n->supportedArchs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_90"), archs.end());
}

TEST(Nvrtc, CompileErrorsCarryTheLogAndTheName) {
  REQUIRE_NVRTC(n);
  NvrtcOptions o;
  Expected<CompiledModule> m =
      n->compile("__global__ void broken(float *x) { x[0] = undeclared; }",
                 "broken.cu", o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message().rfind("broken.cu: NVRTC failed for sm_90: ", 0), 0u)
      << m.message();
  EXPECT_NE(m.message().find("identifier \"undeclared\" is undefined"),
            std::string::npos)
      << m.message();
}

TEST(KernelCache, HitsKeysAndRejectsDamagedEntries) {
  REQUIRE_NVRTC(n);
  std::string dir = tempDir();
  KernelCache cache(dir);
  NvrtcOptions o;
  o.arch = "sm_80";
  Expected<CompiledModule> first = cache.getOrCompile(*n, kScale, "s.cu", o);
  ASSERT_TRUE(first.ok()) << first.message();
  EXPECT_EQ(cache.misses(), 1);
  Expected<CompiledModule> again = cache.getOrCompile(*n, kScale, "s.cu", o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(again->cubin, first->cubin);
  EXPECT_EQ(again->ptx, first->ptx);
  ASSERT_EQ(again->stats.size(), 1u);
  EXPECT_EQ(again->stats[0].registers, first->stats[0].registers);

  // Another arch, option or source is another entry.
  NvrtcOptions o90 = o;
  o90.arch = "sm_90";
  NvrtcOptions portable = o;
  portable.extra = {"-DMTC_CUDA_PORTABLE"};
  uint64_t k = KernelCache::key(*n, kScale, o);
  EXPECT_NE(k, KernelCache::key(*n, kScale, o90));
  EXPECT_NE(k, KernelCache::key(*n, kScale, portable));
  EXPECT_NE(k, KernelCache::key(*n, std::string(kScale) + " ", o));

  // One flipped byte in the entry: rejected, compiled again, replaced.
  std::string path = cache.entryPath(k);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-10, std::ios::end);
    char c;
    f.get(c);
    f.seekp(-10, std::ios::end);
    f.put(static_cast<char>(c ^ 1));
  }
  Expected<CompiledModule> repaired = cache.getOrCompile(*n, kScale, "s.cu", o);
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(cache.rejected(), 1);
  EXPECT_EQ(repaired->cubin, first->cubin);
  // A truncated entry too.
  std::filesystem::resize_file(path, 20);
  Expected<CompiledModule> again2 = cache.getOrCompile(*n, kScale, "s.cu", o);
  ASSERT_TRUE(again2.ok());
  EXPECT_EQ(cache.rejected(), 2);
  Expected<CompiledModule> hit = cache.getOrCompile(*n, kScale, "s.cu", o);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(cache.hits(), 2);

  // Compile errors are not cached.
  Expected<CompiledModule> bad =
      cache.getOrCompile(*n, "__global__ void b() { nope; }", "b.cu", o);
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(std::filesystem::exists(cache.entryPath(
      KernelCache::key(*n, "__global__ void b() { nope; }", o))));
}

TEST(KernelCache, DefaultDirectory) {
  const char *home = std::getenv("HOME");
  std::string savedHome = home ? home : "";
  ::setenv("MTC_CACHE_DIR", "/x/mtc-cache", 1);
  EXPECT_EQ(KernelCache::defaultDirectory(), "/x/mtc-cache");
  ::unsetenv("MTC_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/y", 1);
  EXPECT_EQ(KernelCache::defaultDirectory(), "/y/mtc");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(KernelCache::defaultDirectory(), "/home/u/.cache/mtc");
  if (home)
    ::setenv("HOME", savedHome.c_str(), 1);
}

TEST(CudaDriver, WithoutAGpuTheErrorSaysSo) {
  Expected<std::shared_ptr<const CudaDriverApi>> d = loadCudaDriver();
  if (d.ok())
    GTEST_SKIP() << "a CUDA driver is present (" << (*d)->where << ")";
  // Either no libcuda.so.1 at all, or a driver without a device.
  bool noDriver =
      d.message().rfind("no CUDA driver: libcuda.so.1 not found", 0) == 0;
  bool noDevice = d.message().rfind("no CUDA device: ", 0) == 0;
  EXPECT_TRUE(noDriver || noDevice) << d.message();
  // The same answer the second time, without trying again.
  EXPECT_EQ(loadCudaDriver().message(), d.message());
}

#ifdef MTC_CUDA_STUB
TEST(CudaDriver, EverySymbolIsInTheToolkitsDriverStub) {
  // The toolkit's link stub exports the driver's ABI: every name of the
  // table must be there (a misspelt or too-new symbol fails here, not on a
  // GPU machine).
  Expected<DynamicLibrary> stub = DynamicLibrary::open({MTC_CUDA_STUB});
  ASSERT_TRUE(stub.ok()) << stub.message();
  CudaDriverApi api;
  Status st = resolveDriverSymbols(*stub, api);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_NE(api.cuLaunchKernel, nullptr);
}
#endif
