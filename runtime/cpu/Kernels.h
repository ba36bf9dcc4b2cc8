//===- Kernels.h - CPU reference kernels, forward and backward --*- C++ -*-===//
//
// Part of mtc. The fp32 CPU kernels the executor calls for every mt operation
// and for the gradient operations the autodiff pass emits. No MLIR here: the
// runtime only sees bundles (lib/) and these kernels.
//
// Conventions
// - Tensors are dense, row-major, contiguous fp32 (token ids: int32). Shapes
// are
//   concrete here (B and S already bound).
// - "Rows": for ops over the last axis, a tensor [.., D] is `rows = numel / D`
//   rows of D elements.
// - Gradient kernels *overwrite* their outputs unless the name says accumulate.
// - Every kernel is deterministic for a given thread count (reductions in a
//   fixed order) and uses at most `threads()` threads (OpenMP-free: std::thread
//   through parallelFor below).
//
//===----------------------------------------------------------------------===//
#ifndef MTC_RUNTIME_CPU_KERNELS_H
#define MTC_RUNTIME_CPU_KERNELS_H

#include "lib/Bundle/OpKind.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace mtc::cpu {

/// Number of worker threads kernels may use (default: hardware concurrency).
int threads();
void setThreads(int n);
/// Runs body(begin, end) over [0, n) split into contiguous chunks, one per
/// thread; chunk boundaries depend only on n and threads().
void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)> &body);

//===----------------------------------------------------------------------===//
// Dense algebra (OpenBLAS sgemm underneath)
//===----------------------------------------------------------------------===//

/// C[M, N] = alpha * op(A) * op(B) + beta * C, row-major; op(X) = X or X^T.
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
          float alpha, const float *A, const float *B, float beta, float *C);

/// y[rows, N] = x[rows, K] @ w[K, N] (+ bias[N] if non-null).
void matmul(const float *x, const float *w, const float *bias, float *y,
            int64_t rows, int64_t K, int64_t N);
/// Batched: y[b] = x[b] @ w[b] for b in [0, batch); x [M, K], w [K, N].
void batchedMatmul(const float *x, const float *w, float *y, int64_t batch,
                   int64_t M, int64_t K, int64_t N);
/// dx[rows, K] = dy[rows, N] @ w^T.
void matmulGradInput(const float *dy, const float *w, float *dx, int64_t rows,
                     int64_t K, int64_t N);
/// dw[K, N] = x^T @ dy (overwrites).
void matmulGradWeight(const float *x, const float *dy, float *dw, int64_t rows,
                      int64_t K, int64_t N);
/// dw[K, N] += x^T @ dy (accumulates: weights used several times sum up).
void matmulGradWeightAcc(const float *x, const float *dy, float *dw,
                         int64_t rows, int64_t K, int64_t N);

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// The elementwise functions of lib/Bundle/UnaryFns.def (neg ... softcap);
/// `param` is softcap's cap.
using Unary = bundle::UnaryFn;
/// y = f(x), n elements.
void unary(Unary f, const float *x, float *y, int64_t n, float param = 0);
/// dx = dy * f'(x).
void unaryGrad(Unary f, const float *x, const float *dy, float *dx, int64_t n,
               float param = 0);

enum class Binary { Add, Sub, Mul, Div };
/// Broadcasting binary op. aShape/bShape are right-aligned against outShape
/// (missing leading dims and dims of 1 broadcast).
void binary(Binary op, const float *a, const std::vector<int64_t> &aShape,
            const float *b, const std::vector<int64_t> &bShape, float *out,
            const std::vector<int64_t> &outShape);
/// Sums x (shape `from`) down to `to` (right-aligned; the inverse of a
/// broadcast): the gradient of a broadcast operand.
void reduceTo(const float *x, const std::vector<int64_t> &from, float *y,
              const std::vector<int64_t> &to);

//===----------------------------------------------------------------------===//
// Reductions and normalisation (over one axis: [outer, n, inner])
//===----------------------------------------------------------------------===//

enum class Reduce { Sum, Mean, Max };
/// y[outer, inner] = reduce over n of x[outer, n, inner].
void reduce(Reduce r, const float *x, float *y, int64_t outer, int64_t n,
            int64_t inner);
