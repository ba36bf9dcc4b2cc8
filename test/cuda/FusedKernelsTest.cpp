//===- FusedKernelsTest.cpp - Emitted fused kernels vs the CPU kernels ----===//
//
// Part of mtc. Every CUDA entry the compiler emitted for the fused regions of
// a model (compiler/Target/CudaKernels.h; the bundle's cuda_kernels) runs on
// ragged shapes against the CPU kernel compiled from the same region (the
// bundle's cpu_kernels), on the same inputs: fp32 outputs within 1e-5
// relative (floor 1% of the largest), bf16 outputs within 2 ulp of the CPU
// result rounded to bf16 (the CPU computing on the bf16 inputs). The bundles
// are compiled at build time (test/cuda/CMakeLists.txt: tiny-llama and
// test/cuda/Inputs/fused-access.mt, whose regions read inputs whole, as
// scalars, suffixes and rows, with sums, means and maxima over rows of one
// warp and of a whole block, and rows of no whole 16-byte steps), each once for
// fp32 and once for a bf16 plan. The launch follows the rule the bundle
// records, as the CUDA backend does. A copy of a kernel with one operator
// changed must fail the comparison; so must one with a row sum changed in the
// path of 16-byte steps alone, or in the element-at-a-time loop alone, exactly
// where that path runs.
//
//===----------------------------------------------------------------------===//

#include "CudaTestDriver.h"
#include "KernelCompare.h"

#include "lib/Bundle/Bundle.h"
#include "lib/Bundle/Plan.h"
#include "lib/Support/Hash.h"
#include "runtime/exec/KernelLibrary.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

namespace mtc::cuda::test {
namespace {

std::string bundlePath(const std::string &name) {
#ifdef MTC_FUSED_TEST_BUNDLES
  return std::string(MTC_FUSED_TEST_BUNDLES) + "/" + name;
#else
  return name;
#endif
}

/// The worst error of one comparison: relative (f32) or in ulps (bf16).
struct Worst {
  double rel = 0;
  int ulps = 0;
  std::string where;
};

class FusedKernels : public CudaDriverTest {
protected:
  /// Loads bundle \p name (skips when the build did not make it).
  bool open(const std::string &name) {
    std::string path = bundlePath(name);
    if (!std::ifstream(path)) {
      skipped = "no bundle " + path + " (built with the compiler only)";
      return false;
    }
    Expected<bundle::Bundle> b = bundle::readFile(path);
    EXPECT_TRUE(b.ok()) << b.message();
    if (!b.ok())
      return false;
    bun = std::move(*b);
    EXPECT_FALSE(bun.cudaKernels.source.empty());
    Expected<std::unique_ptr<exec::KernelLibrary>> lib =
        exec::KernelLibrary::load(bun.cpuKernels);
    EXPECT_TRUE(lib.ok()) << lib.message();
    if (!lib.ok())
      return false;
    cpu = std::move(*lib);
    return true;
  }

  /// Compiles \p source as module \p module and returns it.
  void *module(const std::string &source, const std::string &module) {
    Expected<void *> m = loader->load(module, source);
    EXPECT_TRUE(m.ok()) << m.message();
    return m.ok() ? *m : nullptr;
  }

  /// Runs every (kernel, signature) of the bundle's fused ops from
  /// module \p mod at B, S against the CPU kernels; \p offset shifts every
  /// tensor by that many elements (misaligned 16-byte steps). Returns the
  /// worst errors; \p count receives the entries run.
  Worst runAll(void *mod, int64_t B, int64_t S, int offset, int &count) {
    Worst worst;
    std::set<std::pair<std::string, std::string>> done;
    std::vector<std::pair<const bundle::Op *, std::string>> todo;
    bundle::forEachFusedKernelOp(
        bun, [&](const bundle::Op &op, const std::string &sig) {
          if (done.insert({op.strAttr("kernel"), sig}).second)
            todo.emplace_back(&op, sig);
        });
    count = 0;
    for (auto [op, sig] : todo) {
      runOne(mod, *op, sig, B, S, offset, worst);
      ++count;
      if (::testing::Test::HasFatalFailure())
        break;
    }
    return worst;
  }

