//===- adamw_bandwidth.cpp - AdamW against this machine's memory bandwidth ===//
//
// Part of mtc. A performance probe, not a test:
//
//   ninja -C build mtc-bench-adamw
//   build/bin/mtc-bench-adamw [--params N] [--slice N] [--reps R]
//                             [--threads 1,2] [--json F]
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
//      ThreadPool, clipping scale 0.5 folded in as in training, decay on,
//      in four placements:
//        fp32 whole  - fp32 gradients, N parameters in tensors of 4M, one
//                      step call (the resident trainer);
//        bf16 whole  - the same with bf16 gradients (26 bytes/parameter);
//        fp32 slices - one step call per --slice parameters (default 50M),
//                      one after the other, as the streaming trainer updates
//                      one layer at a time;
//        bf16 slices - the same with bf16 gradients;
//      parameters/s, GB/s at 28 (26) bytes/parameter and the percentage of
//      (2);
//   4. the AdamW kernel at each instruction-set level this CPU runs
//      (AdamWKernel.h) on 32K parameters (896 KiB of state, resident in L2),
//      single thread: the kernel's arithmetic rate with memory out of the
//      way. If this is not far above (3)'s rate, AdamW is compute-bound.
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

/// Round-to-nearest-even fp32 -> bf16 bits (finite inputs).
uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// The tensors of [0, n) in pieces of \p piece, with fp32 or bf16 gradients.
std::vector<AdamWTensor> pieces(float *p, float *m, float *v, const float *g,
                                const uint16_t *gh, size_t n, size_t piece) {
  std::vector<AdamWTensor> ts;
  for (size_t b = 0; b < n; b += piece) {
    size_t e = std::min(n, b + piece);
    AdamWTensor t{p + b, m + b, v + b, nullptr, e - b, true, nullptr};
    if (gh)
      t.gradBf16 = gh + b;
    else
      t.grad = g + b;
    ts.push_back(t);
  }
  return ts;
}

} // namespace