/// dx[outer, n, inner] from dy[outer, inner] (Max: the gradient goes to the
/// first maximal element).
void reduceGrad(Reduce r, const float *x, const float *dy, float *dx,
                int64_t outer, int64_t n, int64_t inner);
/// Softmax over n of x[outer, n, inner].
void softmax(const float *x, float *y, int64_t outer, int64_t n, int64_t inner);
/// dx = y * (dy - sum(dy * y)) over n.
void softmaxGrad(const float *y, const float *dy, float *dx, int64_t outer,
                 int64_t n, int64_t inner);

/// y = x / sqrt(mean(x^2) + eps) * (offset + w), over the last axis D.
void rmsnorm(const float *x, const float *w, float *y, int64_t rows, int64_t D,
             float eps, float offset);
/// dx (overwritten) and dw[D] (accumulated).
void rmsnormGrad(const float *x, const float *w, const float *dy, float *dx,
                 float *dwAcc, int64_t rows, int64_t D, float eps,
                 float offset);
/// y = (x - mean) / sqrt(var + eps) * w + b (b may be null), last axis.
void layernorm(const float *x, const float *w, const float *b, float *y,
               int64_t rows, int64_t D, float eps);
/// dx overwritten; dw, db accumulated (db may be null).
void layernormGrad(const float *x, const float *w, const float *dy, float *dx,
                   float *dwAcc, float *dbAcc, int64_t rows, int64_t D,
                   float eps);

//===----------------------------------------------------------------------===//
// Transformer-specific
//===----------------------------------------------------------------------===//

/// Rotary embedding parameters (see mt.rope).
struct RopeParams {
  double theta = 10000.0;
  double fraction = 1.0; ///< the rotary dims of a head: ropeDims
  bool llama3 = false;
  double factor = 1, lowFreqFactor = 1, highFreqFactor = 4;
  int64_t originalMaxPosition = 8192;
};
/// x, y [B, S, H, D]; rotate-half layout over the first rot dims (pairs
/// (i, i + rot/2)), position = s + posOffset. inverse: rotate by -angle (the
/// VJP). y may alias x.
void rope(const float *x, float *y, int64_t B, int64_t S, int64_t H, int64_t D,
          const RopeParams &p, bool inverse, int64_t posOffset = 0);
/// The rotated dims of a head of D (lib/Support/Shape.h, ropeDims: int(D *
/// fraction) rounded up to even, as transformers), clamped to [0, D].
int64_t ropeRotaryDims(const RopeParams &p, int64_t D);
/// The rotation frequencies of the pairs (i, i + rot/2), i < rot/2, of a
/// head of D (theta^(-2i / int(D * fraction)), ropeDims), in double, llama3
/// scaling applied: what rope() uses, and what the CUDA rope kernel
/// (runtime/cuda/kernels/rope.cu) takes as its frequency table.
std::vector<double> ropeInvFreq(const RopeParams &p, int64_t D);

struct AttentionParams {
  bool causal = true;
  int64_t window = 0; ///< > 0: key j visible to query i iff i - j < window
  double softcap = 0; ///< > 0: logits = softcap * tanh(logits / softcap)
  double scale = 0;   ///< 0: 1 / sqrt(D)
};
/// Flash-style blocked attention that never materialises S x S scores.
/// q [B, S, Hq, D], k/v [B, Sk, Hkv, D] (Hkv divides Hq), o [B, S, Hq, D].
/// lse (optional, [B, Hq, S]) receives the log-sum-exp of each query row.
/// Queries are at positions qOffset + i (for a KV cache: Sk = qOffset + S).
void attention(const float *q, const float *k, const float *v, float *o,
               float *lse, int64_t B, int64_t S, int64_t Sk, int64_t Hq,
               int64_t Hkv, int64_t D, const AttentionParams &p,
               int64_t qOffset = 0);
/// Backward from the saved lse (recomputing probabilities blockwise):
/// dq, dk, dv overwritten.
void attentionGrad(const float *q, const float *k, const float *v,
                   const float *o, const float *lse, const float *dO, float *dq,
                   float *dk, float *dv, int64_t B, int64_t S, int64_t Hq,
                   int64_t Hkv, int64_t D, const AttentionParams &p);

