//===- MovementLossTest.cpp - movement.cu and loss.cu on either driver ----===//
//
// Part of mtc. Transpose, slice, concat and pad against cpu::transpose,
// cpu::slice, cpu::concat and cpu::pad, and broadcast_rows (matmul's bias)
// against its definition (exact: they are copies), on the element-wise and
// the 16-byte paths, in f32 and bf16 (2-byte elements), with few blocks so
// that the grid-stride loops turn (the launchers' geometry is tested in
// OpsMatmulAttentionTest; the shape descriptors are theirs); and
// the cross-entropy pieces against cpu::crossEntropy / crossEntropyGrad with
// linearCrossEntropy's softcap, f32 and bf16 logits.
//
// Tolerances: per-row loss and lse within 1e-4 relative (reductions), the
// mean within 1e-5; dlogits within 1e-5 of |g| + scale * onehot, g the
// gradient before the softcap factor (the one-hot term cancels against the
// softmax at the target, and 1 - u^2 cancels near the cap), plus 4 2^-23
// |l'| with a softcap (tanh's last bits enter the softmax's exponent); bf16
// dlogits within 2 ulp of the CPU result rounded to bf16.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/ops/Movement.h"
#include "test/cuda/CudaTestDriver.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace mtc;
using namespace mtc::cuda::test;

