//===- GemmTest.cpp - GEMMs of the CUDA backend ---------------------------===//
//
// Part of mtc. The emulated GEMM engine (cuda-emu) through the emulated
// driver: every transpose combination, batches, f32 and bf16 operands,
// against a double-precision reference; argument checks; cuBLASLt loaded
// with dlopen (its products need a GPU: scripts/gpu-check.sh).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/emu/EmulatedDriver.h"
#include "runtime/cuda/emu/EmulatedGemm.h"
#include "runtime/device/CpuDevice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace mtc;
using namespace mtc::cuda;

namespace {

float bf16(float x) {
  uint16_t h;
  device::convertF32ToBF16(&x, &h, 1);
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Case {
  bool ta, tb;
  int64_t m, n, k, batch;
  bool bf16In, bf16Out;
};

} // namespace

TEST(EmulatedGemm, MatchesTheReference) {
  Expected<std::shared_ptr<const CudaDriverApi>> drv =
      emu::emulatedCudaDriver();
  ASSERT_TRUE(drv.ok()) << drv.message();
  const CudaDriverApi &d = **drv;
  std::unique_ptr<GemmEngine> engine = emu::emulatedGemm(*drv);
  void *stream = nullptr;
  ASSERT_EQ(d.cuStreamCreate(&stream, 0), 0);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (Case c : {Case{false, false, 5, 7, 3, 1, false, false},
                 Case{true, false, 6, 4, 9, 1, false, false},
                 Case{false, true, 3, 8, 5, 2, false, false},
                 Case{true, true, 7, 2, 6, 3, false, false},
                 Case{false, true, 9, 5, 7, 2, true, false},
                 Case{true, false, 4, 6, 8, 1, true, true}}) {
    SCOPED_TRACE(testing::Message()
                 << c.ta << c.tb << " " << c.m << "x" << c.n << "x" << c.k
                 << " b" << c.batch << " bf16 " << c.bf16In << c.bf16Out);
    int64_t na = c.m * c.k, nb = c.k * c.n, nc = c.m * c.n;
    std::vector<float> a(na * c.batch), b(nb * c.batch), cInit(nc * c.batch);
    for (float &x : a)
      x = c.bf16In ? bf16(dist(rng)) : dist(rng);
    for (float &x : b)
      x = c.bf16In ? bf16(dist(rng)) : dist(rng);
    for (float &x : cInit)
      x = c.bf16Out ? bf16(dist(rng)) : dist(rng);
    size_t in = c.bf16In ? 2 : 4, out = c.bf16Out ? 2 : 4;
    auto upload = [&](const std::vector<float> &v, size_t elem) {
      unsigned long long p = 0;
      EXPECT_EQ(d.cuMemAlloc_v2(&p, v.size() * elem), 0);
      std::vector<uint16_t> h(v.size());
      if (elem == 2)
        device::convertF32ToBF16(v.data(), h.data(), v.size());
      EXPECT_EQ(d.cuMemcpyHtoDAsync_v2(
                    p,
                    elem == 2 ? static_cast<const void *>(h.data())
                              : static_cast<const void *>(v.data()),
                    v.size() * elem, stream),
                0);
      EXPECT_EQ(d.cuStreamSynchronize(stream), 0);
      return p;
    };
    unsigned long long da = upload(a, in), db = upload(b, in),
                       dc = upload(cInit, out);
    GemmShape s{c.ta, c.tb, c.m, c.n, c.k, c.batch, na, nb, nc};
    GemmOperands o;
    o.a = reinterpret_cast<void *>(da);
    o.b = reinterpret_cast<void *>(db);
    o.c = reinterpret_cast<void *>(dc);
    o.aType = o.bType = c.bf16In ? ElemType::BF16 : ElemType::F32;
    o.cType = c.bf16Out ? ElemType::BF16 : ElemType::F32;
    o.alpha = 0.5f;
    o.beta = 2.0f;
    ASSERT_TRUE(engine->gemm(s, o, stream, nullptr, 0).ok());
    std::vector<char> raw(nc * c.batch * out);
    ASSERT_EQ(d.cuMemcpyDtoHAsync_v2(raw.data(), dc, raw.size(), stream), 0);
    ASSERT_EQ(d.cuStreamSynchronize(stream), 0);
    for (int64_t bi = 0; bi < c.batch; ++bi)
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double ref = 0, mag = 0;
          for (int64_t q = 0; q < c.k; ++q) {
            double x = a[bi * na + (c.ta ? q * c.m + i : i * c.k + q)];
            double y = b[bi * nb + (c.tb ? j * c.k + q : q * c.n + j)];
            ref += x * y;
            mag += std::abs(x * y);
          }
          double cij = cInit[bi * nc + i * c.n + j];
          ref = 0.5 * ref + 2.0 * cij;
          float got;
          int64_t idx = bi * nc + i * c.n + j;
          if (c.bf16Out) {
            uint16_t h;
            std::memcpy(&h, raw.data() + 2 * idx, 2);
            uint32_t u = static_cast<uint32_t>(h) << 16;
            std::memcpy(&got, &u, 4);
          } else {
            std::memcpy(&got, raw.data() + 4 * idx, 4);
          }
          double tol = c.bf16Out ? std::abs(ref) * 0x1p-8 + 1e-6
                                 : (mag + 2 * std::abs(cij)) * 1e-6 + 1e-7;
          ASSERT_NEAR(got, ref, tol) << bi << " " << i << " " << j;
        }
    for (unsigned long long p : {da, db, dc})
      d.cuMemFree_v2(p);
  }
  EXPECT_EQ(d.cuStreamDestroy_v2(stream), 0);
}

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
