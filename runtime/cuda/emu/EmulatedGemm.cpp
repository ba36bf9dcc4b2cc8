//===- EmulatedGemm.cpp - GEMMs of the cuda-emu device --------------------===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/emu/EmulatedGemm.h"

#include "runtime/cpu/Kernels.h"
#include "runtime/device/CpuDevice.h"

#include <cstring>
#include <vector>

namespace mtc::emu {

namespace {

float bf16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// \p n elements at \p p of type \p t as fp32 (a copy only for bf16).
const float *asFloat(const void *p, cuda::ElemType t, int64_t n,
                     std::vector<float> &scratch) {
  if (t == cuda::ElemType::F32)
    return static_cast<const float *>(p);
  scratch.resize(static_cast<size_t>(n));
  const auto *h = static_cast<const uint16_t *>(p);
  for (int64_t i = 0; i < n; ++i)
    scratch[i] = bf16ToFloat(h[i]);
  return scratch.data();
}

class EmulatedGemm : public cuda::GemmEngine {
public:
  explicit EmulatedGemm(std::shared_ptr<const cuda::CudaDriverApi> driver)
      : driver(std::move(driver)) {}
  std::string name() const override { return "cpu (emulated cuBLASLt)"; }

  Status gemm(const cuda::GemmShape &s, const cuda::GemmOperands &o,
              void *stream, void *, size_t) override {
    if (Status st = cuda::checkGemm(s, o); !st.ok())
      return st;
    auto *job = new Job{s, o};
    int rc = driver->cuLaunchHostFunc(stream, &Job::run, job);
    if (rc != cuda::kCudaSuccess) {
      delete job;
      return Status::error("emulated GEMM: " +
                           cuda::cudaErrorText(*driver, rc));
    }
    return Status::success();
  }

private:
  struct Job {
    cuda::GemmShape s;
    cuda::GemmOperands o;
    static void run(void *p) {
      std::unique_ptr<Job> job(static_cast<Job *>(p));
      const cuda::GemmShape &s = job->s;
      const cuda::GemmOperands &o = job->o;
      size_t aElem = o.aType == cuda::ElemType::BF16 ? 2 : 4;
      size_t bElem = o.bType == cuda::ElemType::BF16 ? 2 : 4;
      size_t cElem = o.cType == cuda::ElemType::BF16 ? 2 : 4;
      std::vector<float> sa, sb, sc;
      for (int64_t b = 0; b < s.batch; ++b) {
        const char *a = static_cast<const char *>(o.a) + b * s.strideA * aElem;
        const char *bm = static_cast<const char *>(o.b) + b * s.strideB * bElem;
        char *c = static_cast<char *>(o.c) + b * s.strideC * cElem;
        const float *fa = asFloat(a, o.aType, s.m * s.k, sa);
        const float *fb = asFloat(bm, o.bType, s.k * s.n, sb);
        if (o.cType == cuda::ElemType::F32) {
          cpu::gemm(s.transA, s.transB, s.m, s.n, s.k, o.alpha, fa, fb, o.beta,
                    reinterpret_cast<float *>(c));
          continue;
        }
        const float *fc = asFloat(c, o.cType, s.m * s.n, sc);
        std::vector<float> acc(fc, fc + s.m * s.n);
        cpu::gemm(s.transA, s.transB, s.m, s.n, s.k, o.alpha, fa, fb, o.beta,
                  acc.data());
        device::convertF32ToBF16(acc.data(), c, s.m * s.n);
      }
    }
  };
  std::shared_ptr<const cuda::CudaDriverApi> driver;
};

} // namespace

std::unique_ptr<cuda::GemmEngine>
emulatedGemm(std::shared_ptr<const cuda::CudaDriverApi> driver) {
  return std::make_unique<EmulatedGemm>(std::move(driver));
}

} // namespace mtc::emu
