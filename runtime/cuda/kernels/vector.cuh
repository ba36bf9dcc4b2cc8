//===- vector.cuh - 16-byte packs and block-strided row loops ---*- CUDA
//-*-===//
//
// Part of mtc. Memory-bound kernels keep enough bytes in flight only with
// wide loads: a thread moving one bf16 at a time reaches about half of an
// H100's bandwidth (measured, docs/benchmarks.md). Pack<T> is 16 bytes of
// T (4 f32 or 8 bf16) moved as one float4; the row loops below walk a row of D
// elements with the whole block, in packs when the caller has checked that
// every pointer involved is 16-byte aligned (`vec`), with a scalar tail for
// the last D % kN elements, and element by element otherwise. Which thread
// sees which element depends only on (vec, D, blockDim.x), so per-thread
// partial sums, and hence block reductions, stay deterministic.
//
// Requires common.cuh (toFloat / fromFloat).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_KERNELS_VECTOR_CUH
#define MTC_RUNTIME_CUDA_KERNELS_VECTOR_CUH

namespace mtc_cuda {

template <typename T> struct Pack {
  static constexpr int kN = 16 / sizeof(T); ///< 4 f32 or 8 bf16
  union {
    float4 raw;
    T v[kN];
  };
  __device__ __forceinline__ Pack() {}
};

template <typename T> __device__ __forceinline__ Pack<T> load16(const T *p) {
  Pack<T> pk;
  pk.raw = *reinterpret_cast<const float4 *>(p);
  return pk;
}
template <typename T>
__device__ __forceinline__ void store16(T *p, const Pack<T> &pk) {
  *reinterpret_cast<float4 *>(p) = pk.raw;
}
__device__ __forceinline__ bool aligned16(const void *p) {
  return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

/// f(j, a[j]) for this thread's elements of a row of D.
template <typename T, typename F>
__device__ __forceinline__ void forRow(const T *a, int D, bool vec, F f) {
  constexpr int kN = Pack<T>::kN;
  int tail = 0;
  if (vec) {
    const int packs = D / kN;
    for (int p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T> pa = load16(a + p * kN);
#pragma unroll
      for (int k = 0; k < kN; ++k)
        f(p * kN + k, toFloat(pa.v[k]));
    }
    tail = packs * kN;
  }
  for (int j = tail + threadIdx.x; j < D; j += blockDim.x)
    f(j, toFloat(a[j]));
}

/// f(j, a[j], b[j]) for this thread's elements of two rows of D.
template <typename T, typename F>
__device__ __forceinline__ void forRow2(const T *a, const T *b, int D, bool vec,
                                        F f) {
  constexpr int kN = Pack<T>::kN;
  int tail = 0;
  if (vec) {
    const int packs = D / kN;
    for (int p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T> pa = load16(a + p * kN), pb = load16(b + p * kN);
#pragma unroll
      for (int k = 0; k < kN; ++k)
        f(p * kN + k, toFloat(pa.v[k]), toFloat(pb.v[k]));
    }
    tail = packs * kN;
  }
  for (int j = tail + threadIdx.x; j < D; j += blockDim.x)
    f(j, toFloat(a[j]), toFloat(b[j]));
}

/// out[j] = g(j, a[j]) over a row of D.
template <typename T, typename G>
__device__ __forceinline__ void mapRow(const T *a, T *out, int D, bool vec,
                                       G g) {
  constexpr int kN = Pack<T>::kN;
  int tail = 0;
  if (vec) {
    const int packs = D / kN;
    for (int p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T> pa = load16(a + p * kN);
      Pack<T> po;
#pragma unroll
      for (int k = 0; k < kN; ++k)
        po.v[k] = fromFloat<T>(g(p * kN + k, toFloat(pa.v[k])));
      store16(out + p * kN, po);
    }
    tail = packs * kN;
  }
  for (int j = tail + threadIdx.x; j < D; j += blockDim.x)
    out[j] = fromFloat<T>(g(j, toFloat(a[j])));
}

/// out[j] = g(j, a[j], b[j]) over rows of D.
template <typename T, typename G>
__device__ __forceinline__ void mapRow2(const T *a, const T *b, T *out, int D,
                                        bool vec, G g) {
  constexpr int kN = Pack<T>::kN;
  int tail = 0;
  if (vec) {
    const int packs = D / kN;
    for (int p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T> pa = load16(a + p * kN), pb = load16(b + p * kN);
      Pack<T> po;
#pragma unroll
      for (int k = 0; k < kN; ++k)
        po.v[k] =
            fromFloat<T>(g(p * kN + k, toFloat(pa.v[k]), toFloat(pb.v[k])));
      store16(out + p * kN, po);
    }
    tail = packs * kN;
  }
  for (int j = tail + threadIdx.x; j < D; j += blockDim.x)
    out[j] = fromFloat<T>(g(j, toFloat(a[j]), toFloat(b[j])));
}

/// f(j, a[j], b[j], c[j]) for this thread's elements of three rows of D.
template <typename T, typename F>
__device__ __forceinline__ void forRow3(const T *a, const T *b, const T *c,
                                        int D, bool vec, F f) {
  constexpr int kN = Pack<T>::kN;
  int tail = 0;
  if (vec) {
    const int packs = D / kN;
    for (int p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T> pa = load16(a + p * kN), pb = load16(b + p * kN),
                    pc = load16(c + p * kN);
#pragma unroll
      for (int k = 0; k < kN; ++k)
        f(p * kN + k, toFloat(pa.v[k]), toFloat(pb.v[k]), toFloat(pc.v[k]));
    }
    tail = packs * kN;
  }
  for (int j = tail + threadIdx.x; j < D; j += blockDim.x)
    f(j, toFloat(a[j]), toFloat(b[j]), toFloat(c[j]));
}

/// out[j] = g(j, a[j], b[j], c[j]) over rows of D; Out is T or float (an f32
/// result of bf16 inputs: kN floats, stored as kN / 4 float4s).
template <typename T, typename Out, typename G>
__device__ __forceinline__ void mapRow3(const T *a, const T *b, const T *c,
                                        Out *out, int D, bool vec, G g) {
  constexpr int kN = Pack<T>::kN;
  int tail = 0;
  if (vec) {
    const int packs = D / kN;
    for (int p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T> pa = load16(a + p * kN), pb = load16(b + p * kN),
                    pc = load16(c + p * kN);
      float r[kN];
#pragma unroll
      for (int k = 0; k < kN; ++k)
        r[k] =
            g(p * kN + k, toFloat(pa.v[k]), toFloat(pb.v[k]), toFloat(pc.v[k]));
      constexpr int kOut = 16 / sizeof(Out);
#pragma unroll
      for (int q = 0; q < kN / kOut; ++q) {
        Pack<Out> po;
#pragma unroll
        for (int k = 0; k < kOut; ++k)
          po.v[k] = fromFloat<Out>(r[q * kOut + k]);
        store16(out + p * kN + q * kOut, po);
      }
    }
    tail = packs * kN;
  }
  for (int j = tail + threadIdx.x; j < D; j += blockDim.x)
    out[j] = fromFloat<Out>(g(j, toFloat(a[j]), toFloat(b[j]), toFloat(c[j])));
}

} // namespace mtc_cuda

#endif // MTC_RUNTIME_CUDA_KERNELS_VECTOR_CUH
