//===- RopeEmbeddingTest.cpp - rope.cu and embedding.cu on either driver --===//
//
// Part of mtc. The rotary embedding and the embedding lookup / gradient
// library kernels against their runtime/cpu references (cpu::rope,
// cpu::embedding, cpu::embeddingGradAcc) at small ragged shapes, f32 and
// bf16, on cuda_emu here and on a GPU through scripts/gpu-check.sh.
//
// Tolerances: rope f32 within 1e-5 of |x_i| + |x_(i+h)| (the pair's scale:
// the GPU may contract a*c - b*s into an FMA); bf16 within 2 ulp of the CPU
// result rounded to bf16. The lookup is exact; the fp32 gradient is
// bit-identical to the CPU (same additions in the same order).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "test/cuda/CudaTestDriver.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <random>

using namespace mtc;
using namespace mtc::cuda::test;

namespace {

class RopeEmbeddingKernels : public CudaDriverTest {
protected:
  /// The embedding gradient's launch sequence (embedding.cu's banner):
  /// dtable += scatter of dy by ids, for the sum entry \p sumEntry.
  void embeddingGrad(const std::string &sumEntry, unsigned long long ids,
                     unsigned long long dy, unsigned long long dtable, int n,
                     int V, int D, unsigned sumThreads);
};

std::vector<uint16_t> bf16s(const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = toBf16(v[i]);
  return out;
}
std::vector<float> floats(const std::vector<uint16_t> &v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = fromBf16(v[i]);
  return out;
}

//===----------------------------------------------------------------------===//
// rope
//===----------------------------------------------------------------------===//

struct RopeCase {
  int B, S, H, D;
  double fraction;
  bool llama3, inverse, inPlace;
  long long posOffset;
};

std::string describe(const RopeCase &c) {
  return "B=" + std::to_string(c.B) + " S=" + std::to_string(c.S) +
         " H=" + std::to_string(c.H) + " D=" + std::to_string(c.D) +
         " fraction=" + std::to_string(c.fraction) +
         (c.llama3 ? " llama3" : "") + (c.inverse ? " inverse" : "") +
         (c.inPlace ? " in-place" : "") +
         " posOffset=" + std::to_string(c.posOffset);
}

const RopeCase kRopeCases[] = {
    {2, 5, 3, 6, 1.0, false, false, false, 0},
    {1, 7, 2, 70, 0.5, true, false, false, 4000}, // rot 34: a pass-through
    {2, 3, 5, 38, 1.0, true, true, true, 13},
    {1, 4, 3, 65, 0.25, false, true, false, 100}, // rot 16, odd D
    {3, 2, 1, 128, 1.0, true, false, true, 8190},
    {1, 3, 2, 9, 1.0, false, false, false, 0}, // rot 8: one pass-through dim
};

cpu::RopeParams ropeParams(const RopeCase &c) {
  cpu::RopeParams p;
  p.theta = 500000.0;
  p.fraction = c.fraction;
  p.llama3 = c.llama3;
  p.factor = 8;
  p.lowFreqFactor = 1;
  p.highFreqFactor = 4;
  p.originalMaxPosition = 64; // every llama3 branch is taken for D >= 38
  return p;
}

TEST_P(RopeEmbeddingKernels, RopeF32MatchesCpu) {
  void *fn = kernel("rope.cu", "rope_f32");
  double worst = 0;
  for (const RopeCase &c : kRopeCases) {
    SCOPED_TRACE(describe(c));
    cpu::RopeParams p = ropeParams(c);
    const int rot = static_cast<int>(cpu::ropeRotaryDims(p, c.D));
    const size_t count = size_t(c.B) * c.S * c.H * c.D;
    std::vector<float> x = randoms(count, 11 + c.D), ref(count);
    cpu::rope(x.data(), ref.data(), c.B, c.S, c.H, c.D, p, c.inverse,
              c.posOffset);
    std::vector<double> freq = cpu::ropeInvFreq(p, c.D);
    unsigned long long dx = upload(x), dfreq = upload(freq);
    unsigned long long dy =
        c.inPlace ? dx : upload(std::vector<float>(count, NAN));
    int rows = c.B * c.S, inverse = c.inverse;
    long long offset = c.posOffset;
    launch(fn, {unsigned(rows)}, {64}, rot * sizeof(float),
           {&dx, &dy, &dfreq, &rows, const_cast<int *>(&c.S),
            const_cast<int *>(&c.H), const_cast<int *>(&c.D),
            const_cast<int *>(&rot), &offset, &inverse});
    std::vector<float> y = download<float>(dy, count);
    const int half = rot / 2;
    for (size_t e = 0; e < count; ++e) {
      const int i = static_cast<int>(e % c.D);
      if (i >= rot) {
        ASSERT_EQ(y[e], x[e]) << e;
        continue;
      }
      const size_t base = e - i, lo = i % std::max(half, 1);
      const double scale =
          std::abs(x[base + lo]) + std::abs(x[base + lo + half]);
      const double err = std::abs(double(y[e]) - ref[e]) / scale;
      worst = std::max(worst, err);
      ASSERT_LE(err, 1e-5) << e << ": " << y[e] << " vs " << ref[e];
    }
  }
  RecordProperty("max_error", std::to_string(worst));
  std::printf("rope_f32: max error %.3g of the pair's scale\n", worst);
}

TEST_P(RopeEmbeddingKernels, RopeBf16WithinTwoUlps) {
  void *fn = kernel("rope.cu", "rope_bf16");
  int worst = 0;
  for (const RopeCase &c : kRopeCases) {
    SCOPED_TRACE(describe(c));
    cpu::RopeParams p = ropeParams(c);
    const int rot = static_cast<int>(cpu::ropeRotaryDims(p, c.D));
    const size_t count = size_t(c.B) * c.S * c.H * c.D;
    std::vector<uint16_t> x = bf16s(randoms(count, 21 + c.D));
    std::vector<float> xf = floats(x), ref(count);
    cpu::rope(xf.data(), ref.data(), c.B, c.S, c.H, c.D, p, c.inverse,
              c.posOffset);
    std::vector<double> freq = cpu::ropeInvFreq(p, c.D);
    unsigned long long dx = upload(x), dfreq = upload(freq);
    unsigned long long dy =
        c.inPlace ? dx : upload(std::vector<uint16_t>(count, 0x7fc0));
    int rows = c.B * c.S, inverse = c.inverse;
    long long offset = c.posOffset;
    launch(fn, {unsigned(rows)}, {128}, rot * sizeof(float),
           {&dx, &dy, &dfreq, &rows, const_cast<int *>(&c.S),
            const_cast<int *>(&c.H), const_cast<int *>(&c.D),
            const_cast<int *>(&rot), &offset, &inverse});
    std::vector<uint16_t> y = download<uint16_t>(dy, count);
    for (size_t e = 0; e < count; ++e) {
      if (int(e % c.D) >= rot) {
        ASSERT_EQ(y[e], x[e]) << e;
        continue;
      }
      const int ulps = bf16Ulps(y[e], toBf16(ref[e]));
      worst = std::max(worst, ulps);
      ASSERT_LE(ulps, 2) << e << ": " << fromBf16(y[e]) << " vs " << ref[e];
    }
  }
  std::printf("rope_bf16: max %d bf16 ulp\n", worst);
}

//===----------------------------------------------------------------------===//
// embedding: forward
//===----------------------------------------------------------------------===//

std::vector<int32_t> randomIds(int n, int V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids) {
    // A third of the positions share a few hot ids: long runs per id.
    const unsigned r = rng();
    id = r % 3 == 0 ? int32_t((r >> 8) % 4) : int32_t((r >> 8) % V);
  }
  return ids;
}

