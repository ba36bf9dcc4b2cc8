//===- KernelThroughputTest.cpp - Library kernels' memory throughput ------===//
//
// Part of mtc. The bandwidth the normalisation, softmax, reduction and
// elementwise kernels reach on a GPU at training-size shapes: each launch
// timed with CUDA events (median of 20 after 3 warm-ups), printed as the
// bytes the kernel must move (each input read once, each output written
// once) per second. Runs on the real driver only (scripts/gpu-check.sh);
// skipped on cuda_emu, where timings mean nothing. Asserts nothing: the
// numbers are for docs/benchmarks.md and for spotting a slow kernel.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/shapes.cuh"
#include "test/cuda/CudaTestDriver.h"

#include <algorithm>
#include <cstdio>

using namespace mtc;
using namespace mtc::cuda::test;

namespace {

class KernelThroughput : public CudaDriverTest {
protected:
  void SetUp() override {
    CudaDriverTest::SetUp();
    if (!IsSkipped() && emulated())
      GTEST_SKIP() << "timings need a GPU";
  }

  /// Device memory of \p bytes filled with 0x3c bytes (0.0115 in f32 and
  /// bf16: finite, no denormals).
  unsigned long long filled(size_t bytes) {
    unsigned long long p = alloc(bytes);
    EXPECT_EQ(api->cuMemsetD8Async(p, 0x3c, bytes, stream), 0);
    sync();
    return p;
  }