/// y[n, D] = table[ids[n], :]. Returns false (and writes nothing further) if
/// an id is outside [0, V); *badIndex receives its position.
bool embedding(const int32_t *ids, const float *table, float *y, int64_t n,
               int64_t V, int64_t D, int64_t *badIndex);
/// dtable[V, D] += scatter of dy rows.
void embeddingGradAcc(const int32_t *ids, const float *dy, float *dtable,
                      int64_t n, int64_t V, int64_t D);

/// Mean cross-entropy over rows whose target != ignoreIndex; logits [n, V].
/// Returns the loss; *count receives the number of counted rows. Chunked over
/// rows so that memory stays O(threads * V).
double crossEntropy(const float *logits, const int32_t *targets, int64_t n,
                    int64_t V, int64_t ignoreIndex, int64_t *count);
/// dlogits = dloss * (softmax(logits) - onehot(target)) / count; ignored rows
/// get zeros.
void crossEntropyGrad(const float *logits, const int32_t *targets, float dloss,
                      float *dlogits, int64_t n, int64_t V,
                      int64_t ignoreIndex);

/// Mixture-of-experts routing over router probabilities probs [n, E]: each
/// row's top \p K experts, best first (NaN ranks as -inf; ties: the lower
/// index first) into choice [n, K], and their gate weights p[choice] into
/// gate [n, K], divided by their sum (fp32, in k order) when \p normalize.
/// The rule the CPU executor's moe ops and the CUDA routing kernel
/// (runtime/cuda/kernels/moe.cu) share.
void moeTopK(const float *probs, int64_t n, int64_t E, int64_t K,
             bool normalize, int32_t *choice, float *gate);

/// The LM head and cross-entropy in one: logits = softcap?(x @ W) computed
/// `linearCrossEntropyChunk(V)` rows at a time, so memory stays O(chunk * V).
/// x [n, D]; W [D, V], or [V, D] when transposeW (a tied embedding table).
/// softcap > 0 applies cap * tanh(l / cap). Returns the mean loss over rows
/// whose target != ignoreIndex (0 when there are none); *count receives them.
double linearCrossEntropy(const float *x, const float *w, bool transposeW,
                          const int32_t *targets, int64_t n, int64_t D,
                          int64_t V, int64_t ignoreIndex, double softcap,
                          int64_t *count);
/// Its gradients for an upstream dloss: dx [n, D] overwritten, dwAcc (W's
/// layout) accumulated. Logits are recomputed chunk by chunk.
void linearCrossEntropyGrad(const float *x, const float *w, bool transposeW,
                            const int32_t *targets, float dloss, float *dx,
                            float *dwAcc, int64_t n, int64_t D, int64_t V,
                            int64_t ignoreIndex, double softcap);
/// The logits themselves, [n, V] (generation needs them).
void linearLogits(const float *x, const float *w, bool transposeW, int64_t n,
                  int64_t D, int64_t V, double softcap, float *logits);
/// Rows per chunk for a vocabulary of V: about 4 MiB of logits, at least 16.
int64_t linearCrossEntropyChunk(int64_t V);

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// y = transpose of x by perm (y dim i is x dim perm[i]).
void transpose(const float *x, const std::vector<int64_t> &shape,
               const std::vector<int64_t> &perm, float *y);
/// Copies [start, end) along axis of x[outer, n, inner] into y.
void slice(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
           int64_t start, int64_t end);
/// y[outer, total, inner] = concat along the middle axis of parts with sizes.
void concat(const std::vector<const float *> &parts,
            const std::vector<int64_t> &sizes, float *y, int64_t outer,
            int64_t inner);
/// Writes x[outer, end-start, inner] into y[outer, n, inner] at [start, end)
/// and zeros elsewhere (the VJP of slice).
void pad(const float *x, float *y, int64_t outer, int64_t n, int64_t inner,
         int64_t start, int64_t end);

} // namespace mtc::cpu

#endif // MTC_RUNTIME_CPU_KERNELS_H