  void runOne(void *mod, const bundle::Op &op, const std::string &sig,
              int64_t B, int64_t S, int offset, Worst &worst) {
    const std::string name = op.strAttr("kernel");
    const bundle::CudaFusedKernel *k = bun.cudaKernels.kernel(name);
    ASSERT_NE(k, nullptr) << name;
    const bundle::CudaFusedEntry *e = k->entry(sig);
    ASSERT_NE(e, nullptr) << name << " " << sig;
    const bundle::Function &body = *op.region;
    auto numelOf = [&](int v) {
      return bundle::concreteNumel(body.values[v].shape, B, S, 7);
    };
    long long n = 0;
    for (size_t v = 0; v < body.values.size(); ++v)
      n = std::max<long long>(n, numelOf(static_cast<int>(v)));
    size_t numIn = body.args.size(), numOut = body.results.size();
    // Inputs: random, as the device stores them; the CPU reads the same
    // values as floats.
    std::vector<std::vector<float>> in(numIn), out(numOut);
    std::vector<unsigned long long> devIn, devOut;
    uint32_t seed = static_cast<uint32_t>(xxh64(name.data(), name.size()));
    for (size_t i = 0; i < numIn; ++i) {
      int64_t m = numelOf(body.args[i]);
      in[i] = randomFloats(m, seed + static_cast<uint32_t>(i), -2.0f, 2.0f);
      bool bf = sig[i] == 'b';
      if (bf)
        in[i] = roundBf16(in[i]);
      std::vector<uint16_t> h16 =
          bf ? mtc::cuda::test::toBf16(in[i]) : std::vector<uint16_t>();
      size_t elem = bf ? 2 : 4;
      unsigned long long p = alloc((m + offset) * elem + 16) + offset * elem;
      copyIn(p, bf ? static_cast<const void *>(h16.data()) : in[i].data(),
             m * elem);
      devIn.push_back(p);
    }
    for (size_t r = 0; r < numOut; ++r) {
      int64_t m = numelOf(body.results[r]);
      out[r].assign(m, 0.0f);
      size_t elem = sig[numIn + 1 + r] == 'b' ? 2 : 4;
      devOut.push_back(alloc((m + offset) * elem + 16) + offset * elem);
    }
    // The CPU kernel.
    Expected<exec::KernelLibrary::Kernel> fn = cpu->lookup(name);
    ASSERT_TRUE(fn.ok()) << fn.message();
    std::vector<const float *> inPtrs;
    std::vector<float *> outPtrs;
    for (auto &v : in)
      inPtrs.push_back(v.data());
    for (auto &v : out)
      outPtrs.push_back(v.data());
    (*fn)(inPtrs.data(), outPtrs.data(), n);
    // The CUDA entry, launched by the recorded rule.
    Expected<void *> gfn = loader->function(mod, e->entry);
    ASSERT_TRUE(gfn.ok()) << gfn.message();
    long long items = k->launch == "rows" ? n / k->row : n;
    long long grid = (items + e->perBlock - 1) / e->perBlock;
    if (e->maxBlocks > 0)
      grid = std::min<long long>(grid, e->maxBlocks);
    std::vector<void *> args;
    for (auto &p : devIn)
      args.push_back(&p);
    for (auto &p : devOut)
      args.push_back(&p);
    args.push_back(&n);
    Dim3 g, blk;
    g.x = static_cast<unsigned>(grid);
    blk.x = static_cast<unsigned>(e->block);
    launch(*gfn, g, blk, 0, args);
    // Compare.
    for (size_t r = 0; r < numOut; ++r) {
      size_t m = out[r].size();
      std::string what = e->entry + " output " + std::to_string(r);
      if (sig[numIn + 1 + r] == 'b') {
        std::vector<uint16_t> got = download<uint16_t>(devOut[r], m);
        std::vector<uint16_t> want = mtc::cuda::test::toBf16(out[r]);
        for (size_t j = 0; j < m; ++j) {
          if (std::isnan(out[r][j]))
            continue;
          int u = bf16Ulps(got[j], want[j]);
          if (u > worst.ulps) {
            worst.ulps = u;
            worst.where = what + " at " + std::to_string(j);
          }
        }
      } else {
        std::vector<float> got = download<float>(devOut[r], m);
        double maxAbs = 0;
        for (float v : out[r])
          if (std::isfinite(v))
            maxAbs = std::max(maxAbs, std::fabs(double(v)));
        for (size_t j = 0; j < m; ++j) {
          double want = out[r][j], have = got[j];
          if (std::isnan(want) && std::isnan(have))
            continue;
          double rel = std::fabs(have - want) /
                       std::max({std::fabs(want), 0.01 * maxAbs, 1e-30});
          if (!(rel <= worst.rel) || std::isnan(rel)) {
            worst.rel = std::isnan(rel) ? INFINITY : rel;
            worst.where = what + " at " + std::to_string(j) + ": " +
                          std::to_string(have) + " vs " + std::to_string(want);
          }
        }
      }
    }
  }

