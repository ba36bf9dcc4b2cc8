//===- SignatureCheck.cpp - The symbol tables against the real headers ----===//
//
// Part of mtc. Compiled only where the CUDA toolkit's headers are found (it is
// never linked into anything): for every entry of CudaDriverSymbols.def,
// NvrtcSymbols.def and CublasLtSymbols.def, the declared parameter types must
// have the sizes of the toolkit's declaration's, so that a mistyped table entry
// fails the build here instead of corrupting a call on a GPU machine.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Gemm.h"
#include <cstddef>
#include <cstdint>

#include <cublasLt.h>
#include <cuda.h>
#include <nvrtc.h>
#include <tuple>

namespace {

template <typename F> struct Params;
template <typename R, typename... A> struct Params<R (*)(A...)> {
  using Sizes = std::tuple<std::integral_constant<size_t, sizeof(A)>...>;
  static constexpr size_t returnSize = sizeof(R);
};

template <typename Ours, typename Theirs> constexpr bool sameShape() {
  return std::is_same_v<typename Params<Ours>::Sizes,
                        typename Params<Theirs>::Sizes> &&
         Params<Ours>::returnSize == Params<Theirs>::returnSize;
}

#define MTC_CUDA_SYMBOL(name, params)                                          \
  static_assert(sameShape<int(*) params, decltype(&::name)>(),                 \
                #name " in CudaDriverSymbols.def does not match cuda.h");
#include "runtime/cuda/CudaDriverSymbols.def"

#define MTC_NVRTC_SYMBOL(name, ret, params)                                    \
  static_assert(sameShape<ret(*) params, decltype(&::name)>(),                 \
                #name " in NvrtcSymbols.def does not match nvrtc.h");
#include "runtime/cuda/NvrtcSymbols.def"

#define MTC_CUBLASLT_SYMBOL(name, ret, params)                                 \
  static_assert(sameShape<ret(*) params, decltype(&::name)>(),                 \
                #name " in CublasLtSymbols.def does not match cublasLt.h");
#include "runtime/cuda/CublasLtSymbols.def"

static_assert(sizeof(mtc::cuda::CublasLtAlgo) == sizeof(cublasLtMatmulAlgo_t));
static_assert(sizeof(mtc::cuda::CublasLtHeuristicResult) ==
              sizeof(cublasLtMatmulHeuristicResult_t));

} // namespace
