//===- faults.cu - Kernels with deliberate memory errors ------------------===//
//
// Part of mtc. Each kernel makes one mistake that a GPU would turn into a
// wrong result or a fault; test/cuda-emu/SanitizerTest.cpp checks that the
// emulator's sanitizer build reports it with this file's line (the test finds
// the line by its "FAULT: name" comment).
//
//===----------------------------------------------------------------------===//

/// Reads one float past `n` floats of dynamic shared memory.
extern "C" __global__ void fault_dynamic_shared(float *out, int n) {
  extern __shared__ float dyn[];
  dyn[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = dyn[n]; // FAULT: dynamic-shared
}

/// Writes past the end of `out` (n floats) when launched with more threads.
extern "C" __global__ void fault_global(float *out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = 1.0f; // FAULT: global
}

/// Indexes a static shared array out of bounds.
extern "C" __global__ void fault_static_shared(float *out) {
  __shared__ float tile[32];
  tile[threadIdx.x] = 1.0f; // FAULT: static-shared
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
}

/// Reads through a float4 pointer that is not 16-byte aligned. (UBSan checks
/// member accesses like this one; it does not check a whole-vector copy
/// `float4 v = *p`, see docs/cuda-emulator.md.)
extern "C" __global__ void fault_misaligned(const float *in, float *out) {
  const float4 *v = reinterpret_cast<const float4 *>(in + 1);
  out[threadIdx.x] = v->y; // FAULT: misaligned
}

/// Recurses until the thread's stack overflows into its guard page.
__device__ int deep(volatile int *p, int n) {
  volatile char pad[1024];
  pad[0] = static_cast<char>(n);
  return n == 0 ? *p : deep(p, n - 1) + pad[0];
}
extern "C" __global__ void fault_stack_overflow(int *out) {
  out[0] = deep(out, 1 << 30);
}
