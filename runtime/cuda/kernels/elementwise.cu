//===- elementwise.cu - Unary functions and broadcasting binaries -*- CUDA
//-*-===//
//
// Part of mtc. The CUDA versions of runtime/cpu's unary, unaryGrad and
// binary (runtime/cpu/Elementwise.cpp, the reference semantics). Storage T
// is f32 or bf16 (`_f32`, `_bf16`; every tensor of a call has the same
// type); arithmetic is fp32; bf16 stores round to nearest even. All entries
// are grid-stride loops: grid any size (ceil(n / blockDim.x), capped at a
// few waves, e.g. 132 SMs x 16), block any multiple of 32 up to 1024 (256),
// no dynamic shared memory; every element is computed by exactly one
// thread, so nothing depends on the geometry.
//
//   mtc_unary_T(x, y, n, op, param)          y = f(x), n elements
//   mtc_unary_grad_T(x, dy, dx, n, op, param) dx = dy * f'(x)
//       op is cpu::Unary's number: the line of f in UnaryFns.def
//       (lib/Bundle/UnaryFns.def, embedded beside these files), counting
//       from 0 (0 Neg, 1 Exp, ..., 12 Softcap: param = cap, cap tanh(x /
//       cap)); another op writes nothing. The formulas are runtime/cpu's,
//       term by term: exp and tanh are its fexp and ftanh (fastmath.cuh),
//       sigmoid = 1 / (1 + fexp(-x)), erf is erff, log logf, sqrt sqrtf
//       (correctly rounded), rsqrt 1 / sqrtf; GeluErf's gradient uses expf
//       as runtime/cpu uses std::exp there.
//   mtc_convert_f32_bf16(x, y, n), mtc_convert_bf16_f32(x, y, n)
//       y = x in the other storage type (bf16 rounds to nearest even), n
//       elements: where a bf16 plan's tensors meet f32 ones (docs/cuda.md,
//       "Precisions").
//   mtc_binary_T(a, b, out, shape, n, op)
//       out = a op b with broadcasting: shape is a BroadcastShape
//       (shapes.cuh, by value): the output's dims (right-aligned, up to 8)
//       and each operand's element strides (0 on broadcast dims); n is the
//       output's element count. op is cpu::Binary's number: 0 Add, 1 Sub,
//       2 Mul, 3 Div.
//
// In place (y == x, dx == dy, out == a or b) is allowed.
//
// Memory access: when every pointer of a call is 16-byte aligned, elements
// move as float4 (4 f32 or 8 bf16; kN per pack) with a scalar tail: unary,
// and binary without broadcast (one dimension, unit strides). A broadcast
// binary goes a pack of outputs at a time when the innermost output
// dimension is a multiple of kN and each operand is either broadcast there
// or contiguous there with strides that are multiples of kN (a bias add);
// otherwise one element per thread, coalesced across the warp. Broadcast
// offsets cost one division per output dimension (per pack, or per
// element): collapse adjacent dims with the same pattern first. Indices are
// 32-bit below 2^31 output elements.
//
//===----------------------------------------------------------------------===//
#include "common.cuh"
#include "fastmath.cuh"
#include "shapes.cuh"
#include "vector.cuh"

namespace {

using namespace mtc_cuda;

/// The functions of UnaryFns.def, numbered as cpu::Unary.
enum UnaryOp {
#define MTC_UNARY_FN(Enum, Name, Param) k##Enum,
#include "UnaryFns.def"
};
enum BinaryOp { kAdd, kSub, kMul, kDiv };

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + fexp(-x));
}

/// f(x, p) and dy * f'(x): one specialisation per function of UnaryFns.def
/// (the dispatch below instantiates every one, so a missing one fails the
/// compilation).
template <int Op> struct Unary;

