//===- GemmTest.cpp - GEMMs of the CUDA backend ---------------------------===//
//
// Part of mtc. The GEMM interface's argument checks and cuBLASLt loaded
// with dlopen. The engines' products (the emulated engine on cuda_emu,
// cuBLASLt on a GPU) are tested against a double-precision reference by
// test/cuda/GemmDriverTest.cpp, once per driver.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Gemm.h"

#include <gtest/gtest.h>

using namespace mtc;
using namespace mtc::cuda;

TEST(Gemm, ChecksItsArguments) {
  float x = 0;
  GemmOperands o;
  o.a = o.b = o.c = &x;
  EXPECT_EQ(checkGemm(GemmShape{false, false, 0, 2, 2}, o).message(),
            "GEMM of 1 x [0, 2] x [2, 2]: sizes must be positive");
  GemmShape batched{false, false, 2, 2, 2, 3, 4, 4, 3};
  EXPECT_EQ(checkGemm(batched, o).message(),
            "GEMM: a batch stride is smaller than its matrix");
  o.c = nullptr;
  EXPECT_EQ(checkGemm(GemmShape{false, false, 1, 1, 1}, o).message(),
            "GEMM: null operand");
}

TEST(Gemm, CublasLtLoadsWithDlopenOrSaysWhy) {
  Expected<std::unique_ptr<GemmEngine>> lt = openCublasLt();
  if (lt.ok()) {
    EXPECT_NE((*lt)->name().find("cuBLASLt"), std::string::npos);
    return;
  }
  // Either the library is absent, or it cannot start without a GPU.
  EXPECT_EQ(lt.message().rfind("cuBLASLt", 0), 0u) << lt.message();
}