  /// Times \p fn's launch (median of 20) and prints GB/s for \p bytes.
  void time(const std::string &what, void *fn, Dim3 grid, Dim3 block,
            std::vector<void *> args, double bytes) {
    ASSERT_NE(fn, nullptr);
    void *start = nullptr, *stop = nullptr;
    ASSERT_EQ(api->cuEventCreate(&start, 0), 0);
    ASSERT_EQ(api->cuEventCreate(&stop, 0), 0);
    std::vector<float> ms;
    for (int i = 0; i < 23; ++i) {
      api->cuEventRecord(start, stream);
      ASSERT_EQ(api->cuLaunchKernel(fn, grid.x, grid.y, grid.z, block.x,
                                    block.y, block.z, 0, stream, args.data(),
                                    nullptr),
                0)
          << what;
      api->cuEventRecord(stop, stream);
      ASSERT_EQ(api->cuEventSynchronize(stop), 0) << what;
      float t = 0;
      api->cuEventElapsedTime(&t, start, stop);
      if (i >= 3)
        ms.push_back(t);
    }
    api->cuEventDestroy_v2(start);
    api->cuEventDestroy_v2(stop);
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("  [throughput] %-52s %8.1f us %7.0f GB/s\n", what.c_str(),
                med * 1e3, bytes / (med * 1e-3) / 1e9);
  }
};

TEST_P(KernelThroughput, NormSoftmaxReduceElementwise) {
  int rows = 16384, D = 4096;
  const size_t N = size_t(rows) * D;
  float eps = 1e-5f, offset = 1.0f;
  for (bool bf16 : {false, true}) {
    const std::string sfx = bf16 ? "bf16" : "f32";
    const double es = bf16 ? 2 : 4;
    unsigned long long x = filled(N * 4), y = filled(N * 4), g = filled(N * 4),
                       w = filled(D * 4), b = filled(D * 4), dx = filled(N * 4),
                       stats = filled(rows * 8),
                       part = filled(size_t(64) * D * 4);
    std::string shape = " [16384, 4096]";
    for (unsigned block : {256u, 512u}) {
      std::string bs = " block " + std::to_string(block);
      time("rmsnorm_" + sfx + shape + bs,
           kernel("norm.cu", "mtc_rmsnorm_" + sfx), {unsigned(rows)}, {block},
           {&x, &w, &y, &rows, &D, &eps, &offset}, 2 * es * N);
      time("layernorm_" + sfx + shape + bs,
           kernel("norm.cu", "mtc_layernorm_" + sfx), {unsigned(rows)}, {block},
           {&x, &w, &b, &y, &rows, &D, &eps}, 2 * es * N);
      time("rmsnorm_grad_" + sfx + shape + bs,
           kernel("norm.cu", "mtc_rmsnorm_grad_" + sfx), {unsigned(rows)},
           {block}, {&x, &w, &g, &dx, &stats, &rows, &D, &eps, &offset},
           (2 * es + 4) * N);
    }
    int chunks = 64;
    time("rmsnorm_grad_w_" + sfx + shape + " 64 chunks",
         kernel("norm.cu", "mtc_rmsnorm_grad_w_" + sfx),
         {unsigned(D / 128), unsigned(chunks)}, {128},
         {&x, &g, &stats, &part, &rows, &D, &chunks}, 2 * es * N);
    time("layernorm_grad_wb_" + sfx + shape + " 64 chunks",
         kernel("norm.cu", "mtc_layernorm_grad_wb_" + sfx),
         {unsigned(D / 128), unsigned(chunks)}, {128},
         {&x, &g, &stats, &part, &part, &rows, &D, &chunks}, 2 * es * N);

    int outer = 2048, n = 32000, op = 0;
    std::string sm = " [2048, 32000]";
    time("softmax_" + sfx + sm, kernel("reduce.cu", "mtc_softmax_" + sfx),
         {unsigned(outer)}, {512}, {&x, &y, &outer, &n}, 2 * es * outer * n);
    time("softmax_grad_" + sfx + sm,
         kernel("reduce.cu", "mtc_softmax_grad_" + sfx), {unsigned(outer)},
         {512}, {&x, &g, &y, &outer, &n}, 3 * es * outer * n);
    time("reduce_sum_" + sfx + shape, kernel("reduce.cu", "mtc_reduce_" + sfx),
         {unsigned(rows)}, {256}, {&x, &y, &rows, &D, &op}, es * N);
    int o2 = 64, n2 = 256, inner = 4096;
    time("softmax_strided_" + sfx + " [64, 256, 4096]",
         kernel("reduce.cu", "mtc_softmax_strided_" + sfx),
         {unsigned(o2 * inner / 256)}, {256}, {&x, &y, &o2, &n2, &inner},
         2 * es * o2 * n2 * inner);

    long long count = static_cast<long long>(N);
    int silu = 3;
    float param = 0;
    unsigned grid = 132 * 16;
    time("unary_silu_" + sfx + " 64M",
         kernel("elementwise.cu", "mtc_unary_" + sfx), {grid}, {256},
         {&x, &y, &count, &silu, &param}, 2 * es * N);
    time("unary_grad_silu_" + sfx + " 64M",
         kernel("elementwise.cu", "mtc_unary_grad_" + sfx), {grid}, {256},
         {&x, &g, &y, &count, &silu, &param}, 3 * es * N);
    mtc_cuda::BroadcastShape flat{};
    flat.rank = 1;
    flat.size[0] = count;
    flat.strideA[0] = flat.strideB[0] = 1;
    int add = 0;
    time("binary_add_" + sfx + " 64M flat",
         kernel("elementwise.cu", "mtc_binary_" + sfx), {grid}, {256},
         {&x, &g, &y, &flat, &count, &add}, 3 * es * N);
    mtc_cuda::BroadcastShape bias{};
    bias.rank = 2;
    bias.size[0] = rows;
    bias.size[1] = D;
    bias.strideA[0] = D;
    bias.strideA[1] = 1;
    bias.strideB[1] = 1;
    time("binary_add_" + sfx + shape + " + [4096]",
         kernel("elementwise.cu", "mtc_binary_" + sfx), {grid}, {256},
         {&x, &w, &y, &bias, &count, &add}, 2 * es * N);
  }
  // reduceTo: a bias gradient, [16384, 4096] -> [4096], 64 chunks + finish.
  unsigned long long x = filled(N * 4), part = filled(size_t(64) * D * 4),
                     y = filled(D * 4);
  mtc_cuda::ReduceToShape s{};
  s.outN = D;
  s.redN = rows;
  s.keptRank = s.redRank = 1;
  s.keptSize[0] = D;
  s.keptStride[0] = 1;
  s.redSize[0] = rows;
  s.redStride[0] = D;
  int chunks = 64;
  time("reduce_to_f32 [16384, 4096] -> [4096] 64 chunks",
       kernel("reduce.cu", "mtc_reduce_to_f32"),
       {unsigned(D / 128), unsigned(chunks)}, {128}, {&x, &part, &s, &chunks},
       4.0 * N);
  long long n = D;
  int accumulate = 1;
  time("sum_partials_f32 64 x 4096",
       kernel("reduce.cu", "mtc_sum_partials_f32"), {unsigned(D / 128)}, {128},
       {&part, &y, &chunks, &n, &accumulate}, 4.0 * 65 * D);
}

} // namespace

MTC_INSTANTIATE_CUDA_DRIVERS(KernelThroughput);
