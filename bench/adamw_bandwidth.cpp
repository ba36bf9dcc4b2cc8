//===- adamw_bandwidth.cpp - AdamW against this machine's memory bandwidth ===//
//
// Part of mtc. A performance probe, not a test:
//
//   ninja -C build mtc-bench-adamw
//   build/bin/mtc-bench-adamw [--params N] [--reps R] [--threads 1,2] [--json
//   F]
//
// For each thread count it measures
//   1. STREAM triad a[i] = b[i] + s * c[i] over three arrays of N floats
//      (counted as STREAM does: 12 bytes per element, 2 reads + 1 write; the
//      write-allocate read of `a` is not counted, so the bus actually moves
//      16 bytes per element: a pass that reads everything it writes, as AdamW
//      does, can exceed 100 % of this figure), threads splitting the range
//      into equal contiguous parts;
//   2. an "AdamW-shaped" in-place probe with AdamW's exact memory traffic and
//      almost no arithmetic: p, m, v read and written, g read (28 bytes per
//      element, no write-allocate since every written array is also read) -
//      the tightest bandwidth bound for AdamW;
//   3. mtc::train::AdamW::step (runtime/train/Optimizer.h) with its
//      ThreadPool over N parameters in tensors of 4M elements (decay on),
//      clipping scale 0.5 folded in as in training: parameters/s, GB/s at
//      28 bytes/parameter, and the percentage of (1) and of (2);
//   4. the same AdamW kernel on 32K parameters (896 KiB of state, resident
//      in L2), single thread: the kernel's arithmetic rate with memory out of
//      the way. If this is not far above (3)'s rate, AdamW is compute-bound.
// Every figure is the median over --reps timed repetitions after one
// untimed warm-up (the minimum time is printed too).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Optimizer.h"

#include "lib/Support/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace mtc::train;

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct Timing {
  double median, min;
};

template <typename F> Timing timeIt(int reps, F &&f) {
  f(); // warm-up: first touch, page faults, caches
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    f();
    t.push_back(now() - t0);
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

/// 64-byte aligned, zero-initialised float array.
struct Buffer {
  float *ptr = nullptr;
  explicit Buffer(size_t n) {
    ptr =
        static_cast<float *>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64));
    if (!ptr) {
      std::fprintf(stderr, "out of memory\n");
      std::exit(1);
    }
    std::memset(ptr, 0, n * 4);
  }
  ~Buffer() { std::free(ptr); }
};

/// Splits [0, n) into numThreads equal contiguous parts on the pool.
template <typename F> void split(ThreadPool &pool, size_t n, F &&f) {
  size_t parts = pool.numThreads();
  pool.parallelFor(parts, [&](size_t i) {
    size_t b = n * i / parts, e = n * (i + 1) / parts;
    f(b, e);
  });
}

void triad(float *__restrict a, const float *__restrict b,
           const float *__restrict c, float s, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i)
    a[i] = b[i] + s * c[i];
}

// AdamW's memory traffic with trivial arithmetic.
void adamwShaped(float *__restrict p, float *__restrict m, float *__restrict v,
                 const float *__restrict g, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; ++i) {
    float gi = g[i];
    float mi = m[i] + gi;
    float vi = v[i] + gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] - mi + vi;
  }
}

std::vector<unsigned> parseList(const char *s) {
  std::vector<unsigned> out;
  for (const char *q = s; *q;) {
    out.push_back(
        static_cast<unsigned>(std::strtoul(q, const_cast<char **>(&q), 10)));
    if (*q == ',')
      ++q;
  }
  return out;
}

} // namespace