namespace {

class MovementLossKernels : public CudaDriverTest {
public:
  // For the checking helpers below, shared by the f32 and bf16 instances.
  using CudaDriverTest::alloc;
  using CudaDriverTest::download;
  using CudaDriverTest::launch;
  using CudaDriverTest::upload;
};

/// Distinct 2-byte patterns (any bits: the kernels only move them).
std::vector<uint16_t> patterns(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> v(n);
  for (uint16_t &x : v)
    x = static_cast<uint16_t>(rng());
  return v;
}

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

/// A grid-stride launch with few blocks, so that threads loop.
constexpr unsigned kBlocks = 3, kThreads = 64;

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

struct TransposeCase {
  std::vector<int64_t> shape, perm;
};

const TransposeCase kTransposeCases[] = {
    {{7}, {0}},
    {{3, 5}, {1, 0}},
    {{3, 5, 7}, {2, 0, 1}},
    {{3, 5, 7}, {1, 2, 0}},
    {{3, 5, 8}, {1, 0, 2}},        // innermost kept: 16-byte words (f32)
    {{2, 3, 4, 16}, {2, 0, 1, 3}}, // innermost kept, both widths
    {{2, 3, 4, 5}, {3, 1, 0, 2}},
    {{2, 1, 3, 1, 2, 2, 1, 3}, {7, 5, 0, 2, 6, 1, 4, 3}},
    {{2, 3, 2, 3, 2, 3, 2, 3}, {7, 5, 0, 2, 6, 1, 4, 3}}, // 8 dims, unmerged
    {{4, 0, 3}, {2, 1, 0}},                               // empty
};

template <typename E>
void checkTranspose(MovementLossKernels &t, void *fn, const TransposeCase &c,
                    std::vector<E> x) {
  std::vector<float> xf(x.begin(), x.end()), ref(x.size());
  cpu::transpose(xf.data(), c.shape, c.perm, ref.data());
  // The descriptor the launcher passes (dims merged where they can be).
  Expected<mtc_cuda::TransposeShape> shape =
      cuda::ops::transposeShape(c.shape, c.perm);
  ASSERT_TRUE(shape.ok()) << shape.message();
  mtc_cuda::TransposeShape s = *shape;
  unsigned long long dx = t.upload(x), dy = t.upload(std::vector<E>(x.size()));
  t.launch(fn, {kBlocks}, {kThreads}, 0, {&dx, &dy, &s});
  if (x.empty())
    return; // it ran, touching nothing (ASan would tell)
  std::vector<E> y = t.download<E>(dy, x.size());
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_EQ(float(y[i]), ref[i]) << i;
}

TEST_P(MovementLossKernels, TransposeIsExact) {
  void *f32 = kernel("movement.cu", "transpose_f32");
  void *b16 = kernel("movement.cu", "transpose_bf16");
  for (const TransposeCase &c : kTransposeCases) {
    SCOPED_TRACE("rank " + std::to_string(c.shape.size()) + " perm[0] " +
                 std::to_string(c.perm[0]));
    size_t n = std::accumulate(c.shape.begin(), c.shape.end(), size_t(1),
                               std::multiplies<size_t>());
    std::vector<float> x(n);
    std::iota(x.begin(), x.end(), 1.0f); // every element distinct
    checkTranspose(*this, f32, c, x);
    checkTranspose(*this, b16, c, patterns(n, 3));
  }
}

//===----------------------------------------------------------------------===//
// slice, pad, concat
//===----------------------------------------------------------------------===//

/// inner sizes: scalar in both widths, 16-byte words in f32 only (4), in
/// both (8, 16).
const int64_t kInners[] = {1, 3, 4, 8, 16};

template <typename E>
void checkSlicePad(MovementLossKernels &t, void *slice, void *pad,
                   int64_t inner, std::vector<E> x, int64_t outer, int64_t n,
                   int64_t start, int64_t end) {
  std::vector<float> xf(x.begin(), x.end());
  const size_t out = size_t(outer * (end - start) * inner);
  std::vector<float> ref(out);
  cpu::slice(xf.data(), ref.data(), outer, n, inner, start, end);
  long long o = outer, nn = n, in = inner, s = start, e = end;
  unsigned long long dx = t.upload(x), dy = t.upload(std::vector<E>(out + 1));
  t.launch(slice, {kBlocks}, {kThreads}, 0, {&dx, &dy, &o, &nn, &in, &s, &e});
  std::vector<E> y = t.download<E>(dy, out + 1);
  for (size_t i = 0; i < out; ++i)
    ASSERT_EQ(float(y[i]), ref[i]) << "slice " << i;
  ASSERT_EQ(y[out], E(0)) << "slice wrote past its end";

  // pad(slice(x)): x where [start, end), zeros elsewhere.
  std::vector<float> back(x.size());
  cpu::pad(ref.data(), back.data(), outer, n, inner, start, end);
  unsigned long long dz = t.upload(std::vector<E>(x.size(), E(7)));
  t.launch(pad, {kBlocks}, {kThreads}, 0, {&dy, &dz, &o, &nn, &in, &s, &e});
  std::vector<E> z = t.download<E>(dz, x.size());
  for (size_t i = 0; i < z.size(); ++i)
    ASSERT_EQ(float(z[i]), back[i]) << "pad " << i;
}

TEST_P(MovementLossKernels, SliceAndPadAreExact) {
  void *slice32 = kernel("movement.cu", "slice_f32");
  void *pad32 = kernel("movement.cu", "pad_f32");
  void *slice16 = kernel("movement.cu", "slice_bf16");
  void *pad16 = kernel("movement.cu", "pad_bf16");
  const int64_t outer = 3, n = 10;
  for (int64_t inner : kInners)
    for (auto [start, end] :
         {std::pair<int64_t, int64_t>{2, 7}, {0, 10}, {9, 10}, {4, 4}}) {
      SCOPED_TRACE("inner " + std::to_string(inner) + " [" +
                   std::to_string(start) + ", " + std::to_string(end) + ")");
      std::vector<float> x(size_t(outer * n * inner));
      std::iota(x.begin(), x.end(), 1.0f);
      checkSlicePad(*this, slice32, pad32, inner, x, outer, n, start, end);
      checkSlicePad(*this, slice16, pad16, inner, patterns(x.size(), 5), outer,
                    n, start, end);
    }
}

template <typename E>
void checkConcat(MovementLossKernels &t, void *fn, int64_t inner,
                 const std::vector<int64_t> &sizes, bool misalign,
                 uint32_t seed) {
  const int64_t outer = 3;
  std::vector<std::vector<E>> parts;
  std::vector<std::vector<float>> partsF;
  mtc_cuda::ConcatParts p{};
  p.count = static_cast<int>(sizes.size());
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t count = size_t(outer * sizes[i] * inner);
    std::vector<E> v(count);
    for (size_t j = 0; j < count; ++j)
      v[j] = static_cast<E>((seed + i * 1000 + j) % 60000);
    parts.push_back(v);
    partsF.emplace_back(v.begin(), v.end());
    p.size[i] = sizes[i];
    total += sizes[i];
    if (count == 0) {
      p.part[i] = nullptr; // an empty part may be null
      continue;
    }
    // The last part one element into its allocation: not 16-byte aligned.
    const bool shift = misalign && i + 1 == sizes.size();
    std::vector<E> stored(count + shift);
    std::copy(v.begin(), v.end(), stored.begin() + shift);
    p.part[i] =
        reinterpret_cast<const void *>(t.upload(stored) + shift * sizeof(E));
  }
  std::vector<const float *> ptrs;
  for (const std::vector<float> &v : partsF)
    ptrs.push_back(v.data());
  const size_t out = size_t(outer * total * inner);
  std::vector<float> ref(out);
  cpu::concat(ptrs, sizes, ref.data(), outer, inner);
  long long o = outer, in = inner;
  unsigned long long dy = t.upload(std::vector<E>(out));
  t.launch(fn, {kBlocks}, {kThreads}, 0, {&dy, &p, &o, &in});
  std::vector<E> y = t.download<E>(dy, out);
  for (size_t i = 0; i < out; ++i)
    ASSERT_EQ(float(y[i]), ref[i]) << i;
}

