//===- SanitizerTest.cpp - Memory errors in kernels are failing tests -----===//
//
// Part of mtc. The kernels of kernels/faults.cu each make one memory error;
// run in a death test, the sanitizer build of the emulator must report it
// with the kernel source line: AddressSanitizer for dynamic shared and
// global memory (both exactly sized heap allocations), UBSan for static
// shared arrays (indexed out of bounds) and misaligned vector accesses, the
// guard page for a thread's stack overflow. The emulator adds the kernel,
// block and thread to the report.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "cuda_emu.h"
#include "runtime/cuda/emu/Emulator.h"

#include <fstream>
#include <string>
#include <vector>

extern "C" {
void fault_dynamic_shared(float *out, int n);
void fault_global(float *out, int n);
void fault_static_shared(float *out);
void fault_misaligned(const float *in, float *out);
void fault_stack_overflow(int *out);

/// Symbolized reports (file:line) need llvm-symbolizer, wherever the test
/// runs from.
const char *__asan_default_options() {
  return "external_symbolizer_path=" MTC_LLVM_SYMBOLIZER;
}
const char *__ubsan_default_options() { return "print_stacktrace=1"; }
}

namespace emu = mtc::emu;

namespace {

/// "faults.cu:LINE" of the line marked "FAULT: name" in kernels/faults.cu.
std::string faultLine(const std::string &name) {
  std::ifstream in(MTC_SOURCE_DIR "/test/cuda-emu/kernels/faults.cu");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find("FAULT: " + name) != std::string::npos)
      return "faults.cu:" + std::to_string(n);
  ADD_FAILURE() << "no FAULT: " << name << " in faults.cu";
  return "faults.cu:?";
}

class CudaSanitizerTest : public testing::Test {
protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

} // namespace

TEST_F(CudaSanitizerTest, DynamicSharedMemoryOverflowIsReported) {
  std::vector<float> out(32);
  // In bounds: reads dyn[31] of 32 floats.
  ASSERT_TRUE(emu::launch(fault_dynamic_shared, 1, 32, 32 * sizeof(float),
                          out.data(), 31)
                  .ok());
  EXPECT_DEATH((void)emu::launch(fault_dynamic_shared, 1, 32,
                                 32 * sizeof(float), out.data(), 32),
               "AddressSanitizer: heap-buffer-overflow.*" +
                   faultLine("dynamic-shared") +
                   ".*cuda-emu: in kernel 'fault_dynamic_shared' block "
                   "\\(0,0,0\\) thread 0");
}

TEST_F(CudaSanitizerTest, GlobalMemoryOverflowIsReported) {
  std::vector<float> out(40);
  EXPECT_DEATH((void)emu::launch(fault_global, 2, 32, 0, out.data(), 40),
               "AddressSanitizer: heap-buffer-overflow.*" +
                   faultLine("global") +
                   ".*cuda-emu: in kernel 'fault_global' block \\(1,0,0\\) "
                   "thread 8");
}

TEST_F(CudaSanitizerTest, StaticSharedMemoryOverflowIsReported) {
  std::vector<float> out(64);
  ASSERT_TRUE(emu::launch(fault_static_shared, 1, 32, 0, out.data()).ok());
  EXPECT_DEATH((void)emu::launch(fault_static_shared, 1, 33, 0, out.data()),
               faultLine("static-shared") +
                   ":.*index 32 out of bounds for type 'float\\[32\\]'.*"
                   "cuda-emu: in kernel 'fault_static_shared' block "
                   "\\(0,0,0\\) thread 32");
}

TEST_F(CudaSanitizerTest, MisalignedVectorLoadIsReported) {
  alignas(16) float in[8] = {};
  float out[1];
  EXPECT_DEATH((void)emu::launch(fault_misaligned, 1, 1, 0, in, out),
               faultLine("misaligned") +
                   ":.*member access within misaligned address .* for type "
                   "'const float4', which requires 16 byte alignment");
}

TEST_F(CudaSanitizerTest, StackOverflowHitsTheGuardPage) {
  int out = 0;
  EXPECT_DEATH((void)emu::launch(fault_stack_overflow, 1, 2, 0, &out),
               "AddressSanitizer: (stack-overflow|SEGV)");
}