int main(int argc, char **argv) {
  size_t n = size_t(64) << 20; // 64M parameters
  int reps = 7;
  std::vector<unsigned> threads = {1, 2};
  const char *jsonPath = nullptr;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--params")
      n = std::strtoull(next(), nullptr, 10);
    else if (a == "--reps")
      reps = std::max(1, std::atoi(next()));
    else if (a == "--threads")
      threads = parseList(next());
    else if (a == "--json")
      jsonPath = next();
    else {
      std::fprintf(
          stderr,
          "usage: %s [--params N] [--reps R] [--threads 1,2] [--json F]\n",
          argv[0]);
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }

  std::printf("mtc-bench-adamw: %zu parameters (%.0f MiB of p, m, v, g), "
              "%d reps, median (min)\n",
              n, n * 16.0 / (1 << 20), reps);
  Buffer p(n), m(n), v(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    // Deterministic, non-trivial values (no denormals).
    p.ptr[i] = 0.02f * static_cast<float>(int(i % 2001) - 1000) / 1000.0f;
    g.ptr[i] =
        1e-3f * static_cast<float>(int((i * 7919) % 2001) - 1000) / 1000.0f;
  }
  // Triad arrays alias the AdamW state (same pages, same size): a = p, b = m,
  // c = v; the AdamW runs below start from whatever the probes left, which is
  // harmless for timing.
  const size_t kTensor = size_t(4) << 20;
  std::vector<AdamWTensor> tensors;
  for (size_t b = 0; b < n; b += kTensor) {
    size_t e = std::min(n, b + kTensor);
    tensors.push_back(
        {p.ptr + b, m.ptr + b, v.ptr + b, g.ptr + b, e - b, true});
  }

  std::string json = "{\"params\": " + std::to_string(n) + ", \"runs\": [";
  for (size_t ti = 0; ti < threads.size(); ++ti) {
    unsigned nt = threads[ti];
    ThreadPool pool(nt);
    // Reset the state so every thread count sees the same values.
    std::memset(m.ptr, 0, n * 4);
    std::memset(v.ptr, 0, n * 4);
    Timing tr = timeIt(reps, [&] {
      split(pool, n, [&](size_t lo, size_t hi) {
        triad(m.ptr, v.ptr, g.ptr, 0.5f, lo, hi);
      });
    });
    std::memset(m.ptr, 0, n * 4);
    Timing sh = timeIt(reps, [&] {
      split(pool, n, [&](size_t lo, size_t hi) {
        adamwShaped(p.ptr, m.ptr, v.ptr, g.ptr, lo, hi);
      });
    });
    std::memset(m.ptr, 0, n * 4);
    std::memset(v.ptr, 0, n * 4);
    AdamW opt(AdamWConfig{}, &pool);
    int64_t step = 0;
    Timing ad = timeIt(reps, [&] { opt.step(tensors, ++step, 1e-3f, 0.5f); });

    double triadGBs = 12.0 * n / tr.median / 1e9;
    double shapedGBs = 28.0 * n / sh.median / 1e9;
    double adamGBs = 28.0 * n / ad.median / 1e9;
    std::printf("threads %u\n", nt);
    std::printf("  triad (12 B/elem)         %7.2f GB/s   (%.1f ms, min %.1f; "
                "%.2f GB/s counting the write-allocate read)\n",
                triadGBs, tr.median * 1e3, tr.min * 1e3, triadGBs * 16 / 12);
    std::printf(
        "  AdamW-shaped (28 B/elem)  %7.2f GB/s   (%.1f ms, min %.1f)\n",
        shapedGBs, sh.median * 1e3, sh.min * 1e3);
    std::printf("  mtc AdamW                 %7.2f GB/s   %.3g params/s   "
                "(%.1f ms, min %.1f)\n",
                adamGBs, n / ad.median, ad.median * 1e3, ad.min * 1e3);
    std::printf("    = %.0f%% of triad, %.0f%% of AdamW-shaped\n",
                100 * adamGBs / triadGBs, 100 * adamGBs / shapedGBs);
    char buf[512];
    std::snprintf(
        buf, sizeof buf,
        "%s{\"threads\": %u, \"triad_GBs\": %.3f, \"shaped_GBs\": %.3f, "
        "\"adamw_GBs\": %.3f, \"adamw_params_per_s\": %.4g, "
        "\"adamw_s\": %.6f, \"adamw_min_s\": %.6f}",
        ti ? ", " : "", nt, triadGBs, shapedGBs, adamGBs, n / ad.median,
        ad.median, ad.min);
    json += buf;
  }

  // In-cache kernel rate (single thread, no pool).
  {
    const size_t nc = 32 << 10;
    AdamWConfig cfg;
    int64_t step = 0;
    const int inner = 200;
    Timing ic = timeIt(reps, [&] {
      for (int k = 0; k < inner; ++k)
        adamwKernel(p.ptr, m.ptr, v.ptr, g.ptr, nc, cfg, ++step, 1e-3f, 0.5f,
                    true);
    });
    double rate = double(nc) * inner / ic.median;
    std::printf("in-cache AdamW kernel, 1 thread, %zu params (L2-resident): "
                "%.3g params/s (%.1f GB/s equivalent at 28 B/param)\n",
                nc, rate, 28.0 * rate / 1e9);
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "], \"incache_params_per_s_1thread\": %.4g}\n", rate);
    json += buf;
  }
  if (jsonPath) {
    FILE *f = std::fopen(jsonPath, "w");
    if (!f) {
      std::perror(jsonPath);
      return 1;
    }
    std::fputs(json.c_str(), f);
    std::fclose(f);
  }
  return 0;
}
