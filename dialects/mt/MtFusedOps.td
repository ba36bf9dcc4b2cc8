//===- MtFusedOps.td - Fused regions of the mt dialect -----*- tablegen -*-===//
//
// Part of mtc. mtc-fuse groups chains of elementwise operations into
// mt.fused regions; each region becomes one kernel on every target (LLVM on
// CPUs, CUDA C on GPUs). The representation is target-neutral: a region holds
// ordinary mt elementwise ops.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_DIALECTS_MT_MTFUSEDOPS_TD
#define MTC_DIALECTS_MT_MTFUSEDOPS_TD

def MT_FusedOp : MT_Op<"fused", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects]> {
  let summary = "a chain of elementwise operations run as one kernel";
  let description = [{
    The body computes every result elementwise over the *iteration shape*:
    the shape every result has. Each input either has the iteration shape
    (element i reads element i), is a scalar (every element reads it), or has
    a static shape that is a suffix of the iteration shape (element i reads
    element i mod its size: a bias or norm weight broadcast over rows). The
    body's block arguments are the inputs; `mt.yield` returns the results.
    Only elementwise mt ops (and scalar constants) may appear in the body.

    ```mlir
    %y = mt.fused (%x, %w) : (!mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32>)
        -> !mt.tensor<[B, S, 64], f32> {
    ^bb0(%a: !mt.tensor<[B, S, 64], f32>, %b: !mt.tensor<[64], f32>):
      %s = mt.silu %a : !mt.tensor<[B, S, 64], f32>
      %m = mt.mul %s, %b : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32>
          -> !mt.tensor<[B, S, 64], f32>
      mt.yield %m : !mt.tensor<[B, S, 64], f32>
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
    /// The shape every result has.
    ::mtc::Shape getIterationShape();
    /// How element i of the iteration space reads input \p index.
    enum class InputAccess { Full, Scalar, Suffix };
    InputAccess getInputAccess(unsigned index);
    /// Whether \p op may appear in a fused body.
    static bool isFusable(::mlir::Operation *op);
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
