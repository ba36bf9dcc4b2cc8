//===- cuda_gpu.cpp - What a GPU moves and multiplies, through mtc's code -===//
//
// Part of mtc. The two rates the streaming plan lives on, measured through
// the same driver table (runtime/cuda/CudaDriver.h) and GEMM engine
// (runtime/cuda/Gemm.h) that CudaDevice uses:
//
//   copies   host -> device and device -> host, from pinned (registered
//            with cuMemHostRegister, as HostStore is) and from pageable
//            memory, one direction at a time and both at once on two
//            streams; GB/s = 1e9 bytes per second, timed with CUDA events
//   GEMMs    cuBLASLt bf16 (fp32 accumulation) and fp32 (TF32 off) at the
//            shapes of a Llama-8B layer at 8k tokens; TFLOP/s = 2mnk / time
//
//   mtc-bench-cuda [--emu] [--copy-mib N] [--quick]
//
// --emu runs over the emulated driver (a smoke test of this program on a
// machine without a GPU; its numbers are the CPU's). scripts/gpu-check.sh
// runs it on a GPU machine; docs/benchmarks.md holds what it printed.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/emu/EmulatedDriver.h"
#include "runtime/cuda/emu/EmulatedGemm.h"
#include "runtime/device/CpuDevice.h"
#include "runtime/device/CudaDevice.h"

#include <chrono>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <sys/mman.h>
#include <vector>

using namespace mtc;
using namespace mtc::cuda;

namespace {

const CudaDriverApi *D = nullptr;

void check(int rc, const char *what) {
  if (rc != kCudaSuccess) {
    std::fprintf(stderr, "mtc-bench-cuda: %s: %s\n", what,
                 cudaErrorText(*D, rc).c_str());
    std::exit(1);
  }
}

struct Timer {
  void *start = nullptr, *stop = nullptr;
  Timer() {
    check(D->cuEventCreate(&start, 0), "cuEventCreate");
    check(D->cuEventCreate(&stop, 0), "cuEventCreate");
  }
  ~Timer() {
    D->cuEventDestroy_v2(start);
    D->cuEventDestroy_v2(stop);
  }
  float ms() {
    check(D->cuEventSynchronize(stop), "cuEventSynchronize");
    float t = 0;
    check(D->cuEventElapsedTime(&t, start, stop), "cuEventElapsedTime");
    return t;
  }
};

/// GB/s of \p reps copies of \p bytes each way given.
double copyRate(bool h2d, bool d2h, char *host, unsigned long long dev,
                size_t bytes, int reps, void *s1, void *s2) {
  Timer t;
  check(D->cuEventRecord(t.start, s1), "cuEventRecord");
  check(D->cuStreamWaitEvent(s2, t.start, 0), "cuStreamWaitEvent");
  for (int r = 0; r < reps; ++r) {
    if (h2d)
      check(D->cuMemcpyHtoDAsync_v2(dev, host, bytes, s1), "HtoD");
    if (d2h)
      check(D->cuMemcpyDtoHAsync_v2(host + bytes, dev + bytes, bytes, s2),
            "DtoH");
  }
  void *joined = nullptr;
  check(D->cuEventCreate(&joined, 0), "cuEventCreate");
  check(D->cuEventRecord(joined, s2), "cuEventRecord");
  check(D->cuStreamWaitEvent(s1, joined, 0), "cuStreamWaitEvent");
  check(D->cuEventRecord(t.stop, s1), "cuEventRecord");
  double ms = t.ms();
  D->cuEventDestroy_v2(joined);
  double moved = double(bytes) * reps * ((h2d ? 1 : 0) + (d2h ? 1 : 0));
  return moved / (ms * 1e-3) / 1e9;
}

} // namespace

