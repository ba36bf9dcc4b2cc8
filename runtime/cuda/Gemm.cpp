//===- Gemm.cpp - Matrix products on the GPU ------------------------------===//
//
// Part of mtc. See Gemm.h. cuBLASLt is column-major; a row-major product is
// computed as its transpose, C^T = op(B)^T op(A)^T, whose column-major
// operands are the row-major buffers as they are: B's buffer comes first,
// A's second, and each keeps its own transpose flag.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Gemm.h"

#include "runtime/cuda/DynamicLibrary.h"

#include <vector>

namespace mtc::cuda {

namespace {

struct CublasLtApi {
#define MTC_CUBLASLT_SYMBOL(name, ret, params) ret(*name) params = nullptr;
#include "runtime/cuda/CublasLtSymbols.def"
};

// Values from cublasLt.h / cublas_api.h / library_types.h.
enum : int {
  kStatusSuccess = 0,
  kComputeF32 = 68, ///< CUBLAS_COMPUTE_32F: fp32, no TF32
  kRealF32 = 0,     ///< CUDA_R_32F
  kRealBF16 = 14,   ///< CUDA_R_16BF
  kOpN = 0,
  kOpT = 1,
  kDescTransA = 3,
  kDescTransB = 4,
  kLayoutBatchCount = 5,
  kLayoutBatchStride = 6,
  kPrefMaxWorkspace = 1,
};

int dataType(ElemType t) { return t == ElemType::BF16 ? kRealBF16 : kRealF32; }

class CublasLtEngine : public GemmEngine {
public:
  CublasLtEngine(DynamicLibrary lib, CublasLtApi api, void *handle)
      : lib(std::move(lib)), api(api), handle(handle) {}
  ~CublasLtEngine() override { api.cublasLtDestroy(handle); }

  std::string name() const override {
    return "cuBLASLt " + std::to_string(api.cublasLtGetVersion()) + " (" +
           lib.name() + ")";
  }