int main(int argc, char **argv) {
  size_t n = size_t(64) << 20; // 64M parameters
  size_t slice = size_t(50) << 20;
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
    else if (a == "--slice")
      slice = std::strtoull(next(), nullptr, 10);
    else if (a == "--reps")
      reps = std::max(1, std::atoi(next()));
    else if (a == "--threads")
      threads = parseList(next());
    else if (a == "--json")
      jsonPath = next();
    else {
      std::fprintf(stderr,
                   "usage: %s [--params N] [--slice N] [--reps R] "
                   "[--threads 1,2] [--json F]\n",
                   argv[0]);
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (n == 0 || slice == 0 || threads.empty()) {
    std::fprintf(stderr, "--params, --slice and --threads must be positive\n");
    return 2;
  }

  std::printf("mtc-bench-adamw: %zu parameters (%.0f MiB of p, m, v, g), "
              "slices of %zu, kernel %s, %d reps, median (min)\n",
              n, n * 16.0 / (1 << 20), std::min(slice, n),
              simdLevelName(adamwSimdLevel()), reps);
  Buffer p(n), m(n), v(n), g(n);
  std::vector<uint16_t> gh(n);
  for (size_t i = 0; i < n; ++i) {
    // Deterministic, non-trivial values (no denormals).
    p.ptr[i] = 0.02f * static_cast<float>(int(i % 2001) - 1000) / 1000.0f;
    g.ptr[i] =
        1e-3f * static_cast<float>(int((i * 7919) % 2001) - 1000) / 1000.0f;
    gh[i] = toBf16(g.ptr[i]);
  }
  // Triad arrays alias the AdamW state (same pages, same size): a = m,
  // b = v, c = g; the AdamW runs below start from whatever the probes left,
  // which is harmless for timing.
  const size_t kTensor = size_t(4) << 20;
  struct Placement {
    const char *name;
    std::vector<AdamWTensor> tensors;
    bool perTensor; ///< one step call per tensor (a layer at a time)
    double bytes;   ///< per parameter
  };
  std::vector<Placement> placements = {
      {"fp32_whole", pieces(p.ptr, m.ptr, v.ptr, g.ptr, nullptr, n, kTensor),
       false, 28},
      {"bf16_whole",
       pieces(p.ptr, m.ptr, v.ptr, nullptr, gh.data(), n, kTensor), false, 26},
      {"fp32_slices", pieces(p.ptr, m.ptr, v.ptr, g.ptr, nullptr, n, slice),
       true, 28},
      {"bf16_slices", pieces(p.ptr, m.ptr, v.ptr, nullptr, gh.data(), n, slice),
       true, 26},
  };

  std::string json = "{\"params\": " + std::to_string(n) +
                     ", \"slice\": " + std::to_string(std::min(slice, n)) +
                     ", \"kernel\": \"" + simdLevelName(adamwSimdLevel()) +
                     "\", \"runs\": [";
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
    double triadGBs = 12.0 * n / tr.median / 1e9;
    double shapedGBs = 28.0 * n / sh.median / 1e9;
    std::printf("threads %u\n", nt);
    std::printf("  triad (12 B/elem)         %7.2f GB/s   (%.1f ms, min %.1f; "
                "%.2f GB/s counting the write-allocate read)\n",
                triadGBs, tr.median * 1e3, tr.min * 1e3, triadGBs * 16 / 12);
    std::printf(
        "  AdamW-shaped (28 B/elem)  %7.2f GB/s   (%.1f ms, min %.1f)\n",
        shapedGBs, sh.median * 1e3, sh.min * 1e3);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s{\"threads\": %u, \"triad_GBs\": %.3f, "
                  "\"shaped_GBs\": %.3f",
                  ti ? ", " : "", nt, triadGBs, shapedGBs);
    json += buf;

    AdamW opt(AdamWConfig{}, &pool);
    for (const Placement &pl : placements) {
      std::memset(m.ptr, 0, n * 4);
      std::memset(v.ptr, 0, n * 4);
      int64_t step = 0;
      Timing ad = timeIt(reps, [&] {
        ++step;
        if (pl.perTensor)
          for (const AdamWTensor &t : pl.tensors)
            opt.step(t, step, 1e-3f, 0.5f);
        else
          opt.step(pl.tensors, step, 1e-3f, 0.5f);
      });
      double gbs = pl.bytes * n / ad.median / 1e9;
      std::printf("  mtc AdamW %-12s    %7.2f GB/s   %.3g params/s   (%.1f ms, "
                  "min %.1f) = %.0f%% of AdamW-shaped\n",
                  pl.name, gbs, n / ad.median, ad.median * 1e3, ad.min * 1e3,
                  100 * gbs / shapedGBs);
      std::snprintf(buf, sizeof buf,
                    ", \"%s_s\": %.6f, \"%s_min_s\": %.6f, \"%s_GBs\": %.3f",
                    pl.name, ad.median, pl.name, ad.min, pl.name, gbs);
      json += buf;
    }
    json += "}";
  }
  json += "], \"incache_params_per_s_1thread\": {";

  // In-cache kernel rate per instruction-set level (single thread, no pool).
  bool first = true;
  for (SimdLevel level :
       {SimdLevel::Baseline, SimdLevel::Avx2, SimdLevel::Avx512}) {
    if (!simdLevelSupported(level))
      continue;
    const size_t nc = 32 << 10;
    AdamWConfig cfg;
    int64_t step = 0;
    const int inner = 200;
    Timing ic = timeIt(reps, [&] {
      for (int k = 0; k < inner; ++k)
        adamwKernelAt(level, p.ptr, m.ptr, v.ptr, g.ptr, nc, cfg, ++step, 1e-3f,
                      0.5f, true);
    });
    double rate = double(nc) * inner / ic.median;
    std::printf("in-cache AdamW kernel %-8s 1 thread, %zu params "
                "(L2-resident): %.3g params/s (%.1f GB/s equivalent at 28 "
                "B/param)\n",
                simdLevelName(level), nc, rate, 28.0 * rate / 1e9);
    char buf[100];
    std::snprintf(buf, sizeof buf, "%s\"%s\": %.4g", first ? "" : ", ",
                  simdLevelName(level), rate);
    json += buf;
    first = false;
  }
  json += "}}\n";
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
