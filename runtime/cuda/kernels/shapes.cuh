//===- shapes.cuh - Shape descriptors passed to kernels by value -*- CUDA
//-*-===//
//
// Part of mtc. Plain structs, valid both in CUDA C (elementwise.cu,
// reduce.cu, movement.cu take them as kernel parameters, by value) and in host
// C++ (the launching code fills them: include
// "runtime/cuda/kernels/shapes.cuh"), so the two sides share one layout. No
// CUDA keywords in here.
//
// Shapes are up to kMaxDims dimensions, outermost first. Strides are in
// elements. The host is expected to merge adjacent dimensions with the same
// broadcast pattern first (as runtime/cpu's collapse does): fewer dimensions
// mean fewer divisions per element in the kernel.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CUDA_KERNELS_SHAPES_CUH
#define MTC_RUNTIME_CUDA_KERNELS_SHAPES_CUH

namespace mtc_cuda {

constexpr int kMaxDims = 8;

/// A broadcasting binary op's iteration space (mtc_binary_*): the output is
/// contiguous over size[0..rank); operand a's element for output index
/// (i_0, .., i_{rank-1}) is a[sum_d i_d strideA[d]] (stride 0 on a
/// broadcast dimension), b's likewise. rank 0 is a single element.
struct BroadcastShape {
  int rank;
  long long size[kMaxDims];
  long long strideA[kMaxDims];
  long long strideB[kMaxDims];
};

/// A sum of x down to a broadcast operand's shape (mtc_reduce_to_f32). The
/// output y is contiguous over the kept dimensions (keptSize, outermost
/// first; outN elements); each output sums x over the reduced dimensions
/// (redSize; redN = their product >= 1) in row-major order of the reduced
/// indices. keptStride / redStride are x's strides. keptRank 0: one output;
/// redRank 0: a copy.
struct ReduceToShape {
  long long outN, redN;
  int keptRank, redRank;
  long long keptSize[kMaxDims], keptStride[kMaxDims];
  long long redSize[kMaxDims], redStride[kMaxDims];
};

/// The shape argument of transpose_* (movement.cu): x's shape (rank
/// 1..kMaxDims, outermost first) and the permutation (y dim i is x dim
/// perm[i]); entries past rank are ignored.
struct TransposeShape {
  int rank;
  int perm[kMaxDims];
  long long shape[kMaxDims];
};

/// The parts argument of concat_* (movement.cu): up to kMaxConcatParts
/// device pointers with their sizes along the middle axis; a part of size 0
/// may be null.
constexpr int kMaxConcatParts = 8;
struct ConcatParts {
  const void *part[kMaxConcatParts];
  long long size[kMaxConcatParts];
  int count;
};

/// A piece of rope's frequency table (rope_freqs_f64, rope.cu): entries
/// [first, first + count) of the table, count <= kRopeFreqChunk. Passed by
/// value (2 KiB, within the 4 KiB of kernel parameters), so the table the
/// host computed reaches device memory in a launch, with no host buffer that
/// must outlive a copy.
constexpr int kRopeFreqChunk = 256;
struct RopeFreqChunk {
  int first, count;
  double value[kRopeFreqChunk];
};

} // namespace mtc_cuda

#endif // MTC_RUNTIME_CUDA_KERNELS_SHAPES_CUH
