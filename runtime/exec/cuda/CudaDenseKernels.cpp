#include "runtime/exec/cuda/CudaOpContext.h"
namespace mtc::exec::cudaops {
void addDenseKernels(KernelTable &) {}
} // namespace mtc::exec::cudaops