TEST_P(RopeEmbeddingKernels, EmbeddingForwardIsExact) {
  for (const char *entry : {"embedding_f32", "embedding_bf16"}) {
    const bool bf16 = std::string(entry) == "embedding_bf16";
    void *fn = kernel("embedding.cu", entry);
    for (int D : {1, 7, 64, 130}) {
      SCOPED_TRACE(std::string(entry) + " D=" + std::to_string(D));
      int n = 45, V = 37;
      std::vector<int32_t> ids = randomIds(n, V, 3 + D);
      std::vector<float> table = randoms(size_t(V) * D, 5 + D), ref(n * D);
      if (bf16)
        table = floats(bf16s(table));
      int64_t bad = -1;
      ASSERT_TRUE(
          cpu::embedding(ids.data(), table.data(), ref.data(), n, V, D, &bad));
      unsigned long long dids = upload(ids),
                         dflag = upload(std::vector<int>{INT_MAX});
      unsigned long long dtable = bf16 ? upload(bf16s(table)) : upload(table);
      unsigned long long dy = bf16 ? upload(std::vector<uint16_t>(n * D, 1))
                                   : upload(std::vector<float>(n * D, NAN));
      launch(fn, {unsigned(n)}, {32}, 0,
             {&dids, &dtable, &dy, &n, &V, &D, &dflag});
      std::vector<float> y = bf16 ? floats(download<uint16_t>(dy, n * D))
                                  : download<float>(dy, n * D);
      for (int i = 0; i < n * D; ++i)
        ASSERT_EQ(y[i], ref[i]) << i;
      EXPECT_EQ(download<int>(dflag, 1)[0], INT_MAX);
    }
  }
}

