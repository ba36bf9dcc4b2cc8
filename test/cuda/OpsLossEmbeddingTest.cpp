//===- OpsLossEmbeddingTest.cpp - Embedding and loss launchers ------------===//
//
// Part of mtc. The launchers of runtime/cuda/ops/Embedding.h, Loss.h and
// LinearCrossEntropy.h, through a Launch of the fixture (makeLaunch),
// against the runtime/cpu function of the same name on the same inputs:
// ragged sizes, repeated ids, a gradient accumulating onto a non-zero table
// and dW, ignored rows (a whole chunk of them), softcaps, W in both layouts,
// and linear cross-entropy forced into 3+ row chunks.
//
// Tolerances (fp32): embedding and its gradient are bit-identical; losses
// within 1e-5 relative; tensors (dlogits, dx, dW, logits) within 1e-5 of
// the reference's largest magnitude (max |got - ref| / max |ref|: dx and dW
// are sums in another order, so elements near zero have no relative error
// to speak of). bf16 (linear cross-entropy on bf16 x and W, against the
// CPU on the same rounded values): the loss within 1e-3 relative, dx and dW
// within 1e-2 (the bf16 logits chunk and bf16 dx).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/ops/Embedding.h"
#include "runtime/cuda/ops/LinearCrossEntropy.h"
#include "runtime/cuda/ops/Loss.h"
#include "test/cuda/CudaTestDriver.h"

#include <algorithm>
#include <cmath>
#include <random>

using namespace mtc;
using namespace mtc::cuda::test;
namespace ops = mtc::cuda::ops;

namespace {

class OpsLossEmbedding : public CudaDriverTest {};

/// Ids in [0, V) where a third of the positions share four hot ids.
std::vector<int32_t> randomIds(int64_t n, int64_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids) {
    const unsigned r = rng();
    id =
        int32_t(r % 3 == 0 ? (r >> 8) % std::min<int64_t>(V, 4) : (r >> 8) % V);
  }
  return ids;
}

/// Targets in [0, V), those at the positions of \p ignored set to
/// \p ignoreIndex.
std::vector<int32_t> randomTargets(int64_t n, int64_t V, uint32_t seed,
                                   const std::vector<int64_t> &ignored,
                                   int32_t ignoreIndex) {
  std::vector<int32_t> t = randomIds(n, V, seed);
  for (int64_t i : ignored)
    t[i] = ignoreIndex;
  return t;
}

/// max |got - ref| / max |ref|.
double relErr(const std::vector<float> &got, const std::vector<float> &ref) {
  double err = 0, mag = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(double(got[i]) - double(ref[i])));
    mag = std::max(mag, std::fabs(double(ref[i])));
  }
  return mag > 0 ? err / mag : err;
}

std::vector<uint16_t> toBf16(const std::vector<float> &v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    h[i] = mtc::cuda::test::toBf16(v[i]);
  return h;
}
std::vector<float> fromBf16(const std::vector<uint16_t> &h) {
  std::vector<float> v(h.size());
  for (size_t i = 0; i < h.size(); ++i)
    v[i] = mtc::cuda::test::fromBf16(h[i]);
  return v;
}
/// \p v rounded to bf16 and back.
std::vector<float> roundBf16(const std::vector<float> &v) {
  return fromBf16(toBf16(v));
}

#define OK(expr)                                                               \
  do {                                                                         \
    Status s_ = (expr);                                                        \
    ASSERT_TRUE(s_.ok()) << s_.message();                                      \
  } while (0)

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

TEST_P(OpsLossEmbedding, EmbeddingIsExactAndReportsBadIds) {
  ops::Launch L = makeLaunch();
  const int64_t n = 37, V = 50, D = 13;
  std::vector<int32_t> ids = randomIds(n, V, 1);
  std::vector<float> table = randoms(V * D, 2), ref(n * D);
  int64_t bad = -1;
  ASSERT_TRUE(
      cpu::embedding(ids.data(), table.data(), ref.data(), n, V, D, &bad));
  auto dids = upload(ids);
  auto dtable = upload(table), dy = alloc(n * D * 4), dbad = alloc(4);
  OK(ops::embedding(L, dids, dtable, dy, n, V, D, dbad));
  sync();
  EXPECT_EQ(download<float>(dy, n * D), ref);
  EXPECT_EQ(download<int32_t>(dbad, 1)[0], ops::kEmbeddingNoBadIndex);

  // bf16 storage: the rows move unchanged.
  std::vector<uint16_t> tableH = ::toBf16(table);
  auto dtableH = upload(tableH), dyH = alloc(n * D * 2);
  OK(ops::embedding(L, dids, dtableH, dyH, n, V, D, dbad, ops::DType::BF16));
  sync();
  std::vector<uint16_t> yH = download<uint16_t>(dyH, n * D);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < D; ++j)
      ASSERT_EQ(yH[r * D + j], tableH[ids[r] * D + j]) << r << "," << j;

  // Bad ids: the CPU's position (the first), zero rows, the rest copied.
  ids[20] = int32_t(V);
  ids[5] = -1;
  ASSERT_FALSE(
      cpu::embedding(ids.data(), table.data(), ref.data(), n, V, D, &bad));
  copyIn(dids, ids.data(), n * 4);
  OK(ops::embedding(L, dids, dtable, dy, n, V, D, dbad));
  sync();
  EXPECT_EQ(download<int32_t>(dbad, 1)[0], bad);
  std::vector<float> y = download<float>(dy, n * D);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < D; ++j)
      ASSERT_EQ(y[r * D + j], r == 5 || r == 20 ? 0.0f : table[ids[r] * D + j])
          << r << "," << j;

  // Errors name the op.
  Status s = ops::embedding(L, dids, dtable, dy, n, 0, D, dbad);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("embedding"), std::string::npos) << s.message();
}

