//===- GemmDriverTest.cpp - GEMM engines on either driver -----------------===//
//
// Part of mtc. The GEMM engine of each driver -- the CPU GEMM in stream
// order on cuda_emu, cuBLASLt on a GPU -- against a double-precision
// reference: transposes, batches, fp32 (TF32 off: parity runs need it) and
// bf16 inputs with fp32 accumulation, fp32 or bf16 output, alpha and beta.
//
//===----------------------------------------------------------------------===//
#include "test/cuda/CudaTestDriver.h"

#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/emu/EmulatedGemm.h"

#include <cmath>
#include <random>

using namespace mtc;
using namespace mtc::cuda;
using namespace mtc::cuda::test;

namespace {

class GemmEngines : public CudaDriverTest {};

struct Case {
  bool ta, tb;
  int64_t m, n, k, batch;
  bool bf16In, bf16Out;
};

TEST_P(GemmEngines, MatchTheReference) {
  std::unique_ptr<GemmEngine> engine;
  if (emulated()) {
    engine = emu::emulatedGemm(api);
  } else {
    Expected<std::unique_ptr<GemmEngine>> lt = openCublasLt();
    ASSERT_TRUE(lt.ok()) << lt.message();
    engine = std::move(*lt);
  }
  std::printf("[ engine   ] %s\n", engine->name().c_str());
  size_t wsBytes = 32 << 20;
  unsigned long long ws = alloc(wsBytes);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (Case c : {Case{false, false, 5, 7, 3, 1, false, false},
                 Case{true, false, 6, 4, 9, 1, false, false},
                 Case{false, true, 3, 8, 5, 2, false, false},
                 Case{true, true, 7, 2, 6, 3, false, false},
                 Case{false, true, 9, 5, 7, 2, true, false},
                 Case{true, false, 4, 6, 8, 1, true, true},
                 Case{false, true, 130, 67, 300, 2, false, false},
                 Case{false, false, 256, 192, 512, 1, true, true}}) {
    SCOPED_TRACE(testing::Message()
                 << c.ta << c.tb << " " << c.m << "x" << c.n << "x" << c.k
                 << " b" << c.batch << " bf16 " << c.bf16In << c.bf16Out);
    int64_t na = c.m * c.k, nb = c.k * c.n, nc = c.m * c.n;
    std::vector<float> a(na * c.batch), b(nb * c.batch), cInit(nc * c.batch);
    auto fill = [&](std::vector<float> &v, bool bf) {
      for (float &x : v)
        x = bf ? fromBf16(toBf16(dist(rng))) : dist(rng);
    };
    fill(a, c.bf16In);
    fill(b, c.bf16In);
    fill(cInit, c.bf16Out);
    auto put = [&](const std::vector<float> &v, bool bf) {
      if (!bf)
        return upload(v);
      std::vector<uint16_t> h(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        h[i] = toBf16(v[i]);
      return upload(h);
    };
    unsigned long long da = put(a, c.bf16In), db = put(b, c.bf16In),
                       dc = put(cInit, c.bf16Out);
    GemmShape s{c.ta, c.tb, c.m, c.n, c.k, c.batch, na, nb, nc};
    GemmOperands o;
    o.a = reinterpret_cast<void *>(da);
    o.b = reinterpret_cast<void *>(db);
    o.c = reinterpret_cast<void *>(dc);
    o.aType = o.bType = c.bf16In ? ElemType::BF16 : ElemType::F32;
    o.cType = c.bf16Out ? ElemType::BF16 : ElemType::F32;
    o.alpha = 0.5f;
    o.beta = 2.0f;
    Status st =
        engine->gemm(s, o, stream, reinterpret_cast<void *>(ws), wsBytes);
    ASSERT_TRUE(st.ok()) << st.message();
    sync();
    std::vector<float> got(nc * c.batch);
    if (c.bf16Out) {
      std::vector<uint16_t> h = download<uint16_t>(dc, got.size());
      for (size_t i = 0; i < h.size(); ++i)
        got[i] = fromBf16(h[i]);
    } else {
      got = download<float>(dc, got.size());
    }
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
          // fp32 accumulation: within 1e-6 of the magnitudes summed (4e-6
          // for bf16 inputs: tensor cores sum in another order); a bf16
          // output adds its rounding (2^-9 relative, 2^-8 kept as margin).
          // On an H100 a 256x192x512 bf16 product missed a bound without
          // the accumulation term by 3.8e-6 against magnitudes of ~128.
          double acc = (mag + 2 * std::abs(cij)) * (c.bf16In ? 4e-6 : 1e-6);
          double tol = acc + 1e-7 + (c.bf16Out ? std::abs(ref) * 0x1p-8 : 0);
          ASSERT_NEAR(got[bi * nc + i * c.n + j], ref, tol)
              << bi << " " << i << " " << j;
        }
  }
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(GemmEngines);