TEST_P(RopeEmbeddingKernels, EmbeddingForwardFlagsTheFirstBadId) {
  void *fn = kernel("embedding.cu", "embedding_f32");
  int n = 12, V = 9, D = 8; // 32-byte rows: the 16-byte path
  std::vector<int32_t> ids = randomIds(n, V, 1);
  ids[9] = -1;
  ids[4] = V;
  std::vector<float> table = randoms(size_t(V) * D, 2);
  int64_t bad = -1;
  std::vector<float> unused(n * D);
  EXPECT_FALSE(
      cpu::embedding(ids.data(), table.data(), unused.data(), n, V, D, &bad));
  unsigned long long dids = upload(ids), dtable = upload(table),
                     dflag = upload(std::vector<int>{INT_MAX}),
                     dy = upload(std::vector<float>(n * D, NAN));
  launch(fn, {unsigned(n)}, {32}, 0, {&dids, &dtable, &dy, &n, &V, &D, &dflag});
  EXPECT_EQ(download<int>(dflag, 1)[0], bad); // the CPU's position: 4
  std::vector<float> y = download<float>(dy, n * D);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < D; ++j) {
      const bool valid = ids[r] >= 0 && ids[r] < V;
      ASSERT_EQ(y[r * D + j], valid ? table[ids[r] * D + j] : 0.0f)
          << r << "," << j;
    }
}

//===----------------------------------------------------------------------===//
// embedding: gradient
//===----------------------------------------------------------------------===//

void RopeEmbeddingKernels::embeddingGrad(const std::string &sumEntry,
                                         unsigned long long ids,
                                         unsigned long long dy,
                                         unsigned long long dtable, int n,
                                         int V, int D, unsigned sumThreads) {
  if (n == 0)
    return;
  void *hist = kernel("embedding.cu", "embedding_grad_hist");
  void *scan = kernel("embedding.cu", "embedding_grad_scan");
  void *scatter = kernel("embedding.cu", "embedding_grad_scatter");
  void *sum = kernel("embedding.cu", sumEntry);
  int passes = 1;
  while (passes < 4 && (static_cast<long long>(V) >> (8 * passes)) != 0)
    ++passes;
  const int blocks = (n + 1023) / 1024, histCount = 256 * blocks;
  unsigned long long keys[2] = {alloc(4 * size_t(n)), alloc(4 * size_t(n))};
  unsigned long long pos[2] = {alloc(4 * size_t(n)), alloc(4 * size_t(n))};
  unsigned long long histogram = alloc(4 * size_t(histCount));
  unsigned long long none = 0;
  for (int k = 0; k < passes; ++k) {
    int shift = 8 * k;
    unsigned long long *keysIn = k == 0 ? &none : &keys[(k + 1) % 2];
    unsigned long long *posIn = k == 0 ? &none : &pos[(k + 1) % 2];
    launch(hist, {unsigned(blocks)}, {256}, 0,
           {&ids, keysIn, &n, &V, &shift, &histogram});
    int count = histCount;
    launch(scan, {1}, {1024}, 0, {&histogram, &count});
    launch(scatter, {unsigned(blocks)}, {256}, 0,
           {&ids, keysIn, posIn, &n, &V, &shift, &histogram, &keys[k % 2],
            &pos[k % 2]});
  }
  const int last = (passes - 1) % 2;
  launch(sum, {unsigned(n), (unsigned(D) + sumThreads - 1) / sumThreads},
         {sumThreads}, 0, {&keys[last], &pos[last], &dy, &dtable, &n, &V, &D});
}

