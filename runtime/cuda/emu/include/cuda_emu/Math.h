//===- Math.h - CUDA math functions and intrinsics on the host --*- C++ -*-===//
//
// Part of mtc. The device math a kernel calls, mapped to the host's libm:
// the C functions (expf, logf, tanhf, ...) come from <cmath> unchanged; the
// CUDA-only ones (rsqrtf, __expf, __fdividef, min/max overloads, bit
// manipulation, reinterpreting casts) are defined here.
//
// Results are the host libm's: the GPU's expf and __expf differ by up to a
// few ulp (CUDA Programming Guide, "Mathematical Functions"), and nvcc
// contracts a * b + c into an fma by default where the host compiler may not,
// so a kernel's floating-point output is compared with a tolerance, never
// bit for bit, except where a kernel only moves or converts values.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_CUDA_EMU_MATH_H
#define MTC_CUDA_EMU_MATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

// The C math functions in the global namespace (expf, sqrtf, ...).
#include <math.h>

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __tanhf(float x) { return tanhf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return fmaf(x, y, z); }
inline float __saturatef(float x) {
  return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); // NaN -> 0, as on the GPU
}

// min/max overloads CUDA provides for device code.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned int min(unsigned int a, unsigned int b) {
  return a < b ? a : b;
}
inline unsigned int max(unsigned int a, unsigned int b) {
  return a > b ? a : b;
}
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) {
  return a < b ? a : b;
}
inline unsigned long max(unsigned long a, unsigned long b) {
  return a > b ? a : b;
}
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) {
  return a < b ? a : b;
}
inline unsigned long long max(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
// Mixed signedness and precision, as CUDA's overloads resolve them.
inline unsigned int min(int a, unsigned int b) {
  return min(static_cast<unsigned int>(a), b);
}
inline unsigned int min(unsigned int a, int b) {
  return min(a, static_cast<unsigned int>(b));
}
inline unsigned int max(int a, unsigned int b) {
  return max(static_cast<unsigned int>(a), b);
}
inline unsigned int max(unsigned int a, int b) {
  return max(a, static_cast<unsigned int>(b));
}
inline double min(float a, double b) { return fmin(a, b); }
inline double min(double a, float b) { return fmin(a, b); }
inline double max(float a, double b) { return fmax(a, b); }
inline double max(double a, float b) { return fmax(a, b); }

// Reinterpreting and converting casts.
inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}
inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline float __uint_as_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline long long __double_as_longlong(double d) {
  long long i;
  std::memcpy(&i, &d, sizeof i);
  return i;
}
inline double __longlong_as_double(long long i) {
  double d;
  std::memcpy(&d, &i, sizeof d);
  return d;
}
inline int __float2int_rn(float f) { return static_cast<int>(nearbyintf(f)); }
inline int __float2int_rz(float f) { return static_cast<int>(f); }
inline int __float2int_rd(float f) { return static_cast<int>(floorf(f)); }
inline int __float2int_ru(float f) { return static_cast<int>(ceilf(f)); }
inline float __int2float_rn(int i) { return static_cast<float>(i); }

// Bit manipulation.
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz(static_cast<unsigned int>(x));
}
inline int __clzll(long long x) {
  return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  return (x >> 16) | (x << 16);
}
inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return static_cast<unsigned int>((static_cast<uint64_t>(a) * b) >> 32);
}
inline int __mulhi(int a, int b) {
  return static_cast<int>((static_cast<int64_t>(a) * b) >> 32);
}

// Cached / streaming loads and stores: plain accesses on the host.
template <typename T> inline T __ldg(const T *p) { return *p; }
template <typename T> inline T __ldca(const T *p) { return *p; }
template <typename T> inline T __ldcg(const T *p) { return *p; }
template <typename T> inline T __ldcs(const T *p) { return *p; }
template <typename T> inline T __ldlu(const T *p) { return *p; }
template <typename T> inline T __ldcv(const T *p) { return *p; }
template <typename T> inline void __stwb(T *p, T v) { *p = v; }
template <typename T> inline void __stcg(T *p, T v) { *p = v; }
template <typename T> inline void __stcs(T *p, T v) { *p = v; }
template <typename T> inline void __stwt(T *p, T v) { *p = v; }

#endif // MTC_CUDA_EMU_MATH_H
