//===- MtFusedOps.td - Fused regions of the mt dialect -----*- tablegen -*-===//
//
// Part of mtc. mtc-fuse groups chains of elementwise operations, and
// reductions over the last axis that end them, into mt.fused regions; each region becomes one kernel on every target (LLVM on
// CPUs, CUDA C on GPUs). The representation is target-neutral: a region holds
// ordinary mt elementwise ops.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_DIALECTS_MT_MTFUSEDOPS_TD
#define MTC_DIALECTS_MT_MTFUSEDOPS_TD

def MT_FusedOp : MT_Op<"fused", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects]> {
  let summary = "a chain of elementwise operations (and last-axis reductions) run as one kernel";
  let description = [{
    The body computes its values over the *iteration shape* `[R..., n]`: the
    shape of every result without reductions; with reductions, the shape of
    the value they reduce. Body ops are elementwise mt ops, scalar constants
    and `mt.sum` / `mt.mean` / `mt.max` over the last axis.

    *Element phase.* Ops that do not depend on a reduction are evaluated per
    element i of the iteration shape (values of the iteration shape, or of a
    suffix of it, or scalars). Each input they read either has the iteration
    shape (element i reads element i: `Full`), is a scalar (every element
    reads it: `Scalar`), or has a static shape that is a suffix of the
    iteration shape (element i reads element i mod its size: `Suffix`, a bias
    or norm weight broadcast over rows), or has the shape `[R..., 1]` (the
    element at row r reads element r: `Row`, a per-row statistic broadcast
    over the last axis).

    *Row phase.* A reduction reduces a value of exactly the iteration shape
    over its last axis (`axis = rank - 1`, with or without `keepdim`) to one
    value per row: shape `[R...]` or `[R..., 1]`. Elementwise ops may follow
    on such row values (`rsqrt(mean(square(x)) + eps)`): each operand of such
    an op is a row value or an input of the op's own (row) shape (row r reads
    element r: `Row`), or a scalar; its result has a row shape. Nothing of
    the element phase may read a row value (no broadcast back: a region
    computes `sum(exp(x - c))`, never the `exp(x - c) / sum` of a softmax).
    An input read per row is read by nothing per element, unless its shape
    is `[R..., 1]` (both read element r).

    Results are element-phase values of the iteration shape or row values.
    The body's block arguments are the inputs; `mt.yield` returns the
    results.

    ```mlir
    %y = mt.fused (%x, %w) : (!mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32>)
        -> !mt.tensor<[B, S, 64], f32> {
    ^bb0(%a: !mt.tensor<[B, S, 64], f32>, %b: !mt.tensor<[64], f32>):
      %s = mt.silu %a : !mt.tensor<[B, S, 64], f32>
      %m = mt.mul %s, %b : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32>
          -> !mt.tensor<[B, S, 64], f32>
      mt.yield %m : !mt.tensor<[B, S, 64], f32>
    }
    // 1 / rms of each row: iteration shape [B, S, 64], a [B, S, 1] result.
    %r = mt.fused (%x) : (!mt.tensor<[B, S, 64], f32>)
        -> !mt.tensor<[B, S, 1], f32> {
    ^bb0(%a: !mt.tensor<[B, S, 64], f32>):
      %q = mt.square %a : !mt.tensor<[B, S, 64], f32>
      %m = mt.mean %q axis = 2 keepdim : !mt.tensor<[B, S, 64], f32>
          -> !mt.tensor<[B, S, 1], f32>
      %e = mt.constant 1.0e-05 : !mt.tensor<[], f32>
      %v = mt.add %m, %e : !mt.tensor<[B, S, 1], f32>, !mt.tensor<[], f32>
          -> !mt.tensor<[B, S, 1], f32>
      %s = mt.rsqrt %v : !mt.tensor<[B, S, 1], f32>
      mt.yield %s : !mt.tensor<[B, S, 1], f32>
    }
    ```
  }];
  let arguments = (ins Variadic<MT_AnyTensor>:$inputs,
                       OptionalAttr<StrAttr>:$kernel);
  let results = (outs Variadic<MT_AnyTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The shape of the element phase: every result's without reductions,
    /// else the shape the reductions reduce.
    ::mtc::Shape getIterationShape();
    /// How input \p index is read: element i of the iteration space reads
    /// element i (Full), 0 (Scalar) or i mod numel(input) (Suffix); row r
    /// (element i is in row i / n for a last axis of n) reads element r
    /// (Row: inputs of a row shape read by the row phase, and inputs of shape
    /// [R..., 1] read per element).
    enum class InputAccess { Full, Scalar, Suffix, Row };
    InputAccess getInputAccess(unsigned index);
    /// Whether \p op may appear in a fused body (reductions: if they reduce
    /// the last axis, which the verifier checks).
    static bool isFusable(::mlir::Operation *op);
    /// mt.sum, mt.mean or mt.max.
    static bool isReduction(::mlir::Operation *op);
    /// The body ops of the row phase: the reductions and every op that reads
    /// a value they compute (directly or not).
    ::llvm::SmallPtrSet<::mlir::Operation *, 8> getRowOps();
    /// Whether the body has reductions.
    bool hasReductions();
  }];
}

def MT_YieldOp : MT_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"FusedOp">]> {
  let summary = "returns the results of an mt.fused body";
  let arguments = (ins Variadic<MT_AnyTensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
  let builders = [OpBuilder<(ins), [{ /* empty */ }]>];
}

#endif // MTC_DIALECTS_MT_MTFUSEDOPS_TD
