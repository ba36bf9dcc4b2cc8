//===- cuda_emu.cpp - What the CUDA emulator costs ------------------------===//
//
// Part of mtc. Measures the CPU emulator of CUDA kernels (runtime/cuda/emu)
// in the Release build, without sanitizers, in CPU time of the process (one
// worker) or wall time (two workers):
//
//   fiber switch        one switch of the assembly fibers, and of POSIX
//                       swapcontext for comparison
//   __syncthreads       per thread and barrier, blocks of 256 threads
//   __shfl_xor_sync     per thread and shuffle
//   kernels             the demonstration kernels (test/cuda-emu/kernels) at
//                       training-like shapes: rows/s of add_rmsnorm (D 1024)
//                       and softmax (n 1024), GFLOP/s of sgemm (256^3)
//
//   ninja -C build mtc-bench-cuda-emu && build/bin/mtc-bench-cuda-emu
//
// docs/cuda-emulator.md quotes its output.
//
//===----------------------------------------------------------------------===//
#include "cuda_emu.h"
#include "runtime/cuda/emu/Emulator.h"
#include "runtime/cuda/emu/Fiber.h"
#include "test/cuda-emu/kernels/DemoKernels.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <ucontext.h>
#include <vector>

namespace emu = mtc::emu;

namespace {

/// Seconds of CPU time of the process (the machine may be shared: wall
/// time would count other processes' time slices).
double cpuNow() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
/// Seconds of wall time (for several workers).
double wallNow() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
double (*now)() = cpuNow;

void check(const mtc::Status &s) {
  if (!s.ok()) {
    std::fprintf(stderr, "launch failed: %s\n", s.message().c_str());
    std::exit(1);
  }
}

//===----------------------------------------------------------------------===//
// Context switches
//===----------------------------------------------------------------------===//

constexpr long kSwitches = 10'000'000;

emu::Fiber mainFiber, pingFiber;

void ping(void *) {
  for (;;)
    emu::Fiber::switchTo(pingFiber, mainFiber);
}

double fiberSwitchNs() {
  emu::FiberStack stack(64 * 1024);
  pingFiber.prepare(stack, ping, nullptr);
  double t0 = now();
  for (long i = 0; i < kSwitches / 2; ++i)
    emu::Fiber::switchTo(mainFiber, pingFiber);
  return (now() - t0) / kSwitches * 1e9;
}

ucontext_t mainContext, pingContext;

void pingUcontext() {
  for (;;)
    swapcontext(&pingContext, &mainContext);
}

double ucontextSwitchNs() {
  std::vector<char> stack(64 * 1024);
  getcontext(&pingContext);
  pingContext.uc_stack.ss_sp = stack.data();
  pingContext.uc_stack.ss_size = stack.size();
  pingContext.uc_link = nullptr;
  makecontext(&pingContext, pingUcontext, 0);
  const long n = kSwitches / 10;
  double t0 = now();
  for (long i = 0; i < n / 2; ++i)
    swapcontext(&mainContext, &pingContext);
  return (now() - t0) / n * 1e9;
}

} // namespace

//===----------------------------------------------------------------------===//
// Kernels of the intrinsics' cost
//===----------------------------------------------------------------------===//

__global__ void barriers(int n) {
  for (int i = 0; i < n; ++i)
    __syncthreads();
}

__global__ void shuffles(float *out, int n) {
  float v = static_cast<float>(threadIdx.x);
  for (int i = 0; i < n; ++i)
    v += __shfl_xor_sync(0xffffffffu, v, i & 31);
  out[threadIdx.x] = v;
}

int main() {
  std::printf("fiber switch (assembly)      %6.1f ns\n", fiberSwitchNs());
  std::printf("fiber switch (swapcontext)   %6.1f ns\n", ucontextSwitchNs());

  const int threads = 256, reps = 2000;
  double t0 = now();
  check(emu::launch(barriers, 8, threads, 0, reps));
  std::printf("__syncthreads                %6.1f ns per thread and barrier\n",
              (now() - t0) / (8.0 * threads * reps) * 1e9);
  std::vector<float> out(threads);
  t0 = now();
  check(emu::launch(shuffles, 8, threads, 0, out.data(), reps));
  std::printf("__shfl_xor_sync              %6.1f ns per thread and shuffle\n",
              (now() - t0) / (8.0 * threads * reps) * 1e9);

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  auto randomVec = [&](size_t n) {
    std::vector<float> v(n);
    for (float &x : v)
      x = dist(rng);
    return v;
  };

  for (int workers : {1, 2}) {
    now = workers == 1 ? cpuNow : wallNow;
    std::printf("-- %d worker%s (%s time)\n", workers, workers == 1 ? "" : "s",
                workers == 1 ? "CPU" : "wall");
    emu::LaunchConfig cfg;
    cfg.workers = workers;

    const int rows = 2048, D = 1024;
    std::vector<float> x = randomVec(size_t(rows) * D),
                       r = randomVec(size_t(rows) * D), w = randomVec(D),
                       y(size_t(rows) * D);
    for (int block : {128, 256}) {
      cfg.grid = rows;
      cfg.block = block;
      cfg.dynamicShared = D * sizeof(float);
      t0 = now();
      check(emu::launch(cfg, add_rmsnorm_f32, x.data(), r.data(), w.data(),
                        y.data(), rows, D, D, 1e-5f));
      std::printf("add_rmsnorm_f32  D %d, %4d threads  %8.0f rows/s\n", D,
                  block, rows / (now() - t0));
    }
    std::vector<__nv_bfloat16> xb(x.size()), rb(r.size()), wb(D), yb(y.size());
    for (size_t i = 0; i < x.size(); ++i) {
      xb[i] = __float2bfloat16(x[i]);
      rb[i] = __float2bfloat16(r[i]);
    }
    for (int j = 0; j < D; ++j)
      wb[j] = __float2bfloat16(w[j]);
    for (int block : {128, 256}) {
      cfg.block = block;
      t0 = now();
      check(emu::launch(cfg, add_rmsnorm_bf16, xb.data(), rb.data(), wb.data(),
                        yb.data(), rows, D, D, 1e-5f));
      std::printf("add_rmsnorm_bf16 D %d, %4d threads  %8.0f rows/s\n", D,
                  block, rows / (now() - t0));
    }

    cfg.block = 256;
    cfg.dynamicShared = 0;
    t0 = now();
    check(emu::launch(cfg, softmax_f32, x.data(), y.data(), rows, D));
    std::printf("softmax_f32      n %d,  256 threads  %8.0f rows/s\n", D,
                rows / (now() - t0));

    const int n = 256;
    std::vector<float> A = randomVec(n * n), B = randomVec(n * n), C(n * n);
    cfg.grid = dim3(n / 64, n / 64);
    t0 = now();
    check(emu::launch(cfg, sgemm_f32, n, n, n, 1.0f, A.data(), B.data(), 0.0f,
                      C.data()));
    std::printf("sgemm_f32        %d^3,   256 threads  %8.2f GFLOP/s\n", n,
                2.0 * n * n * n / (now() - t0) / 1e9);
  }
  return 0;
}