  Status gemm(const GemmShape &s, const GemmOperands &o, void *stream,
              void *workspace, size_t workspaceBytes) override {
    if (Status st = checkGemm(s, o); !st.ok())
      return st;
    // Descriptors are destroyed whatever happens.
    std::vector<std::pair<int (*)(void *), void *>> owned;
    struct Release {
      std::vector<std::pair<int (*)(void *), void *>> &owned;
      ~Release() {
        for (auto &[destroy, p] : owned)
          destroy(p);
      }
    } release{owned};
    auto check = [&](int rc, const char *what) -> Status {
      if (rc == kStatusSuccess)
        return Status::success();
      const char *name = api.cublasLtGetStatusName(rc);
      const char *text = api.cublasLtGetStatusString(rc);
      return Status::error(std::string("cuBLASLt: ") + what + ": " +
                           (name ? name : "error") + " (" + std::to_string(rc) +
                           ")" + (text ? std::string(": ") + text : ""));
    };
    void *desc = nullptr;
    if (Status st =
            check(api.cublasLtMatmulDescCreate(&desc, kComputeF32, kRealF32),
                  "cublasLtMatmulDescCreate");
        !st.ok())
      return st;
    owned.push_back({api.cublasLtMatmulDescDestroy, desc});
    // C^T = op(B)^T op(A)^T: first operand B, second A.
    int32_t opFirst = s.transB ? kOpT : kOpN, opSecond = s.transA ? kOpT : kOpN;
    if (Status st = check(api.cublasLtMatmulDescSetAttribute(
                              desc, kDescTransA, &opFirst, sizeof opFirst),
                          "set TRANSA");
        !st.ok())
      return st;
    if (Status st = check(api.cublasLtMatmulDescSetAttribute(
                              desc, kDescTransB, &opSecond, sizeof opSecond),
                          "set TRANSB");
        !st.ok())
      return st;
    auto layout = [&](void **out, ElemType t, int64_t rows, int64_t cols,
                      int64_t stride) -> Status {
      if (Status st = check(api.cublasLtMatrixLayoutCreate(
                                out, dataType(t), static_cast<uint64_t>(rows),
                                static_cast<uint64_t>(cols), rows),
                            "cublasLtMatrixLayoutCreate");
          !st.ok())
        return st;
      owned.push_back({api.cublasLtMatrixLayoutDestroy, *out});
      if (s.batch == 1)
        return Status::success();
      int32_t count = static_cast<int32_t>(s.batch);
      if (Status st = check(api.cublasLtMatrixLayoutSetAttribute(
                                *out, kLayoutBatchCount, &count, sizeof count),
                            "set BATCH_COUNT");
          !st.ok())
        return st;
      return check(api.cublasLtMatrixLayoutSetAttribute(
                       *out, kLayoutBatchStride, &stride, sizeof stride),
                   "set STRIDED_BATCH_OFFSET");
    };
    // Column-major views of the row-major buffers (rows = the row-major
    // row length, the leading dimension).
    void *first = nullptr, *second = nullptr, *out = nullptr;
    Status st = s.transB ? layout(&first, o.bType, s.k, s.n, s.strideB)
                         : layout(&first, o.bType, s.n, s.k, s.strideB);
    if (st.ok())
      st = s.transA ? layout(&second, o.aType, s.m, s.k, s.strideA)
                    : layout(&second, o.aType, s.k, s.m, s.strideA);
    if (st.ok())
      st = layout(&out, o.cType, s.n, s.m, s.strideC);
    if (!st.ok())
      return st;
    void *pref = nullptr;
    if (Status e = check(api.cublasLtMatmulPreferenceCreate(&pref),
                         "cublasLtMatmulPreferenceCreate");
        !e.ok())
      return e;
    owned.push_back({api.cublasLtMatmulPreferenceDestroy, pref});
    uint64_t ws = workspaceBytes;
    if (Status e = check(api.cublasLtMatmulPreferenceSetAttribute(
                             pref, kPrefMaxWorkspace, &ws, sizeof ws),
                         "set MAX_WORKSPACE_BYTES");
        !e.ok())
      return e;
    CublasLtHeuristicResult result{};
    int found = 0;
    if (Status e = check(
            api.cublasLtMatmulAlgoGetHeuristic(handle, desc, first, second, out,
                                               out, pref, 1, &result, &found),
            "cublasLtMatmulAlgoGetHeuristic");
        !e.ok())
      return e;
    if (found == 0)
      return Status::error("cuBLASLt: no algorithm for a " +
                           std::to_string(s.m) + "x" + std::to_string(s.n) +
                           "x" + std::to_string(s.k) + " GEMM");
    return check(api.cublasLtMatmul(handle, desc, &o.alpha, o.b, first, o.a,
                                    second, &o.beta, o.c, out, o.c, out,
                                    &result.algo, workspace, workspaceBytes,
                                    stream),
                 "cublasLtMatmul");
  }

private:
  DynamicLibrary lib;
  CublasLtApi api;
  void *handle;
};

} // namespace

Status checkGemm(const GemmShape &s, const GemmOperands &o) {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0)
    return Status::error("GEMM of " + std::to_string(s.batch) + " x [" +
                         std::to_string(s.m) + ", " + std::to_string(s.k) +
                         "] x [" + std::to_string(s.k) + ", " +
                         std::to_string(s.n) + "]: sizes must be positive");
  if (!o.a || !o.b || !o.c)
    return Status::error("GEMM: null operand");
  if (s.batch > 1 &&
      ((s.strideA != 0 && s.strideA < s.m * s.k) ||
       (s.strideB != 0 && s.strideB < s.k * s.n) || s.strideC < s.m * s.n))
    return Status::error("GEMM: a batch stride is smaller than its matrix");
  if (o.cType == ElemType::F32 && (o.aType != o.bType))
    return Status::error("GEMM: A and B must have one element type");
  return Status::success();
}

Expected<std::unique_ptr<GemmEngine>> openCublasLt() {
  Expected<DynamicLibrary> lib = DynamicLibrary::open(
      {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
      "MTC_CUBLASLT");
  if (!lib)
    return Status::error("cuBLASLt not found: " + lib.message());
  CublasLtApi api;
  std::vector<const char *> names;
  std::vector<void **> slots;
#define MTC_CUBLASLT_SYMBOL(name, ret, params)                                 \
  names.push_back(#name);                                                      \
  slots.push_back(reinterpret_cast<void **>(&api.name));
#include "runtime/cuda/CublasLtSymbols.def"
  if (Status st = resolveSymbols(*lib, names, slots); !st.ok())
    return st;
  void *handle = nullptr;
  if (int rc = api.cublasLtCreate(&handle); rc != kStatusSuccess) {
    const char *name = api.cublasLtGetStatusName(rc);
    return Status::error(std::string("cuBLASLt: cublasLtCreate: ") +
                         (name ? name : "error") + " (" + std::to_string(rc) +
                         ") -- is a GPU and its driver present?");
  }
  return std::unique_ptr<GemmEngine>(
      new CublasLtEngine(std::move(*lib), api, handle));
}

} // namespace mtc::cuda
