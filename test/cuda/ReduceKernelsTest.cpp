//===- ReduceKernelsTest.cpp - reduce.cu against runtime/cpu --------------===//
//
// Part of mtc. reduce, reduceGrad, softmax and softmaxGrad over the middle
// axis of [outer, n, inner] -- the row form (inner == 1) and the strided form
// -- in f32 and bf16, and reduceTo with its partials, on either driver,
// compared with runtime/cpu on the same inputs. Ragged n (1, below and above
// the block), masked (-inf) and fully masked softmax rows, ties for Max.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/kernels/shapes.cuh"
#include "runtime/cuda/ops/Elementwise.h"
#include "test/cuda/KernelCompare.h"

#include <limits>

using namespace mtc;
using namespace mtc::cuda::test;

namespace {

class ReduceKernels : public CudaDriverTest {
protected:
  /// Uploads \p v as f32, or rounded to bf16 when \p bf16.
  unsigned long long put(const std::vector<float> &v, bool bf16) {
    return bf16 ? upload(toBf16(v)) : upload(v);
  }
  /// n elements back as floats (from bf16 when \p bf16).
  std::vector<float> get(unsigned long long p, size_t n, bool bf16) {
    return bf16 ? fromBf16(download<uint16_t>(p, n)) : download<float>(p, n);
  }
  std::vector<uint16_t> getBf16(unsigned long long p, size_t n) {
    return download<uint16_t>(p, n);
  }
};

struct Axis {
  int outer, n, inner, block;
  std::string str() const {
    return "[" + std::to_string(outer) + "," + std::to_string(n) + "," +
           std::to_string(inner) + "]";
  }
};

const float kInf = std::numeric_limits<float>::infinity();

/// Grid of the form an axis calls for: a block per row, or a thread per
/// column.
Dim3 gridFor(const Axis &a) {
  if (a.inner == 1)
    return {unsigned(a.outer)};
  long long cols = static_cast<long long>(a.outer) * a.inner;
  return {unsigned((cols + a.block - 1) / a.block)};
}

const std::vector<Axis> kRowAxes = {
    {4, 1, 1, 32}, {5, 33, 1, 64}, {3, 1000, 1, 256}, {2, 4099, 1, 1024}};
const std::vector<Axis> kStridedAxes = {
    {3, 17, 5, 32}, {2, 40, 33, 64}, {4, 1, 7, 32}, {1, 300, 1, 32}};

/// Softmax inputs: wide range (the online max is rescaled often), a masked
/// stretch in the first row, a fully masked column/row when \p allMasked.
std::vector<float> softmaxInput(const Axis &a, uint32_t seed, bool allMasked) {
  std::vector<float> x =
      randomFloats(size_t(a.outer) * a.n * a.inner, seed, -30, 30);
  for (int k = 0; k < a.n; k += 3)
    x[size_t(k) * a.inner] = -kInf; // column (0, 0): every third masked
  if (allMasked && a.outer > 1)
    for (int k = 0; k < a.n; ++k)
      x[(size_t(a.n) + k) * a.inner] = -kInf; // column (1, 0): all masked
  return x;
}

TEST_P(ReduceKernels, SoftmaxF32AndBf16) {
  for (bool bf16 : {false, true}) {
    const char *sfx = bf16 ? "bf16" : "f32";
    void *rows = kernel("reduce.cu", std::string("mtc_softmax_") + sfx);
    void *strided =
        kernel("reduce.cu", std::string("mtc_softmax_strided_") + sfx);
    for (const std::vector<Axis> *axes : {&kRowAxes, &kStridedAxes})
      for (Axis a : *axes) {
        std::string what = std::string("softmax_") + sfx + " " + a.str();
        std::vector<float> x = softmaxInput(a, 20 + a.n, true);
        if (bf16)
          x = roundBf16(x);
        unsigned long long dx = put(x, bf16),
                           dy = alloc(x.size() * (bf16 ? 2 : 4));
        if (a.inner == 1 && axes == &kRowAxes)
          launch(rows, gridFor(a), {unsigned(a.block)}, 0,
                 {&dx, &dy, &a.outer, &a.n});
        else
          launch(strided, gridFor(a), {unsigned(a.block)}, 0,
                 {&dx, &dy, &a.outer, &a.n, &a.inner});
        std::vector<float> ref(x.size());
        cpu::softmax(x.data(), ref.data(), a.outer, a.n, a.inner);
        if (bf16)
          EXPECT_LE(maxBf16Ulps(getBf16(dy, x.size()), ref, what), 2);
        else
          EXPECT_LE(maxRelError(get(dy, x.size(), false), ref, 0, what), 1e-5);
      }
  }
}

TEST_P(ReduceKernels, SoftmaxGradF32AndBf16) {
  for (bool bf16 : {false, true}) {
    const char *sfx = bf16 ? "bf16" : "f32";
    void *rows = kernel("reduce.cu", std::string("mtc_softmax_grad_") + sfx);
    void *strided =
        kernel("reduce.cu", std::string("mtc_softmax_grad_strided_") + sfx);
    for (const std::vector<Axis> *axes : {&kRowAxes, &kStridedAxes})
      for (Axis a : *axes) {
        std::string what = std::string("softmax_grad_") + sfx + " " + a.str();
        std::vector<float> x = randomFloats(size_t(a.outer) * a.n * a.inner,
                                            30 + a.n, -3, 3),
                           y(x.size());
        cpu::softmax(x.data(), y.data(), a.outer, a.n, a.inner);
        std::vector<float> g = randomFloats(x.size(), 31 + a.n);
        if (bf16) {
          y = roundBf16(y);
          g = roundBf16(g);
        }
        unsigned long long dY = put(y, bf16), dG = put(g, bf16),
                           dX = alloc(x.size() * (bf16 ? 2 : 4));
        if (axes == &kRowAxes)
          launch(rows, gridFor(a), {unsigned(a.block)}, 0,
                 {&dY, &dG, &dX, &a.outer, &a.n});
        else
          launch(strided, gridFor(a), {unsigned(a.block)}, 0,
                 {&dY, &dG, &dX, &a.outer, &a.n, &a.inner});
        std::vector<float> ref(x.size());
        cpu::softmaxGrad(y.data(), g.data(), ref.data(), a.outer, a.n, a.inner);
        if (bf16)
          EXPECT_LE(maxBf16Ulps(getBf16(dX, x.size()), ref, what), 2);
        else // dy - sum(dy y) cancels: floor 1% of max|dx|
          EXPECT_LE(maxRelError(get(dX, x.size(), false), ref, 1e-2, what),
                    1e-5);
      }
  }
}

const char *kReduceNames[] = {"sum", "mean", "max"};

TEST_P(ReduceKernels, ReduceF32AndBf16) {
  for (bool bf16 : {false, true}) {
    const char *sfx = bf16 ? "bf16" : "f32";
    void *rows = kernel("reduce.cu", std::string("mtc_reduce_") + sfx);
    void *strided =
        kernel("reduce.cu", std::string("mtc_reduce_strided_") + sfx);
    for (const std::vector<Axis> *axes : {&kRowAxes, &kStridedAxes})
      for (Axis a : *axes)
        for (int op = 0; op < 3; ++op) {
          std::string what = std::string("reduce_") + kReduceNames[op] + "_" +
                             sfx + " " + a.str();
          std::vector<float> x =
              randomFloats(size_t(a.outer) * a.n * a.inner, 40 + a.n);
          if (bf16)
            x = roundBf16(x);
          unsigned long long dx = put(x, bf16),
                             dy = alloc(size_t(a.outer) * a.inner * 4);
          if (axes == &kRowAxes)
            launch(rows, gridFor(a), {unsigned(a.block)}, 0,
                   {&dx, &dy, &a.outer, &a.n, &op});
          else
            launch(strided, gridFor(a), {unsigned(a.block)}, 0,
                   {&dx, &dy, &a.outer, &a.n, &a.inner, &op});
          std::vector<float> ref(size_t(a.outer) * a.inner);
          cpu::reduce(cpu::Reduce(op), x.data(), ref.data(), a.outer, a.n,
                      a.inner);
          if (bf16)
            EXPECT_LE(maxBf16Ulps(getBf16(dy, ref.size()), ref, what), 2);
          else // sums of +-2 cancel: floor 1% of the largest result
            EXPECT_LE(maxRelError(get(dy, ref.size(), false), ref, 1e-2, what),
                      op == 2 ? 0 : 1e-4);
        }
  }
}

TEST_P(ReduceKernels, ReduceGradGoesToTheFirstMaximum) {
  for (bool bf16 : {false, true}) {
    const char *sfx = bf16 ? "bf16" : "f32";
    void *rows = kernel("reduce.cu", std::string("mtc_reduce_grad_") + sfx);
    void *strided =
        kernel("reduce.cu", std::string("mtc_reduce_grad_strided_") + sfx);
    for (const std::vector<Axis> *axes : {&kRowAxes, &kStridedAxes})
      for (Axis a : *axes)
        for (int op = 0; op < 3; ++op) {
          std::string what = std::string("reduce_grad_") + kReduceNames[op] +
                             "_" + sfx + " " + a.str();
          // Small integers: the maximum is tied in most columns.
          std::vector<float> x =
              randomFloats(size_t(a.outer) * a.n * a.inner, 50 + a.n, -4, 4);
          for (float &v : x)
            v = std::floor(v);
          if (a.outer > 1) // column (1, 0) all -inf: index 0 gets it
            for (int k = 0; k < a.n; ++k)
              x[(size_t(a.n) + k) * a.inner] = -kInf;
          std::vector<float> g =
              randomFloats(size_t(a.outer) * a.inner, 51 + a.n);
          if (bf16)
            g = roundBf16(g);
          unsigned long long dX = put(x, bf16), dG = put(g, bf16),
                             dDx = alloc(x.size() * 4);
          if (axes == &kRowAxes)
            launch(rows, gridFor(a), {unsigned(a.block)}, 0,
                   {&dX, &dG, &dDx, &a.outer, &a.n, &op});
          else
            launch(strided, gridFor(a), {unsigned(a.block)}, 0,
                   {&dX, &dG, &dDx, &a.outer, &a.n, &a.inner, &op});
          std::vector<float> ref(x.size());
          cpu::reduceGrad(cpu::Reduce(op), x.data(), g.data(), ref.data(),
                          a.outer, a.n, a.inner);
          if (bf16)
            EXPECT_LE(maxBf16Ulps(getBf16(dDx, x.size()), ref, what), 0);
          else
            EXPECT_LE(maxRelError(get(dDx, x.size(), false), ref, 0, what), 0);
        }
  }
}

TEST_P(ReduceKernels, ReduceToSumsABroadcastBack) {
  void *fn = kernel("reduce.cu", "mtc_reduce_to_f32");
  void *finish = kernel("reduce.cu", "mtc_sum_partials_f32");
  struct Case {
    std::vector<int64_t> from, to;
  };
  for (const Case &c : std::vector<Case>{{{37, 70}, {70}},
                                         {{3, 5, 7}, {3, 1, 7}},
                                         {{4, 6, 5}, {6, 1}},
                                         {{2, 3, 4, 5}, {}},
                                         {{5, 6}, {5, 6}},
                                         {{1, 9, 2, 4}, {9, 1, 1}},
                                         {{3, 1, 4}, {1, 1}}}) {
    for (int chunks : {1, 3}) {
      std::string what = "reduce_to " + std::to_string(c.from.size()) +
                         "-d to " + std::to_string(c.to.size()) +
                         "-d chunks=" + std::to_string(chunks);
      // The shape as the launcher builds it (dims merged); the chunks are
      // this test's, to cover both forms of the output.
      Expected<mtc_cuda::ReduceToShape> shape =
          cuda::ops::reduceToShape(c.from, c.to);
      ASSERT_TRUE(shape.ok()) << shape.message();
      mtc_cuda::ReduceToShape s = *shape;
      size_t n = 1;
      for (int64_t d : c.from)
        n *= d;
      std::vector<float> x = randomFloats(n, 60 + unsigned(n));
      unsigned long long dx = upload(x), dy = alloc(s.outN * 4),
                         dp = alloc(size_t(chunks) * s.outN * 4);
      unsigned long long out = chunks == 1 ? dy : dp;
      launch(fn, {unsigned((s.outN + 63) / 64), unsigned(chunks)}, {64}, 0,
             {&dx, &out, &s, &chunks});
      if (chunks > 1) {
        long long outN = s.outN;
        int accumulate = 0;
        launch(finish, {unsigned((outN + 31) / 32)}, {32}, 0,
               {&dp, &dy, &chunks, &outN, &accumulate});
      }
      std::vector<float> ref(s.outN);
      cpu::reduceTo(x.data(), c.from, ref.data(), c.to);
      EXPECT_LE(maxRelError(download<float>(dy, s.outN), ref, 1e-2, what),
                1e-4);
    }
  }
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(ReduceKernels);