struct GradCase {
  int n, V, D;
};
const GradCase kGradCases[] = {
    {1, 1, 3},         // one position, one pass
    {700, 200, 33},    // one radix block, one pass
    {2500, 3000, 17},  // three radix blocks, two passes
    {1100, 70000, 5}}; // three passes

TEST_P(RopeEmbeddingKernels, EmbeddingGradF32IsBitIdenticalToCpu) {
  for (const GradCase &c : kGradCases) {
    SCOPED_TRACE("n=" + std::to_string(c.n) + " V=" + std::to_string(c.V) +
                 " D=" + std::to_string(c.D));
    std::vector<int32_t> ids = randomIds(c.n, c.V, 7 + c.n);
    if (c.n > 10) {
      ids[3] = -5; // skipped, as the CPU skips it
      ids[c.n - 2] = c.V;
    }
    std::vector<float> dy = randoms(size_t(c.n) * c.D, 8 + c.n),
                       table = randoms(size_t(c.V) * c.D, 9 + c.n), ref = table;
    cpu::embeddingGradAcc(ids.data(), dy.data(), ref.data(), c.n, c.V, c.D);
    unsigned long long dids = upload(ids), ddy = upload(dy),
                       dtable = upload(table);
    embeddingGrad("embedding_grad_sum_f32", dids, ddy, dtable, c.n, c.V, c.D,
                  32);
    std::vector<float> got = download<float>(dtable, table.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], ref[i]) << "row " << i / c.D << " col " << i % c.D;
  }
}

TEST_P(RopeEmbeddingKernels, EmbeddingGradBf16) {
  const GradCase c = {2500, 3000, 17};
  std::vector<int32_t> ids = randomIds(c.n, c.V, 17);
  std::vector<float> dy = floats(bf16s(randoms(size_t(c.n) * c.D, 18))),
                     table = floats(bf16s(randoms(size_t(c.V) * c.D, 19)));
  std::vector<float> ref = table;
  cpu::embeddingGradAcc(ids.data(), dy.data(), ref.data(), c.n, c.V, c.D);
  unsigned long long dids = upload(ids), ddy = upload(bf16s(dy));
  // bf16 dy into an f32 table: exactly the CPU's sums.
  unsigned long long dtable = upload(table);
  embeddingGrad("embedding_grad_sum_bf16_f32", dids, ddy, dtable, c.n, c.V, c.D,
                64);
  std::vector<float> got = download<float>(dtable, table.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], ref[i]) << i;
  // bf16 table: one rounding of the fp32 sum.
  unsigned long long dtable16 = upload(bf16s(table));
  embeddingGrad("embedding_grad_sum_bf16", dids, ddy, dtable16, c.n, c.V, c.D,
                64);
  std::vector<uint16_t> got16 = download<uint16_t>(dtable16, table.size());
  int worst = 0;
  for (size_t i = 0; i < got16.size(); ++i) {
    const int ulps = bf16Ulps(got16[i], toBf16(ref[i]));
    worst = std::max(worst, ulps);
    ASSERT_LE(ulps, 2) << i;
  }
  std::printf("embedding_grad_sum_bf16: max %d bf16 ulp\n", worst);
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(RopeEmbeddingKernels);