TEST_P(OpsLossEmbedding, EmbeddingGradAccIsBitIdenticalToCpu) {
  ops::Launch L = makeLaunch();
  // Two radix blocks, two sort passes (V >= 256), hot ids, a bad id.
  const int64_t n = 1300, V = 300, D = 19;
  std::vector<int32_t> ids = randomIds(n, V, 3);
  ids[7] = -3;
  std::vector<float> dy = randoms(n * D, 4), table = randoms(V * D, 5),
                     ref = table;
  cpu::embeddingGradAcc(ids.data(), dy.data(), ref.data(), n, V, D);
  auto dids = upload(ids), ddy = upload(dy), dtable = upload(table);
  OK(ops::embeddingGradAcc(L, dids, ddy, dtable, n, V, D));
  sync();
  EXPECT_EQ(download<float>(dtable, V * D), ref);

  // bf16 gradients into an f32 table: the CPU's sum of the rounded rows.
  std::vector<float> dyR = roundBf16(dy);
  ref = table;
  cpu::embeddingGradAcc(ids.data(), dyR.data(), ref.data(), n, V, D);
  auto ddyH = upload(::toBf16(dy));
  copyIn(dtable, table.data(), V * D * 4);
  OK(ops::embeddingGradAcc(L, dids, ddyH, dtable, n, V, D, ops::DType::BF16,
                           ops::DType::F32));
  sync();
  EXPECT_EQ(download<float>(dtable, V * D), ref);

  Status s = ops::embeddingGradAcc(L, dids, ddy, dtable, n, V, D,
                                   ops::DType::F32, ops::DType::BF16);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("embeddingGradAcc"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

TEST_P(OpsLossEmbedding, CrossEntropyMatchesCpu) {
  ops::Launch L = makeLaunch();
  const int64_t n = 45, V = 777, ignore = -100;
  std::vector<float> logits = randoms(n * V, 6, -4, 4);
  std::vector<int32_t> targets = randomTargets(n, V, 7, {0, 9, 30}, ignore);
  int64_t count = 0;
  double ref =
      cpu::crossEntropy(logits.data(), targets.data(), n, V, ignore, &count);
  auto dlogits = upload(logits), dtargets = upload(targets), dloss = alloc(4),
       dcount = alloc(4);
  OK(ops::crossEntropy(L, dlogits, dtargets, n, V, ignore, dloss, dcount));
  sync();
  float loss = download<float>(dloss, 1)[0];
  EXPECT_NEAR(loss, ref, 1e-5 * std::fabs(ref));
  EXPECT_EQ(download<int32_t>(dcount, 1)[0], count);

  // Every row ignored: 0, as the CPU; the count is optional.
  std::vector<int32_t> none(n, int32_t(ignore));
  copyIn(dtargets, none.data(), n * 4);
  OK(ops::crossEntropy(L, dlogits, dtargets, n, V, ignore, dloss));
  sync();
  EXPECT_EQ(download<float>(dloss, 1)[0], 0.0f);
}

TEST_P(OpsLossEmbedding, CrossEntropyGradMatchesCpu) {
  ops::Launch L = makeLaunch();
  const int64_t n = 29, V = 1001, ignore = 3;
  std::vector<float> logits = randoms(n * V, 8, -4, 4), ref(n * V);
  std::vector<int32_t> targets =
      randomTargets(n, V, 9, {2, 17}, int32_t(ignore));
  const float dl = 1.7f;
  cpu::crossEntropyGrad(logits.data(), targets.data(), dl, ref.data(), n, V,
                        ignore);
  auto dlogits = upload(logits), dtargets = upload(targets),
       ddl = upload(std::vector<float>{dl}), dgrad = alloc(n * V * 4);
  OK(ops::crossEntropyGrad(L, dlogits, dtargets, ddl, dgrad, n, V, ignore));
  sync();
  std::vector<float> got = download<float>(dgrad, n * V);
  EXPECT_LE(relErr(got, ref), 1e-5);
  for (int64_t j = 0; j < V; ++j)
    ASSERT_EQ(got[2 * V + j], 0.0f) << "ignored row, column " << j;
  EXPECT_EQ(download<float>(dlogits, n * V), logits) << "logits overwritten";

  // In place.
  OK(ops::crossEntropyGrad(L, dlogits, dtargets, ddl, dlogits, n, V, ignore));
  sync();
  EXPECT_LE(relErr(download<float>(dlogits, n * V), ref), 1e-5);
}

//===----------------------------------------------------------------------===//
// Linear cross-entropy
//===----------------------------------------------------------------------===//

struct LinearCase {
  int64_t n, D, V;
  bool transposeW;
  double softcap;
  int64_t chunkRows; ///< forced through chunkBytes
};
const LinearCase kLinearCases[] = {
    {70, 24, 517, false, 0, 20}, // 4 chunks, the last ragged
    {70, 24, 517, true, 15, 20},
    {33, 17, 263, true, 0, 11},    // 3 chunks exactly
    {41, 9, 101, false, 2.5, 41}}; // one chunk, a strong softcap

std::string name(const LinearCase &c) {
  return "n=" + std::to_string(c.n) + " D=" + std::to_string(c.D) +
         " V=" + std::to_string(c.V) + " tw=" + std::to_string(c.transposeW) +
         " cap=" + std::to_string(c.softcap) +
         " chunk=" + std::to_string(c.chunkRows);
}

/// Targets with an ignored row in the first chunk and, when there are 3+
/// chunks, the whole second chunk ignored.
std::vector<int64_t> ignoredRows(const LinearCase &c) {
  std::vector<int64_t> rows = {1};
  if (c.n >= 3 * c.chunkRows)
    for (int64_t r = c.chunkRows; r < 2 * c.chunkRows; ++r)
      rows.push_back(r);
  return rows;
}

TEST_P(OpsLossEmbedding, LinearCrossEntropyMatchesCpu) {
  ops::Launch L = makeLaunch();
  const int64_t ignore = -1;
  for (const LinearCase &c : kLinearCases) {
    SCOPED_TRACE(name(c));
    ASSERT_EQ(ops::linearCrossEntropyChunkRows(c.V, 4, c.chunkRows * c.V * 4),
              c.chunkRows);
    std::vector<float> x = randoms(c.n * c.D, 10 + c.n),
                       w = randoms(c.D * c.V, 11 + c.V, -1, 1);
    std::vector<int32_t> targets =
        randomTargets(c.n, c.V, 12, ignoredRows(c), int32_t(ignore));
    int64_t count = 0;
    double ref = cpu::linearCrossEntropy(x.data(), w.data(), c.transposeW,
                                         targets.data(), c.n, c.D, c.V, ignore,
                                         c.softcap, &count);
    auto dx = upload(x), dw = upload(w), dt = upload(targets), dloss = alloc(4),
         dcount = alloc(4);
    OK(ops::linearCrossEntropy(L, dx, dw, c.transposeW, dt, c.n, c.D, c.V,
                               ignore, c.softcap, dloss, dcount,
                               ops::DType::F32, c.chunkRows * c.V * 4));
    sync();
    EXPECT_NEAR(download<float>(dloss, 1)[0], ref, 1e-5 * std::fabs(ref));
    EXPECT_EQ(download<int32_t>(dcount, 1)[0], count);
  }
}

TEST_P(OpsLossEmbedding, LinearCrossEntropyGradMatchesCpu) {
  ops::Launch L = makeLaunch();
  const int64_t ignore = -1;
  const float dl = 0.75f;
  for (const LinearCase &c : kLinearCases) {
    SCOPED_TRACE(name(c));
    std::vector<float> x = randoms(c.n * c.D, 13 + c.n),
                       w = randoms(c.D * c.V, 14 + c.V, -1, 1),
                       dw0 = randoms(c.D * c.V, 15, -0.1f, 0.1f),
                       dxRef(c.n * c.D), dwRef = dw0;
    std::vector<int32_t> targets =
        randomTargets(c.n, c.V, 16, ignoredRows(c), int32_t(ignore));
    cpu::linearCrossEntropyGrad(x.data(), w.data(), c.transposeW,
                                targets.data(), dl, dxRef.data(), dwRef.data(),
                                c.n, c.D, c.V, ignore, c.softcap);
    auto dx = upload(x), dw = upload(w), dt = upload(targets),
         ddl = upload(std::vector<float>{dl}), ddx = alloc(c.n * c.D * 4),
         ddw = upload(dw0);
    OK(ops::linearCrossEntropyGrad(
        L, dx, dw, c.transposeW, dt, ddl, ddx, ddw, c.n, c.D, c.V, ignore,
        c.softcap, ops::DType::F32, ops::DType::F32, c.chunkRows * c.V * 4));
    sync();
    std::vector<float> gotDx = download<float>(ddx, c.n * c.D),
                       gotDw = download<float>(ddw, c.D * c.V);
    EXPECT_LE(relErr(gotDx, dxRef), 1e-5);
    // dW's change, not its non-zero start, is what is compared.
    std::vector<float> dDw(gotDw.size()), dDwRef(gotDw.size());
    for (size_t i = 0; i < gotDw.size(); ++i) {
      dDw[i] = gotDw[i] - dw0[i];
      dDwRef[i] = dwRef[i] - dw0[i];
    }
    EXPECT_LE(relErr(dDw, dDwRef), 1e-5);
    for (int64_t r : ignoredRows(c))
      for (int64_t j = 0; j < c.D; ++j)
        ASSERT_EQ(gotDx[r * c.D + j], 0.0f) << "ignored row " << r;
  }
}

TEST_P(OpsLossEmbedding, LinearLogitsMatchCpu) {
  ops::Launch L = makeLaunch();
  for (const LinearCase &c : kLinearCases) {
    SCOPED_TRACE(name(c));
    std::vector<float> x = randoms(c.n * c.D, 17 + c.n),
                       w = randoms(c.D * c.V, 18 + c.V, -1, 1), ref(c.n * c.V);
    cpu::linearLogits(x.data(), w.data(), c.transposeW, c.n, c.D, c.V,
                      c.softcap, ref.data());
    auto dx = upload(x), dw = upload(w), dl = alloc(c.n * c.V * 4);
    OK(ops::linearLogits(L, dx, dw, c.transposeW, c.n, c.D, c.V, c.softcap,
                         dl));
    sync();
    EXPECT_LE(relErr(download<float>(dl, c.n * c.V), ref), 1e-5);
  }
}

TEST_P(OpsLossEmbedding, LinearCrossEntropyBf16FollowsCpu) {
  // bf16 x and W (the CPU on the same rounded values); the logits chunk is
  // bf16 too, so the loss and gradients carry its rounding.
  ops::Launch L = makeLaunch();
  const LinearCase c = kLinearCases[1];
  const int64_t ignore = -1;
  std::vector<float> x = roundBf16(randoms(c.n * c.D, 19)),
                     w = roundBf16(randoms(c.D * c.V, 20, -1, 1)),
                     dxRef(c.n * c.D), dwRef(c.D * c.V, 0.0f);
  std::vector<int32_t> targets =
      randomTargets(c.n, c.V, 21, ignoredRows(c), int32_t(ignore));
  double ref =
      cpu::linearCrossEntropy(x.data(), w.data(), c.transposeW, targets.data(),
                              c.n, c.D, c.V, ignore, c.softcap, nullptr);
  cpu::linearCrossEntropyGrad(x.data(), w.data(), c.transposeW, targets.data(),
                              1.0f, dxRef.data(), dwRef.data(), c.n, c.D, c.V,
                              ignore, c.softcap);
  auto dx = upload(::toBf16(x)), dw = upload(::toBf16(w)), dt = upload(targets),
       dloss = alloc(4), ddl = upload(std::vector<float>{1.0f}),
       ddx = alloc(c.n * c.D * 2), ddw = upload(std::vector<float>(c.D * c.V));
  const int64_t bytes = c.chunkRows * c.V * 2;
  OK(ops::linearCrossEntropy(L, dx, dw, c.transposeW, dt, c.n, c.D, c.V, ignore,
                             c.softcap, dloss, 0, ops::DType::BF16, bytes));
  OK(ops::linearCrossEntropyGrad(L, dx, dw, c.transposeW, dt, ddl, ddx, ddw,
                                 c.n, c.D, c.V, ignore, c.softcap,
                                 ops::DType::BF16, ops::DType::F32, bytes));
  sync();
  EXPECT_NEAR(download<float>(dloss, 1)[0], ref, 1e-3 * std::fabs(ref));
  EXPECT_LE(relErr(::fromBf16(download<uint16_t>(ddx, c.n * c.D)), dxRef),
            1e-2);
  EXPECT_LE(relErr(download<float>(ddw, c.D * c.V), dwRef), 1e-2);
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(OpsLossEmbedding);
