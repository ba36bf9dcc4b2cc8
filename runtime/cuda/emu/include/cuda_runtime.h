//===- cuda_runtime.h - Emulator stand-in for the toolkit one ---*- C++ -*-===//
//
// Part of mtc. A kernel source that includes <cuda_runtime.h> for NVRTC gets
// the emulator's definitions instead (cuda_emu.h provides them all).
//
//===----------------------------------------------------------------------===//
#include "cuda_emu.h"