template <> struct Unary<kNeg> {
  static __device__ __forceinline__ float f(float x, float) { return -x; }
  static __device__ __forceinline__ float grad(float, float g, float) {
    return -g;
  }
};
template <> struct Unary<kExp> {
  static __device__ __forceinline__ float f(float x, float) { return fexp(x); }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    return g * fexp(x);
  }
};
template <> struct Unary<kLog> {
  static __device__ __forceinline__ float f(float x, float) { return logf(x); }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    return g / x;
  }
};
template <> struct Unary<kSilu> {
  static __device__ __forceinline__ float f(float x, float) {
    return x * sigmoid(x);
  }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    const float s = sigmoid(x);
    return g * s * (1.0f + x * (1.0f - s));
  }
};
template <> struct Unary<kRelu> {
  static __device__ __forceinline__ float f(float x, float) {
    return x > 0.0f ? x : 0.0f;
  }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    return x > 0.0f ? g : 0.0f;
  }
};
template <> struct Unary<kSigmoid> {
  static __device__ __forceinline__ float f(float x, float) {
    return sigmoid(x);
  }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    const float s = sigmoid(x);
    return g * s * (1.0f - s);
  }
};
template <> struct Unary<kTanh> {
  static __device__ __forceinline__ float f(float x, float) { return ftanh(x); }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    const float t = ftanh(x);
    return g * (1.0f - t * t);
  }
};
template <> struct Unary<kRsqrt> {
  static __device__ __forceinline__ float f(float x, float) {
    return 1.0f / sqrtf(x);
  }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    const float r = 1.0f / sqrtf(x);
    return g * (-0.5f * r * r * r);
  }
};
template <> struct Unary<kSqrt> {
  static __device__ __forceinline__ float f(float x, float) { return sqrtf(x); }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    return g * (0.5f / sqrtf(x));
  }
};
template <> struct Unary<kSquare> {
  static __device__ __forceinline__ float f(float x, float) { return x * x; }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    return g * (2.0f * x);
  }
};
template <> struct Unary<kGeluErf> {
  static __device__ __forceinline__ float f(float x, float) {
    return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
  }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    const float cdf = 0.5f * (1.0f + erff(x * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * expf(-0.5f * x * x);
    return g * (cdf + x * pdf);
  }
};
template <> struct Unary<kGeluTanh> {
  static __device__ __forceinline__ float f(float x, float) {
    return 0.5f * x *
           (1.0f + ftanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
  }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    const float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
    const float t = ftanh(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * x * x);
    return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
  }
};
template <> struct Unary<kSoftcap> {
  static __device__ __forceinline__ float f(float x, float p) {
    return p * ftanh(x / p);
  }
  static __device__ __forceinline__ float grad(float x, float g, float p) {
    const float t = ftanh(x / p);
    return g * (1.0f - t * t);
  }
};
template <> struct Unary<kRelu2> {
  static __device__ __forceinline__ float f(float x, float) {
    const float r = x > 0.0f ? x : 0.0f;
    return r * r;
  }
  static __device__ __forceinline__ float grad(float x, float g, float) {
    const float r = x > 0.0f ? x : 0.0f;
    return g * (2.0f * r);
  }
};

template <int Op> __device__ __forceinline__ float binaryF(float a, float b) {
  switch (Op) {
  case kAdd:
    return a + b;
  case kSub:
    return a - b;
  case kMul:
    return a * b;
  default: // kDiv
    return a / b;
  }
}

//===----------------------------------------------------------------------===//
// Loops
//===----------------------------------------------------------------------===//

__device__ __forceinline__ long long firstIndex() {
  return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long gridThreads() {
  return static_cast<long long>(gridDim.x) * blockDim.x;
}

template <typename T, int Op>
__device__ void unaryLoop(const T *x, T *y, long long n, float p) {
  constexpr int kN = Pack<T>::kN;
  long long done = 0;
  if (aligned16(x) && aligned16(y)) {
    const long long packs = n / kN;
    for (long long v = firstIndex(); v < packs; v += gridThreads()) {
      const Pack<T> in = load16(x + v * kN);
      Pack<T> out;
#pragma unroll
      for (int k = 0; k < kN; ++k)
        out.v[k] = fromFloat<T>(Unary<Op>::f(toFloat(in.v[k]), p));
      store16(y + v * kN, out);
    }
    done = packs * kN;
  }
  for (long long i = done + firstIndex(); i < n; i += gridThreads())
    y[i] = fromFloat<T>(Unary<Op>::f(toFloat(x[i]), p));
}

template <typename T, int Op>
__device__ void unaryGradLoop(const T *x, const T *dy, T *dx, long long n,
                              float p) {
  constexpr int kN = Pack<T>::kN;
  long long done = 0;
  if (aligned16(x) && aligned16(dy) && aligned16(dx)) {
    const long long packs = n / kN;
    for (long long v = firstIndex(); v < packs; v += gridThreads()) {
      const Pack<T> in = load16(x + v * kN), g = load16(dy + v * kN);
      Pack<T> out;
#pragma unroll
      for (int k = 0; k < kN; ++k)
        out.v[k] =
            fromFloat<T>(Unary<Op>::grad(toFloat(in.v[k]), toFloat(g.v[k]), p));
      store16(dx + v * kN, out);
    }
    done = packs * kN;
  }
  for (long long i = done + firstIndex(); i < n; i += gridThreads())
    dx[i] = fromFloat<T>(Unary<Op>::grad(toFloat(x[i]), toFloat(dy[i]), p));
}

/// out[i] for i in [first, n), operand offsets from the shape, in index
/// type I.
template <typename T, int Op, typename I>
__device__ __forceinline__ void broadcastLoop(const T *a, const T *b, T *out,
                                              const BroadcastShape &s,
                                              long long n, long long first) {
  const I end = static_cast<I>(n), step = static_cast<I>(gridThreads());
  for (I i = static_cast<I>(first + firstIndex()); i < end; i += step) {
    I offA = 0, offB = 0, rem = i;
    for (int d = s.rank - 1; d >= 0; --d) {
      const I size = static_cast<I>(s.size[d]);
      const I k = rem % size;
      rem /= size;
      offA += k * static_cast<I>(s.strideA[d]);
      offB += k * static_cast<I>(s.strideB[d]);
    }
    out[i] = fromFloat<T>(binaryF<Op>(toFloat(a[offA]), toFloat(b[offB])));
  }
}

/// Whether an operand (pointer \p p, strides \p stride) can be read a pack
/// of kN outputs along the innermost dimension at a time: broadcast there
/// (one value serves the pack), or contiguous there with every stride a
/// multiple of kN and \p p aligned (so every pack starts 16-byte aligned).
template <int kN>
__device__ __forceinline__ bool packable(const void *p, const long long *stride,
                                         int rank) {
  const long long last = stride[rank - 1];
  if (last == 0)
    return true;
  if (last != 1 || !aligned16(p))
    return false;
  for (int d = 0; d < rank - 1; ++d)
    if (stride[d] % kN != 0)
      return false;
  return true;
}

/// The broadcast loop a pack of kN outputs at a time (one index
/// decomposition per pack): when the innermost output dimension is a
/// multiple of kN and both operands are packable.
template <typename T, int Op, typename I>
__device__ __forceinline__ void broadcastPacks(const T *a, const T *b, T *out,
                                               const BroadcastShape &s,
                                               long long n) {
  constexpr int kN = Pack<T>::kN;
  const bool aRow = s.strideA[s.rank - 1] == 1,
             bRow = s.strideB[s.rank - 1] == 1;
  const I packs = static_cast<I>(n / kN), step = static_cast<I>(gridThreads());
  for (I q = static_cast<I>(firstIndex()); q < packs; q += step) {
    I offA = 0, offB = 0, rem = q * kN;
    for (int d = s.rank - 1; d >= 0; --d) {
      const I size = static_cast<I>(s.size[d]);
      const I k = rem % size;
      rem /= size;
      offA += k * static_cast<I>(s.strideA[d]);
      offB += k * static_cast<I>(s.strideB[d]);
    }
    Pack<T> pa, pb, po;
    float va = 0.0f, vb = 0.0f;
    if (aRow)
      pa = load16(a + offA);
    else
      va = toFloat(a[offA]);
    if (bRow)
      pb = load16(b + offB);
    else
      vb = toFloat(b[offB]);
#pragma unroll
    for (int k = 0; k < kN; ++k)
      po.v[k] = fromFloat<T>(binaryF<Op>(aRow ? toFloat(pa.v[k]) : va,
                                         bRow ? toFloat(pb.v[k]) : vb));
    store16(out + static_cast<size_t>(q) * kN, po);
  }
}

template <typename T, int Op>
__device__ void binaryLoop(const T *a, const T *b, T *out,
                           const BroadcastShape &s, long long n) {
  constexpr int kN = Pack<T>::kN;
  const bool flat =
      s.rank == 0 || (s.rank == 1 && s.strideA[0] == 1 && s.strideB[0] == 1);
  long long done = 0;
  if (flat && aligned16(a) && aligned16(b) && aligned16(out)) {
    const long long packs = n / kN;
    for (long long v = firstIndex(); v < packs; v += gridThreads()) {
      const Pack<T> pa = load16(a + v * kN), pb = load16(b + v * kN);
      Pack<T> po;
#pragma unroll
      for (int k = 0; k < kN; ++k)
        po.v[k] = fromFloat<T>(binaryF<Op>(toFloat(pa.v[k]), toFloat(pb.v[k])));
      store16(out + v * kN, po);
    }
    done = packs * kN;
  } else if (s.rank >= 1 && s.size[s.rank - 1] % kN == 0 && aligned16(out) &&
             packable<kN>(a, s.strideA, s.rank) &&
             packable<kN>(b, s.strideB, s.rank)) {
    if (n <= 0x7fffffffLL)
      broadcastPacks<T, Op, unsigned>(a, b, out, s, n);
    else
      broadcastPacks<T, Op, unsigned long long>(a, b, out, s, n);
    return;
  }
  // A 64-bit division costs several times a 32-bit one: index in 32 bits
  // whenever the output (and so every operand) has fewer than 2^31 elements.
  if (n <= 0x7fffffffLL)
    broadcastLoop<T, Op, unsigned>(a, b, out, s, n, done);
  else
    broadcastLoop<T, Op, unsigned long long>(a, b, out, s, n, done);
}

// The op switch sits outside the loops: each loop is a plain map.
template <typename T>
__device__ void unary(const T *x, T *y, long long n, int op, float p) {
  switch (op) {
#define MTC_UNARY_FN(Enum, Name, Param)                                        \
  case k##Enum:                                                                \
    unaryLoop<T, k##Enum>(x, y, n, p);                                         \
    break;
#include "UnaryFns.def"
  default:
    break;
  }
}

template <typename T>
__device__ void unaryGrad(const T *x, const T *dy, T *dx, long long n, int op,
                          float p) {
  switch (op) {
#define MTC_UNARY_FN(Enum, Name, Param)                                        \
  case k##Enum:                                                                \
    unaryGradLoop<T, k##Enum>(x, dy, dx, n, p);                                \
    break;
#include "UnaryFns.def"
  default:
    break;
  }
}

template <typename T>
__device__ void binary(const T *a, const T *b, T *out, const BroadcastShape &s,
                       long long n, int op) {
  switch (op) {
  case kAdd:
    binaryLoop<T, kAdd>(a, b, out, s, n);
    break;
  case kSub:
    binaryLoop<T, kSub>(a, b, out, s, n);
    break;
  case kMul:
    binaryLoop<T, kMul>(a, b, out, s, n);
    break;
  case kDiv:
    binaryLoop<T, kDiv>(a, b, out, s, n);
    break;
  default:
    break;
  }
}

} // namespace

// Entries (written out: the emulator build finds them by their text).

extern "C" __global__ void __launch_bounds__(1024)
    mtc_unary_f32(const float *x, float *y, long long n, int op, float param) {
  unary(x, y, n, op, param);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_unary_grad_f32(const float *x, const float *dy, float *dx, long long n,
                       int op, float param) {
  unaryGrad(x, dy, dx, n, op, param);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_binary_f32(const float *a, const float *b, float *out,
                   mtc_cuda::BroadcastShape shape, long long n, int op) {
  binary(a, b, out, shape, n, op);
}

extern "C" __global__ void __launch_bounds__(1024)
    mtc_unary_bf16(const mtc_cuda::bf16 *x, mtc_cuda::bf16 *y, long long n,
                   int op, float param) {
  unary(x, y, n, op, param);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_unary_grad_bf16(const mtc_cuda::bf16 *x, const mtc_cuda::bf16 *dy,
                        mtc_cuda::bf16 *dx, long long n, int op, float param) {
  unaryGrad(x, dy, dx, n, op, param);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_binary_bf16(const mtc_cuda::bf16 *a, const mtc_cuda::bf16 *b,
                    mtc_cuda::bf16 *out, mtc_cuda::BroadcastShape shape,
                    long long n, int op) {
  binary(a, b, out, shape, n, op);
}

namespace {

template <typename From, typename To>
__device__ void convertLoop(const From *x, To *y, long long n) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride)
    y[i] = mtc_cuda::fromFloat<To>(mtc_cuda::toFloat(x[i]));
}

} // namespace

extern "C" __global__ void __launch_bounds__(1024)
    mtc_convert_f32_bf16(const float *x, mtc_cuda::bf16 *y, long long n) {
  convertLoop(x, y, n);
}
extern "C" __global__ void __launch_bounds__(1024)
    mtc_convert_bf16_f32(const mtc_cuda::bf16 *x, float *y, long long n) {
  convertLoop(x, y, n);
}
