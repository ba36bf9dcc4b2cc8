//===- Float16Toolkit.cpp - The CUDA toolkit's own conversions ------------===//
//
// Part of mtc. Compiled only when the CUDA toolkit is present, against its
// cuda_bf16.h / cuda_fp16.h (host code paths), so that CudaFloat16Test can hold
// the emulator's conversions to them bit for bit. Its own translation unit:
// the toolkit headers and cuda_emu.h define the same names.
//
//===----------------------------------------------------------------------===//
#include "test/cuda-emu/Float16Toolkit.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace mtc::emu::toolkit {

uint16_t floatToBf16(float f) {
  return __bfloat16_as_ushort(__float2bfloat16(f));
}
uint16_t floatToBf16Rn(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
uint16_t floatToBf16Rz(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rz(f));
}
uint16_t doubleToBf16(double d) {
  return __bfloat16_as_ushort(__double2bfloat16(d));
}
float bf16ToFloat(uint16_t h) {
  return __bfloat162float(__ushort_as_bfloat16(h));
}
uint16_t floatToHalf(float f) { return __half_as_ushort(__float2half_rn(f)); }
float halfToFloat(uint16_t h) { return __half2float(__ushort_as_half(h)); }

} // namespace mtc::emu::toolkit
