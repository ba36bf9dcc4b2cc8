//===- Float16Toolkit.h - The CUDA toolkit's own conversions ----*- C++ -*-===//
//
// Part of mtc. bf16 / fp16 conversions computed by the installed toolkit
// headers (Float16Toolkit.cpp; only built when the toolkit is found, with
// MTC_HAVE_CUDA_TOOLKIT_HEADERS defined).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TEST_CUDA_EMU_FLOAT16TOOLKIT_H
#define MTC_TEST_CUDA_EMU_FLOAT16TOOLKIT_H

#include <cstdint>

namespace mtc::emu::toolkit {

uint16_t floatToBf16(float f);   ///< __float2bfloat16
uint16_t floatToBf16Rn(float f); ///< __float2bfloat16_rn
uint16_t floatToBf16Rz(float f); ///< __float2bfloat16_rz
uint16_t doubleToBf16(double d); ///< __double2bfloat16
float bf16ToFloat(uint16_t h);   ///< __bfloat162float
uint16_t floatToHalf(float f);   ///< __float2half_rn
float halfToFloat(uint16_t h);   ///< __half2float

} // namespace mtc::emu::toolkit

#endif // MTC_TEST_CUDA_EMU_FLOAT16TOOLKIT_H