int main(int argc, char **argv) {
  bool emulated = false, quick = false;
  size_t copyMiB = 256;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--emu")
      emulated = true;
    else if (a == "--quick")
      quick = true;
    else if (a == "--copy-mib" && i + 1 < argc)
      copyMiB = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr,
                   "usage: mtc-bench-cuda [--emu] [--copy-mib N] [--quick]\n");
      return 2;
    }
  }
  Expected<std::shared_ptr<const CudaDriverApi>> api =
      emulated ? emu::emulatedCudaDriver() : loadCudaDriver();
  if (!api) {
    std::fprintf(stderr, "mtc-bench-cuda: %s\n", api.message().c_str());
    return 1;
  }
  D = api->get();
  check(D->cuInit(0), "cuInit");
  int dev = 0, version = 0, sms = 0, major = 0, minor = 0;
  check(D->cuDeviceGet(&dev, 0), "cuDeviceGet");
  char name[256] = {};
  check(D->cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
  D->cuDriverGetVersion(&version);
  D->cuDeviceGetAttribute(&sms, kCuDevAttrMultiprocessorCount, dev);
  D->cuDeviceGetAttribute(&major, kCuDevAttrComputeCapabilityMajor, dev);
  D->cuDeviceGetAttribute(&minor, kCuDevAttrComputeCapabilityMinor, dev);
  void *ctx = nullptr;
  check(D->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(D->cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  size_t freeB = 0, totalB = 0;
  check(D->cuMemGetInfo_v2(&freeB, &totalB), "cuMemGetInfo");
  std::printf("device: %s, sm_%d%d, %d SMs, %.1f GiB (%.1f free), driver "
              "%d.%d (%s)\n",
              name, major, minor, sms, totalB / 1073741824.0,
              freeB / 1073741824.0, version / 1000, version % 1000 / 10,
              D->where.c_str());

  void *s1 = nullptr, *s2 = nullptr;
  check(D->cuStreamCreate(&s1, kCuStreamNonBlocking), "cuStreamCreate");
  check(D->cuStreamCreate(&s2, kCuStreamNonBlocking), "cuStreamCreate");

  // --- copies ----------------------------------------------------------------
  if (emulated || quick)
    copyMiB = std::min<size_t>(copyMiB, 16);
  size_t bytes = copyMiB << 20;
  int reps = emulated ? 2 : 8;
  unsigned long long dbuf = 0;
  check(D->cuMemAlloc_v2(&dbuf, 2 * bytes), "cuMemAlloc");
  std::vector<char> pageable(2 * bytes, 1);
  char *pinned = static_cast<char *>(std::aligned_alloc(4096, 2 * bytes));
  std::memset(pinned, 1, 2 * bytes);
  check(D->cuMemHostRegister_v2(pinned, 2 * bytes, kCuMemHostRegisterPortable),
        "cuMemHostRegister");
  copyRate(true, true, pinned, dbuf, bytes, 1, s1, s2); // warm-up
  std::printf("\n| copy (%zu MiB x %d) | GB/s |\n| --- | ---: |\n", copyMiB,
              reps);
  std::printf("| host->device, registered | %.1f |\n",
              copyRate(true, false, pinned, dbuf, bytes, reps, s1, s2));
  std::printf("| device->host, registered | %.1f |\n",
              copyRate(false, true, pinned, dbuf, bytes, reps, s1, s2));
  std::printf("| both at once, registered (sum) | %.1f |\n",
              copyRate(true, true, pinned, dbuf, bytes, reps, s1, s2));
  std::printf(
      "| host->device, pageable | %.1f |\n",
      copyRate(true, false, pageable.data(), dbuf, bytes, reps, s1, s2));
  check(D->cuMemHostUnregister(pinned), "cuMemHostUnregister");
  std::free(pinned);
  // The same through memory the driver allocated (cuMemAllocHost), and
  // through registered memory backed by transparent huge pages: which
  // host memory HostStore should pin.
  void *driverPinned = nullptr;
  check(D->cuMemAllocHost_v2(&driverPinned, 2 * bytes), "cuMemAllocHost");
  std::memset(driverPinned, 1, 2 * bytes);
  char *dp = static_cast<char *>(driverPinned);
  std::printf("| host->device, cuMemAllocHost | %.1f |\n",
              copyRate(true, false, dp, dbuf, bytes, reps, s1, s2));
  std::printf("| device->host, cuMemAllocHost | %.1f |\n",
              copyRate(false, true, dp, dbuf, bytes, reps, s1, s2));
  std::printf("| both at once, cuMemAllocHost (sum) | %.1f |\n",
              copyRate(true, true, dp, dbuf, bytes, reps, s1, s2));
  check(D->cuMemFreeHost(driverPinned), "cuMemFreeHost");
  char *huge =
      static_cast<char *>(std::aligned_alloc(size_t(2) << 20, 2 * bytes));
  madvise(huge, 2 * bytes, MADV_HUGEPAGE);
  std::memset(huge, 1, 2 * bytes);
  check(D->cuMemHostRegister_v2(huge, 2 * bytes, kCuMemHostRegisterPortable),
        "cuMemHostRegister");
  std::printf("| host->device, registered huge pages | %.1f |\n",
              copyRate(true, false, huge, dbuf, bytes, reps, s1, s2));
  std::printf("| device->host, registered huge pages | %.1f |\n",
              copyRate(false, true, huge, dbuf, bytes, reps, s1, s2));
  check(D->cuMemHostUnregister(huge), "cuMemHostUnregister");
  std::free(huge);
  check(D->cuMemFree_v2(dbuf), "cuMemFree");

  // --- CudaDevice: what the streaming runtime sees ---------------------------
  // Weights pinned with registerHost as HostStore does, copied in 64 MiB
  // "layers" on a copy stream while a compute stream runs host-closure
  // launches; and the cost of one launch() round trip (event, host thread,
  // cuStreamWaitValue32 release), which bounds how CudaDevice's closures
  // may be used.
  {
    int64_t layer = int64_t(64) << 20, layers = emulated ? 2 : 32;
    Expected<std::unique_ptr<device::CudaDevice>> opened =
        device::CudaDevice::create(*api, 2 * layer);
    if (!opened) {
      std::fprintf(stderr, "mtc-bench-cuda: %s\n", opened.message().c_str());
      return 1;
    }
    device::CudaDevice &cd = **opened;
    std::vector<char> host(static_cast<size_t>(layer * layers), 1);
    if (Status st =
            cd.registerHost(host.data(), static_cast<int64_t>(host.size()));
        !st) {
      std::fprintf(stderr, "mtc-bench-cuda: %s\n", st.message().c_str());
      return 1;
    }
    Expected<device::Stream> copy = cd.createStream("copy"),
                             compute = cd.createStream("compute");
    Expected<device::Event> e = cd.createEvent();
    // A device error is sticky: it comes back from every later synchronize.
    auto failed = [](const Status &st) {
      if (st)
        return false;
      std::fprintf(stderr, "mtc-bench-cuda: %s\n", st.message().c_str());
      return true;
    };
    if (failed(copy.status()) || failed(compute.status()) || failed(e.status()))
      return 1;
    auto t0 = std::chrono::steady_clock::now();
    for (int64_t l = 0; l < layers; ++l)
      if (failed(cd.copyToDevice(*copy, (l % 2) * layer,
                                 host.data() + l * layer, layer)))
        return 1;
    if (failed(cd.synchronize()))
      return 1;
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    std::printf("\n| CudaDevice | value |\n| --- | ---: |\n");
    std::printf("| host->device, %lld x 64 MiB registered, one stream | %.1f "
                "GB/s |\n",
                (long long)layers, double(layer) * layers / s / 1e9);
    int n = emulated ? 50 : 2000;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i)
      if (failed(cd.launch(*compute, [] {})))
        return 1;
    if (failed(cd.synchronize()))
      return 1;
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    std::printf("| launch() of an empty closure, back to back | %.1f us |\n",
                s / n * 1e6);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n / 10; ++i)
      if (failed(cd.launch(*compute, [] {})) ||
          failed(cd.record(*e, *compute)) || failed(cd.synchronize(*e)))
        return 1;
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    std::printf("| launch() + record + synchronize(event), round trip | %.1f "
                "us |\n",
                s / (n / 10) * 1e6);
  }

  // --- GEMMs -----------------------------------------------------------------
  std::unique_ptr<GemmEngine> engine;
  if (emulated) {
    engine = emu::emulatedGemm(*api);
  } else {
    Expected<std::unique_ptr<GemmEngine>> lt = openCublasLt();
    if (!lt) {
      std::fprintf(stderr, "mtc-bench-cuda: %s\n", lt.message().c_str());
      return 1;
    }
    engine = std::move(*lt);
  }
  struct Shape {
    const char *what;
    int64_t m, n, k;
    bool ta, tb;
  };
  // Row-major C[m,n] = A[m,k] B[k,n] (weights as B, transposed like
  // nn.Linear where tb). Llama-8B: d 4096, ffn 14336, 8k tokens.
  std::vector<Shape> shapes = {
      {"square 8192", 8192, 8192, 8192, false, false},
      {"qkv/o proj fwd (x W^T)", 8192, 4096, 4096, false, true},
      {"mlp up fwd", 8192, 14336, 4096, false, true},
      {"mlp down fwd", 8192, 4096, 14336, false, true},
      {"mlp up dX (dY W)", 8192, 4096, 14336, false, false},
      {"mlp up dW (dY^T X)", 14336, 4096, 8192, true, false},
  };
  if (emulated)
    shapes = {{"square 96", 96, 96, 96, false, false},
              {"x W^T", 64, 80, 48, false, true}};
  size_t maxElems = 0;
  for (const Shape &sh : shapes)
    maxElems = std::max<size_t>(
        maxElems, std::max(sh.m * sh.k, std::max(sh.k * sh.n, sh.m * sh.n)));
  std::vector<float> randF32(maxElems);
  std::vector<uint16_t> randBf16(maxElems);
  {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float &x : randF32)
      x = dist(rng);
    device::convertF32ToBF16(randF32.data(), randBf16.data(), maxElems);
  }
  size_t wsBytes = 64 << 20;
  unsigned long long ws = 0;
  check(D->cuMemAlloc_v2(&ws, wsBytes), "cuMemAlloc");
  std::printf("\n%s\n\n| GEMM | m x n x k | bf16 TFLOP/s | fp32 TFLOP/s |\n"
              "| --- | --- | ---: | ---: |\n",
              engine->name().c_str());
  for (const Shape &sh : shapes) {
    double rate[2] = {0, 0};
    for (int bf = 0; bf < 2; ++bf) {
      size_t elem = bf == 0 ? 2 : 4;
      unsigned long long a = 0, b = 0, c = 0;
      check(D->cuMemAlloc_v2(&a, sh.m * sh.k * elem), "cuMemAlloc");
      check(D->cuMemAlloc_v2(&b, sh.k * sh.n * elem), "cuMemAlloc");
      check(D->cuMemAlloc_v2(&c, sh.m * sh.n * elem), "cuMemAlloc");
      // Random operands in [-1, 1): constant data draws less power and
      // runs at higher clocks, which would flatter the rates.
      const char *src = bf == 0
                            ? reinterpret_cast<const char *>(randBf16.data())
                            : reinterpret_cast<const char *>(randF32.data());
      check(D->cuMemcpyHtoDAsync_v2(a, src, sh.m * sh.k * elem, s1), "HtoD");
      check(D->cuMemcpyHtoDAsync_v2(b, src, sh.k * sh.n * elem, s1), "HtoD");
      check(D->cuStreamSynchronize(s1), "cuStreamSynchronize");
      GemmShape gs;
      gs.transA = sh.ta;
      gs.transB = sh.tb;
      gs.m = sh.m;
      gs.n = sh.n;
      gs.k = sh.k;
      GemmOperands o;
      o.a = reinterpret_cast<void *>(a);
      o.b = reinterpret_cast<void *>(b);
      o.c = reinterpret_cast<void *>(c);
      o.aType = o.bType = o.cType = bf == 0 ? ElemType::BF16 : ElemType::F32;
      int iters = emulated ? 1 : (bf == 0 ? 20 : 5);
      auto run = [&] {
        Status st =
            engine->gemm(gs, o, s1, reinterpret_cast<void *>(ws), wsBytes);
        if (!st.ok()) {
          std::fprintf(stderr, "mtc-bench-cuda: %s\n", st.message().c_str());
          std::exit(1);
        }
      };
      run(); // warm-up (heuristic query, first launch)
      Timer t;
      check(D->cuEventRecord(t.start, s1), "cuEventRecord");
      for (int i = 0; i < iters; ++i)
        run();
      check(D->cuEventRecord(t.stop, s1), "cuEventRecord");
      double ms = t.ms() / iters;
      rate[bf] = 2.0 * sh.m * sh.n * sh.k / (ms * 1e-3) / 1e12;
      for (unsigned long long p : {a, b, c})
        D->cuMemFree_v2(p);
    }
    std::printf("| %s | %lld x %lld x %lld | %.1f | %.1f |\n", sh.what,
                (long long)sh.m, (long long)sh.n, (long long)sh.k, rate[0],
                rate[1]);
  }
  D->cuMemFree_v2(ws);
  D->cuStreamDestroy_v2(s1);
  D->cuStreamDestroy_v2(s2);
  D->cuDevicePrimaryCtxRelease_v2(dev);
  return 0;
}