  /// Every entry of \p bundleName at ragged shapes, aligned and not.
  void checkBundle(const std::string &bundleName) {
    if (!open(bundleName))
      GTEST_SKIP() << skipped;
    void *mod = module(bun.cudaKernels.source,
                       "fused-" +
                           hex64(xxh64(bun.cudaKernels.source.data(),
                                       bun.cudaKernels.source.size())) +
                           ".cu");
    ASSERT_NE(mod, nullptr);
    for (auto [B, S, offset] :
         {std::tuple<int64_t, int64_t, int>{3, 37, 0}, {1, 5, 1}, {2, 16, 0}}) {
      int count = 0;
      Worst w = runAll(mod, B, S, offset, count);
      EXPECT_GT(count, 0);
      EXPECT_LE(w.rel, 1e-5)
          << bundleName << " B " << B << " S " << S << ": " << w.where;
      EXPECT_LE(w.ulps, 2) << bundleName << " B " << B << " S " << S << ": "
                           << w.where;
      std::printf("%s B=%lld S=%lld offset %d: %d entries, worst %.2e "
                  "relative, %d bf16 ulps\n",
                  bundleName.c_str(), static_cast<long long>(B),
                  static_cast<long long>(S), offset, count, w.rel, w.ulps);
    }
  }

  /// The worst fp32 error of the open bundle's entries at B, S, \p offset
  /// with the first row sum of one path broken: in the 16-byte steps
  /// (\p vec) or in the element-at-a-time loop.
  double broken(bool vec, int64_t B, int64_t S, int offset) {
    std::string src = bun.cudaKernels.source;
    size_t at = 0;
    for (; (at = src.find("acc0 += ", at)) != std::string::npos; ++at) {
      size_t v = src.rfind("// 16-byte steps", at),
             e = src.rfind("// one element at a time", at);
      bool inVec = v != std::string::npos && (e == std::string::npos || v > e);
      if (inVec == vec)
        break;
    }
    EXPECT_NE(at, std::string::npos)
        << (vec ? "no vector" : "no element") << " path with a sum";
    if (at == std::string::npos)
      return 0;
    src.replace(at, 8, "acc0 -= ");
    void *mod = module(src, "fused-broken-" +
                                hex64(xxh64(src.data(), src.size())) + ".cu");
    if (!mod)
      return 0;
    int count = 0;
    return runAll(mod, B, S, offset, count).rel;
  }

  bundle::Bundle bun;
  std::unique_ptr<exec::KernelLibrary> cpu;
  std::string skipped;
};

TEST_P(FusedKernels, TinyLlama) { checkBundle("tiny-llama.mtb"); }
TEST_P(FusedKernels, TinyLlamaBf16) { checkBundle("tiny-llama-bf16.mtb"); }
TEST_P(FusedKernels, AccessModesWarpRows) { checkBundle("fused-access.mtb"); }
TEST_P(FusedKernels, AccessModesWarpRowsBf16) {
  checkBundle("fused-access-bf16.mtb");
}
TEST_P(FusedKernels, AccessModesBlockRows) {
  checkBundle("fused-access-wide.mtb");
}

/// One operator of one kernel changed: the comparison must see it.
TEST_P(FusedKernels, BrokenKernelFails) {
  if (!open("fused-access.mtb"))
    GTEST_SKIP() << skipped;
  for (const char *from : {"acc0 += ", "mtc_fused::rsqrt("}) {
    std::string src = bun.cudaKernels.source;
    size_t at = src.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    std::string to = std::string(from) == "acc0 += " ? "acc0 -= " : "sqrtf(";
    src.replace(at, std::strlen(from), to);
    void *mod = module(src, "fused-broken-" +
                                hex64(xxh64(src.data(), src.size())) + ".cu");
    ASSERT_NE(mod, nullptr);
    int count = 0;
    Worst w = runAll(mod, 3, 37, 0, count);
    EXPECT_GT(w.rel, 1e-3) << "a kernel with '" << to
                           << "' passed the comparison";
  }
}

/// Row kernels take 16-byte steps where the row length (40) and the
/// pointers allow: a sum broken in the steps alone shows in the aligned
/// runs and not in the shifted ones (offset 1: the element loop), a sum
/// broken in the element loop alone the other way round.
TEST_P(FusedKernels, RowsVectorPath) {
  if (!open("fused-access.mtb"))
    GTEST_SKIP() << skipped;
  EXPECT_GT(broken(true, 3, 37, 0), 1e-3);
  EXPECT_LE(broken(true, 1, 5, 1), 1e-5);
  EXPECT_LE(broken(false, 3, 37, 0), 1e-5);
  EXPECT_GT(broken(false, 1, 5, 1), 1e-3);
}

/// Rows of 37 elements are no whole 16-byte steps: aligned or not, every
/// row takes the element loop, and the results match the CPU.
TEST_P(FusedKernels, RowsScalarFallback) {
  checkBundle("fused-access-odd.mtb");
  if (IsSkipped() || HasFailure())
    return;
  EXPECT_LE(broken(true, 3, 37, 0), 1e-5);
  EXPECT_GT(broken(false, 3, 37, 0), 1e-3);
}

MTC_INSTANTIATE_CUDA_DRIVERS(FusedKernels);

} // namespace
} // namespace mtc::cuda::test
