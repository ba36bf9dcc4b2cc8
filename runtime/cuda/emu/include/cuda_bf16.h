//===- cuda_bf16.h - Emulator stand-in for the toolkit header ---*- C++ -*-===//
//
// Part of mtc. A kernel source that includes <cuda_bf16.h> for NVRTC gets
// the emulator's definitions instead (cuda_emu.h provides them all).
//
//===----------------------------------------------------------------------===//
#include "cuda_emu.h"