TEST_P(MovementLossKernels, ConcatIsExact) {
  void *f32 = kernel("movement.cu", "concat_f32");
  void *b16 = kernel("movement.cu", "concat_bf16");
  const std::vector<std::vector<int64_t>> sizeSets = {
      {4}, {2, 0, 5}, {1, 2, 3, 1, 1, 2, 1, 4}};
  for (int64_t inner : kInners)
    for (const std::vector<int64_t> &sizes : sizeSets)
      for (bool misalign : {false, true}) {
        SCOPED_TRACE("inner " + std::to_string(inner) + " parts " +
                     std::to_string(sizes.size()) +
                     (misalign ? " misaligned" : ""));
        checkConcat<uint32_t>(*this, f32, inner, sizes, misalign, 11);
        checkConcat<uint16_t>(*this, b16, inner, sizes, misalign, 12);
      }
}

template <typename E>
void checkBroadcastRows(MovementLossKernels &t, void *fn, int64_t rows,
                        int64_t n, bool misalign) {
  std::vector<E> x(n + misalign);
  for (int64_t j = 0; j < n; ++j)
    x[j + misalign] = static_cast<E>(j * 7 + 1);
  long long r = rows, nn = n;
  unsigned long long dx = t.upload(x) + misalign * sizeof(E);
  unsigned long long dy = t.upload(std::vector<E>(rows * n + 1));
  t.launch(fn, {kBlocks}, {kThreads}, 0, {&dx, &dy, &r, &nn});
  std::vector<E> y = t.download<E>(dy, rows * n + 1);
  for (int64_t i = 0; i < rows * n; ++i)
    ASSERT_EQ(y[i], x[i % n + misalign]) << i;
  ASSERT_EQ(y[rows * n], E(0)) << "broadcast_rows wrote past its end";
}

TEST_P(MovementLossKernels, BroadcastRowsIsExact) {
  void *f32 = kernel("movement.cu", "broadcast_rows_f32");
  void *b16 = kernel("movement.cu", "broadcast_rows_bf16");
  for (int64_t n : kInners)
    for (bool misalign : {false, true}) {
      SCOPED_TRACE("n " + std::to_string(n) + (misalign ? " misaligned" : ""));
      checkBroadcastRows<uint32_t>(*this, f32, 13, n, misalign);
      checkBroadcastRows<uint16_t>(*this, b16, 13, n, misalign);
    }
}

