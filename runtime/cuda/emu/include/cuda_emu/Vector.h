//===- Vector.h - CUDA's vector types for the emulator ----------*- C++ -*-===//
//
// Part of mtc. dim3, uint3 and the vector types (float4, int4, ...) with the
// sizes and alignments CUDA gives them (float4, int4, uint4, double2: 16
// bytes), so that UBSan's alignment check reports a member access through a
// misaligned `float4 *` (a GPU faults on such a load; UBSan does not check a
// whole-vector copy `float4 v = *p`). Global namespace, like CUDA's
// vector_types.h.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_CUDA_EMU_VECTOR_H
#define MTC_CUDA_EMU_VECTOR_H

// One vector type: struct NAME with the given alignment and fields, and its
// make_NAME factory.
#define MTC_EMU_VEC1(NAME, T, ALIGN)                                           \
  struct alignas(ALIGN) NAME {                                                 \
    T x;                                                                       \
  };                                                                           \
  inline NAME make_##NAME(T x) { return NAME{x}; }
#define MTC_EMU_VEC2(NAME, T, ALIGN)                                           \
  struct alignas(ALIGN) NAME {                                                 \
    T x, y;                                                                    \
  };                                                                           \
  inline NAME make_##NAME(T x, T y) { return NAME{x, y}; }
#define MTC_EMU_VEC3(NAME, T, ALIGN)                                           \
  struct alignas(ALIGN) NAME {                                                 \
    T x, y, z;                                                                 \
  };                                                                           \
  inline NAME make_##NAME(T x, T y, T z) { return NAME{x, y, z}; }
#define MTC_EMU_VEC4(NAME, T, ALIGN)                                           \
  struct alignas(ALIGN) NAME {                                                 \
    T x, y, z, w;                                                              \
  };                                                                           \
  inline NAME make_##NAME(T x, T y, T z, T w) { return NAME{x, y, z, w}; }

MTC_EMU_VEC2(char2, signed char, 2)
MTC_EMU_VEC4(char4, signed char, 4)
MTC_EMU_VEC2(uchar2, unsigned char, 2)
MTC_EMU_VEC4(uchar4, unsigned char, 4)
MTC_EMU_VEC2(short2, short, 4)
MTC_EMU_VEC4(short4, short, 8)
MTC_EMU_VEC2(ushort2, unsigned short, 4)
MTC_EMU_VEC4(ushort4, unsigned short, 8)
MTC_EMU_VEC1(int1, int, 4)
MTC_EMU_VEC2(int2, int, 8)
MTC_EMU_VEC3(int3, int, 4)
MTC_EMU_VEC4(int4, int, 16)
MTC_EMU_VEC1(uint1, unsigned int, 4)
MTC_EMU_VEC2(uint2, unsigned int, 8)
MTC_EMU_VEC3(uint3, unsigned int, 4)
MTC_EMU_VEC4(uint4, unsigned int, 16)
MTC_EMU_VEC2(longlong2, long long, 16)
MTC_EMU_VEC2(ulonglong2, unsigned long long, 16)
MTC_EMU_VEC1(float1, float, 4)
MTC_EMU_VEC2(float2, float, 8)
MTC_EMU_VEC3(float3, float, 4)
MTC_EMU_VEC4(float4, float, 16)
MTC_EMU_VEC1(double1, double, 8)
MTC_EMU_VEC2(double2, double, 16)

#undef MTC_EMU_VEC1
#undef MTC_EMU_VEC2
#undef MTC_EMU_VEC3
#undef MTC_EMU_VEC4

/// Grid and block extents; unspecified components are 1 (as in CUDA).
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
      : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

static_assert(sizeof(float4) == 16 && alignof(float4) == 16, "float4 layout");
static_assert(sizeof(float2) == 8 && alignof(float2) == 8, "float2 layout");
static_assert(sizeof(int4) == 16 && alignof(int4) == 16, "int4 layout");
static_assert(sizeof(uint3) == 12 && alignof(uint3) == 4, "uint3 layout");

#endif // MTC_CUDA_EMU_VECTOR_H