//===----------------------------------------------------------------------===//
// cross-entropy
//===----------------------------------------------------------------------===//

constexpr int kIgnore = -100;

struct LossCase {
  int rows, V;
  float softcap;
};
const LossCase kLossCases[] = {
    {5, 1, 0}, {7, 33, 0}, {6, 3000, 0}, {7, 33, 5}, {4, 2999, 30}};

std::vector<int32_t> lossTargets(int rows, int V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(rows);
  for (int32_t &x : t)
    x = static_cast<int32_t>(rng() % V);
  if (rows > 2)
    t[1] = kIgnore;
  return t;
}

/// The CPU's logits after the softcap (linearCrossEntropy's chunkLogits).
std::vector<float> cappedLogits(const std::vector<float> &l, float cap) {
  std::vector<float> c = l;
  if (cap > 0)
    cpu::unary(cpu::Unary::Softcap, l.data(), c.data(), int64_t(l.size()), cap);
  return c;
}

/// Logits wide enough for a softcap of 30 to bend them.
std::vector<float> lossLogits(const LossCase &c, uint32_t seed) {
  const float range = c.softcap > 0 ? 3 * c.softcap : 6;
  return randoms(size_t(c.rows) * c.V, seed, -range, range);
}

void runLoss(MovementLossKernels &t, void *fn, unsigned long long logits,
             unsigned long long targets, int rows, int V, float cap,
             unsigned long long rowLoss, unsigned long long rowLse) {
  int ignore = kIgnore;
  t.launch(fn, {unsigned(rows)}, {256}, 0,
           {&logits, &targets, &rows, &V, &ignore, &cap, &rowLoss, &rowLse});
}

TEST_P(MovementLossKernels, CrossEntropyRowsAndMeanMatchCpu) {
  void *mean = kernel("loss.cu", "cross_entropy_mean");
  double worstRow = 0, worstMean = 0;
  for (const char *entry : {"cross_entropy_f32", "cross_entropy_bf16"}) {
    const bool bf16 = std::string(entry) == "cross_entropy_bf16";
    void *fn = kernel("loss.cu", entry);
    for (const LossCase &c : kLossCases) {
      SCOPED_TRACE(std::string(entry) + " rows=" + std::to_string(c.rows) +
                   " V=" + std::to_string(c.V) +
                   " softcap=" + std::to_string(c.softcap));
      std::vector<float> logits = lossLogits(c, 31 + c.V);
      if (bf16)
        logits = floats(bf16s(logits));
      std::vector<int32_t> targets = lossTargets(c.rows, c.V, 32 + c.V);
      std::vector<float> capped = cappedLogits(logits, c.softcap);
      unsigned long long dl = bf16 ? upload(bf16s(logits)) : upload(logits);
      unsigned long long dt = upload(targets),
                         dloss = upload(std::vector<float>(c.rows, NAN)),
                         dlse = upload(std::vector<float>(c.rows, NAN));
      // Two chunks of rows into one per-row array, as the chunked LM head
      // runs it.
      const int first = c.rows / 2, second = c.rows - first;
      const size_t es = bf16 ? 2 : 4;
      runLoss(*this, fn, dl, dt, first, c.V, c.softcap, dloss, dlse);
      runLoss(*this, fn, dl + es * first * c.V, dt + 4 * first, second, c.V,
              c.softcap, dloss + 4 * first, dlse + 4 * first);
      std::vector<float> loss = download<float>(dloss, c.rows),
                         lse = download<float>(dlse, c.rows);
      for (int r = 0; r < c.rows; ++r) {
        if (targets[r] == kIgnore) {
          EXPECT_EQ(loss[r], 0.0f);
          continue;
        }
        int64_t k = 0;
        const double ref = cpu::crossEntropy(capped.data() + r * c.V,
                                             &targets[r], 1, c.V, kIgnore, &k);
        double m = -INFINITY, s = 0;
        for (int j = 0; j < c.V; ++j)
          m = std::max(m, double(capped[r * c.V + j]));
        for (int j = 0; j < c.V; ++j)
          s += std::exp(capped[r * c.V + j] - m);
        const double refLse = m + std::log(s);
        const double e1 = std::abs(loss[r] - ref) / std::max(1.0, ref),
                     e2 = std::abs(lse[r] - refLse) /
                          std::max(1.0, std::abs(refLse));
        worstRow = std::max({worstRow, e1, e2});
        EXPECT_LE(e1, 1e-4) << "row " << r << ": " << loss[r] << " vs " << ref;
        EXPECT_LE(e2, 1e-4)
            << "row " << r << ": " << lse[r] << " vs " << refLse;
      }
      int64_t count = 0;
      const double ref = cpu::crossEntropy(capped.data(), targets.data(),
                                           c.rows, c.V, kIgnore, &count);
      unsigned long long dmean = upload(std::vector<float>{NAN}),
                         dcount = upload(std::vector<int>{-1});
      int rows = c.rows, ignore = kIgnore;
      launch(mean, {1}, {1024}, 0,
             {&dloss, &dt, &rows, &ignore, &dmean, &dcount});
      EXPECT_EQ(download<int>(dcount, 1)[0], count);
      const double got = download<float>(dmean, 1)[0];
      const double e = std::abs(got - ref) / std::max(1.0, ref);
      worstMean = std::max(worstMean, e);
      EXPECT_LE(e, 1e-5) << got << " vs " << ref;
    }
  }
  std::printf("cross_entropy: max row error %.3g, mean error %.3g\n", worstRow,
              worstMean);
}

TEST_P(MovementLossKernels, CrossEntropyBadTargetIsNanAndAllIgnoredIsZero) {
  void *fn = kernel("loss.cu", "cross_entropy_f32");
  void *mean = kernel("loss.cu", "cross_entropy_mean");
  int rows = 3, V = 40, ignore = kIgnore;
  std::vector<float> logits = randoms(rows * V, 3);
  std::vector<int32_t> targets = {5, V + 2, kIgnore};
  unsigned long long dl = upload(logits), dt = upload(targets),
                     dloss = upload(std::vector<float>(rows, 1)), none = 0;
  runLoss(*this, fn, dl, dt, rows, V, 0, dloss, none);
  std::vector<float> loss = download<float>(dloss, rows);
  EXPECT_FALSE(std::isnan(loss[0]));
  EXPECT_TRUE(std::isnan(loss[1])); // as cpu::crossEntropy's NaN loss
  EXPECT_EQ(loss[2], 0.0f);
  int64_t count = 0;
  EXPECT_TRUE(std::isnan(cpu::crossEntropy(logits.data(), targets.data(), rows,
                                           V, kIgnore, &count)));

  std::vector<int32_t> ignored(rows, kIgnore);
  unsigned long long di = upload(ignored),
                     dmean = upload(std::vector<float>{NAN}),
                     dcount = upload(std::vector<int>{-1});
  launch(mean, {1}, {64}, 0, {&dloss, &di, &rows, &ignore, &dmean, &dcount});
  EXPECT_EQ(download<float>(dmean, 1)[0], 0.0f);
  EXPECT_EQ(download<int>(dcount, 1)[0], 0);
}

TEST_P(MovementLossKernels, CrossEntropyGradMatchesCpu) {
  void *fwd32 = kernel("loss.cu", "cross_entropy_f32");
  void *fwd16 = kernel("loss.cu", "cross_entropy_bf16");
  double worst[2] = {0, 0}; // recomputed, saved lse
  int worstUlps = 0;
  for (const char *entry :
       {"cross_entropy_grad_f32", "cross_entropy_grad_bf16"}) {
    const bool bf16 = std::string(entry) == "cross_entropy_grad_bf16";
    void *fn = kernel("loss.cu", entry);
    for (const LossCase &c : kLossCases)
      for (bool savedLse : {false, true}) {
        SCOPED_TRACE(std::string(entry) + " rows=" + std::to_string(c.rows) +
                     " V=" + std::to_string(c.V) +
                     " softcap=" + std::to_string(c.softcap) +
                     (savedLse ? " saved lse" : " recomputed lse"));
        std::vector<float> logits = lossLogits(c, 41 + c.V);
        if (bf16)
          logits = floats(bf16s(logits));
        std::vector<int32_t> targets = lossTargets(c.rows, c.V, 42 + c.V);
        if (c.rows > 3)
          targets[3] = c.V + 1; // out of range: no one-hot term
        std::vector<float> capped = cappedLogits(logits, c.softcap);
        // The reference: linearCrossEntropyGrad's steps on one chunk.
        const float dloss = 0.75f;
        int64_t count = 0;
        for (int32_t t : targets)
          count += t != kIgnore;
        float scale = float(double(dloss) / double(count));
        std::vector<float> ref(logits.size());
        cpu::crossEntropyGrad(capped.data(), targets.data(), dloss, ref.data(),
                              c.rows, c.V, kIgnore);
        // The error scale: the gradient before the softcap factor 1 - u^2,
        // which cancels as |u| -> 1 (an ulp of difference between the CPU's
        // and the GPU's tanh is then many ulps of the product).
        const std::vector<float> unchained = ref;
        if (c.softcap > 0)
          for (size_t i = 0; i < ref.size(); ++i) {
            const float u = capped[i] * float(1.0 / c.softcap);
            ref[i] *= 1.0f - u * u;
          }

        unsigned long long dl = bf16 ? upload(bf16s(logits)) : upload(logits);
        unsigned long long dt = upload(targets), none = 0, dlse = 0;
        if (savedLse) {
          dlse = upload(std::vector<float>(c.rows, NAN));
          unsigned long long dloss = upload(std::vector<float>(c.rows, NAN));
          runLoss(*this, bf16 ? fwd16 : fwd32, dl, dt, c.rows, c.V, c.softcap,
                  dloss, dlse);
        }
        int rows = c.rows, V = c.V, ignore = kIgnore;
        float cap = c.softcap;
        launch(fn, {unsigned(rows)}, {256}, 0,
               {&dl, &dt, savedLse ? &dlse : &none, &rows, &V, &ignore, &cap,
                &scale});
        std::vector<float> got =
            bf16 ? floats(download<uint16_t>(dl, ref.size()))
                 : download<float>(dl, ref.size());
        for (int r = 0; r < c.rows; ++r)
          for (int j = 0; j < c.V; ++j) {
            const size_t i = size_t(r) * c.V + j;
            if (targets[r] == kIgnore) {
              ASSERT_EQ(got[i], 0.0f) << r << "," << j;
              continue;
            }
            if (bf16) {
              const int ulps = bf16Ulps(toBf16(got[i]), toBf16(ref[i]));
              worstUlps = std::max(worstUlps, ulps);
              ASSERT_LE(ulps, 2)
                  << r << "," << j << ": " << got[i] << " vs " << ref[i];
              continue;
            }
            const double bound = std::abs(unchained[i]) +
                                 (j == targets[r] ? scale : 0.0f) + 1e-30;
            // With a softcap, the GPU's tanhf and the CPU's tanh may differ
            // by a few ulp: an absolute error of about 4 2^-23 |l'| in the
            // exponent of the softmax term.
            const double tol =
                1e-5 + (c.softcap > 0 ? 4 * 0x1p-23 * std::abs(capped[i]) : 0);
            const double e = std::abs(double(got[i]) - ref[i]) / bound;
            worst[savedLse] = std::max(worst[savedLse], e / tol * 1e-5);
            ASSERT_LE(e, tol)
                << r << "," << j << ": " << got[i] << " vs " << ref[i];
          }
      }
  }
  std::printf("cross_entropy_grad: f32 max error %.3g recomputing lse, %.3g "
              "from the saved lse (units where the tolerance is 1e-5), bf16 "
              "max %d ulp\n",
              worst[0], worst[1], worstUlps);
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(MovementLossKernels);
