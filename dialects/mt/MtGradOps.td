//===- MtGradOps.td - Gradient operations of the mt dialect -*- tablegen -*-===//
//
// Part of mtc. The operations that mtc-autodiff emits for the backward pass.
// Each is the vector-Jacobian product of one forward op (or the plumbing that
// moves gradients into parameter gradient buffers); each has a CPU kernel in
// runtime/cpu/Kernels.h.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_DIALECTS_MT_MTGRADOPS_TD
#define MTC_DIALECTS_MT_MTGRADOPS_TD

def MT_ParamGradOp : MT_Op<"param_grad", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "accumulates a gradient into a parameter's gradient buffer";
  let description = [{
    Adds `grad` to the gradient buffer of the named parameter of the current
    layer instance (or of the model). Gradients of a parameter used several
    times (tied embeddings) and over several micro-batches add up.

    ```mlir
    mt.param_grad @wq, %g : !mt.tensor<[256, 256], f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, MT_AnyTensor:$grad);
  let assemblyFormat = "$name `,` $grad attr-dict `:` type($grad)";
}

def MT_ZerosOp : MT_Op<"zeros", [Pure]> {
  let summary = "a tensor of zeros";
  let description = [{
    The gradient of a value that received none (for example an unused result
    of `mt.split`).

    ```mlir
    %z = mt.zeros : !mt.tensor<[B, S, 16], f32>
    ```
  }];
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def MT_WeightGradOp : MT_Op<"weight_grad", [Pure]> {
  let summary = "x^T dy summed over all leading dims: the gradient of a weight";
  let description = [{
    For `y = x @ w` with `x` `[.., K]` and `w` `[K, N]`, the weight gradient is
    the sum over every leading position of the outer product `x^T dy`.

    ```mlir
    %dw = mt.weight_grad %x, %dy : !mt.tensor<[B, S, 64], f32>,
        !mt.tensor<[B, S, 128], f32> -> !mt.tensor<[64, 128], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, MT_AnyTensor:$grad);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad attr-dict `:` type($input) `,` type($grad) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def MT_ReduceToOp : MT_Op<"reduce_to", [Pure]> {
  let summary = "sums a tensor down to a shape it was broadcast from";
  let description = [{
    The inverse of broadcasting: dims that the result lacks (leading) or has
    as 1 are summed.

    ```mlir
    %db = mt.reduce_to %dy : !mt.tensor<[B, S, 64], f32> -> !mt.tensor<[64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def MT_UnaryGradOp : MT_Op<"unary_grad", [Pure,
    AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "dy * f'(x) for an elementwise function f";
  let description = [{
    `kind` is a function of lib/Bundle/UnaryFns.def (`neg exp log silu relu
    sigmoid tanh rsqrt sqrt square gelu_erf gelu_tanh softcap ...`), written
    as its bare name; `param` is the cap of `softcap`. In the generic form
    `kind` is `#mt.unary_fn<silu>`.

    ```mlir
    %dx = mt.unary_grad silu %x, %dy param = 0.0 : !mt.tensor<[B, S, 64], f32>
    ```
  }];
  let arguments = (ins MT_UnaryFnAttr:$kind, MT_AnyTensor:$input,
                       MT_AnyTensor:$grad,
                       DefaultValuedAttr<F64Attr, "0.0">:$param);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    custom<UnaryFn>($kind) $input `,` $grad `param` `=` $param attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
}

def MT_ReduceGradOp : MT_Op<"reduce_grad", [Pure]> {
  let summary = "the gradient of sum, mean or max over one axis";
  let description = [{
    ```mlir
    %dx = mt.reduce_grad "mean" %x, %dy axis = 2 : !mt.tensor<[B, S, 64], f32>,
        !mt.tensor<[B, S], f32> -> !mt.tensor<[B, S, 64], f32>
    ```
  }];
  let arguments = (ins StrAttr:$kind, MT_AnyTensor:$input, MT_AnyTensor:$grad,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis,
                       UnitAttr:$keepdim);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $kind $input `,` $grad `axis` `=` $axis (`keepdim` $keepdim^)? attr-dict
    `:` type($input) `,` type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_SoftmaxGradOp : MT_Op<"softmax_grad", [Pure, SameOperandsAndResultType]> {
  let summary = "y * (dy - sum(dy * y)) along the softmax axis";
  let description = [{
    ```mlir
    %dx = mt.softmax_grad %y, %dy axis = 2 : !mt.tensor<[B, S, 8], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$output, MT_AnyTensor:$grad,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = "$output `,` $grad `axis` `=` $axis attr-dict `:` type($result)";
}

def MT_RmsNormGradOp : MT_Op<"rmsnorm_grad", [Pure]> {
  let summary = "gradients of rmsnorm with respect to its input and weight";
  let description = [{
    ```mlir
    %dx, %dw = mt.rmsnorm_grad %x, %w, %dy eps = 1.0e-05 offset = 0.0
        : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32>,
          !mt.tensor<[B, S, 64], f32>
        -> !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, MT_AnyTensor:$weight,
                       MT_AnyTensor:$grad, F64Attr:$eps,
                       DefaultValuedAttr<F64Attr, "0.0">:$offset);
  let results = (outs MT_AnyTensor:$input_grad, MT_AnyTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad `eps` `=` $eps `offset` `=` $offset attr-dict
    `:` type($input) `,` type($weight) `,` type($grad) `->` type($input_grad)
    `,` type($weight_grad)
  }];
}

def MT_LayerNormGradOp : MT_Op<"layernorm_grad", [Pure]> {
  let summary = "gradients of layernorm with respect to input, weight and bias";
  let description = [{
    ```mlir
    %dx, %dw, %db = mt.layernorm_grad %x, %w, %dy eps = 1.0e-05
        : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64], f32>,
          !mt.tensor<[B, S, 64], f32> -> !mt.tensor<[B, S, 64], f32>,
          !mt.tensor<[64], f32>, !mt.tensor<[64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, MT_AnyTensor:$weight,
                       MT_AnyTensor:$grad, F64Attr:$eps);
  let results = (outs MT_AnyTensor:$input_grad, MT_AnyTensor:$weight_grad,
                      MT_AnyTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad `eps` `=` $eps attr-dict `:` type($input) `,`
    type($weight) `,` type($grad) `->` type($input_grad) `,`
    type($weight_grad) `,` type($bias_grad)
  }];
}

def MT_AttentionGradOp : MT_Op<"attention_grad", [Pure]> {
  let summary = "flash-style attention backward";
  let description = [{
    Gradients of `mt.attention` with respect to q, k and v, given the forward
    output `o` (whose log-sum-exp the runtime keeps beside it) and its
    gradient; probabilities are recomputed blockwise, never materialised.

    ```mlir
    %dq, %dk, %dv = mt.attention_grad %q, %k, %v, %o, %do causal window = 0
        softcap = 0.0 scale = 0.0 : !mt.tensor<[B, S, 8, 32], f32>,
        !mt.tensor<[B, S, 2, 32], f32>, !mt.tensor<[B, S, 2, 32], f32>,
        !mt.tensor<[B, S, 8, 32], f32>, !mt.tensor<[B, S, 8, 32], f32>
        -> !mt.tensor<[B, S, 8, 32], f32>, !mt.tensor<[B, S, 2, 32], f32>,
           !mt.tensor<[B, S, 2, 32], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$q, MT_AnyTensor:$k, MT_AnyTensor:$v,
                       MT_AnyTensor:$output, MT_AnyTensor:$grad,
                       UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                       DefaultValuedAttr<F64Attr, "0.0">:$scale);
  let results = (outs MT_AnyTensor:$q_grad, MT_AnyTensor:$k_grad,
                      MT_AnyTensor:$v_grad);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $output `,` $grad (`causal` $causal^)? `window` `=`
    $window `softcap` `=` $softcap `scale` `=` $scale attr-dict `:` type($q)
    `,` type($k) `,` type($v) `,` type($output) `,` type($grad) `->`
    type($q_grad) `,` type($k_grad) `,` type($v_grad)
  }];
}

def MT_EmbeddingGradOp : MT_Op<"embedding_grad", [Pure]> {
  let summary = "scatter-adds row gradients into a table-shaped gradient";
  let description = [{
    ```mlir
    %dt = mt.embedding_grad %ids, %dy : !mt.tensor<[B, S], i32>,
        !mt.tensor<[B, S, 64], f32> -> !mt.tensor<[256, 64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$ids, MT_AnyTensor:$grad);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $ids `,` $grad attr-dict `:` type($ids) `,` type($grad) `->` type($result)
  }];
}

def MT_CrossEntropyGradOp : MT_Op<"cross_entropy_grad", [Pure]> {
  let summary = "gradient of the mean cross-entropy with respect to logits";
  let description = [{
    `dloss * (softmax(logits) - onehot(target)) / count`, zero for ignored
    targets; the runtime computes it chunk by chunk.

    ```mlir
    %dl = mt.cross_entropy_grad %logits, %targets, %dloss ignore_index = -1
        : !mt.tensor<[B, S, 256], f32>, !mt.tensor<[B, S], i32>,
          !mt.tensor<[], f32> -> !mt.tensor<[B, S, 256], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$logits, MT_AnyTensor:$targets,
                       MT_AnyTensor:$grad,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $grad `ignore_index` `=` $ignore_index attr-dict
    `:` type($logits) `,` type($targets) `,` type($grad) `->` type($result)
  }];
}

def MT_LinearCrossEntropyGradOp : MT_Op<"linear_cross_entropy_grad", [Pure]> {
  let summary = "gradients of mt.linear_cross_entropy, chunked over rows";
  let description = [{
    Returns the gradients with respect to the input and the weight (in the
    weight's own layout), recomputing the logits chunk by chunk.

    ```mlir
    %dx, %dw = mt.linear_cross_entropy_grad %x, %w, %targets, %dloss
        softcap = 0.0 ignore_index = -1 : !mt.tensor<[B, S, 64], f32>,
        !mt.tensor<[64, 256], f32>, !mt.tensor<[B, S], i32>, !mt.tensor<[], f32>
        -> !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64, 256], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, MT_AnyTensor:$weight,
                       MT_AnyTensor:$targets, MT_AnyTensor:$grad,
                       UnitAttr:$transpose_weight,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs MT_AnyTensor:$input_grad, MT_AnyTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $targets `,` $grad
    (`transpose_weight` $transpose_weight^)? `softcap` `=` $softcap
    `ignore_index` `=` $ignore_index attr-dict `:` type($input) `,`
    type($weight) `,` type($targets) `,` type($grad) `->` type($input_grad)
    `,` type($weight_grad)
  }];
}

def MT_PadOp : MT_Op<"pad", [Pure]> {
  let summary = "places a tensor at [start, end) of a zero tensor along an axis";
  let description = [{
    The vector-Jacobian product of `mt.slice`. With `end = S` (the VJP of a
    slice ending at S) the input's S entries land in the first S entries of
    the result and the rest are zero: only the used rows get a gradient.

    ```mlir
    %p = mt.pad %x axis = 2 start = 16 end = 32 : !mt.tensor<[B, S, 16], f32>
        -> !mt.tensor<[B, S, 64], f32>
    %g = mt.pad %dy axis = 0 start = 0 end = S : !mt.tensor<[S, 64], f32>
        -> !mt.tensor<[1024, 64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$start,
                       I64Attr:$end);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $input `axis` `=` $axis `start` `=` $start `end` `=` custom<SliceEnd>($end)
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_MoeGradOp : MT_Op<"moe_grad", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "gradients of mt.moe with respect to its input and router";
  let description = [{
    The vector-Jacobian product of `mt.moe` with the same attributes: from
    the moe input `h` `[B, S, D]`, the router `[D, E]` and the gradient `dy`
    of the moe output, the runtime recomputes the routing (router softmax,
    top-k, gate weights) and every expert's output on its tokens, runs each
    expert's `func.func @backward` on its tokens with `dy` scaled by the
    token's gate weight (accumulating that expert's parameter gradients, as
    `mt.apply_layers_grad` does for layers), and backpropagates through the
    gate weights, their renormalisation (`normalize`) and the softmax into the
    router logits. With `aux_loss = c > 0` the gradient of the load-balancing
    loss `c * E * sum_e f_e * P_e` (through the mean router probability `P_e`
    only; the assignment fraction `f_e` is a count) is added to the logits'
    gradient. Results: the gradients of `h` (router path plus every expert's
    input gradient) and of the router.

    ```mlir
    %dh, %dr = mt.moe_grad %h, %router, %dy expert @FFN top_k = 2 normalize
        aux_loss = 0.01 : !mt.tensor<[B, S, 64], f32>,
        !mt.tensor<[64, 8], f32>, !mt.tensor<[B, S, 64], f32>
        -> !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64, 8], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, MT_AnyTensor:$router,
                       MT_AnyTensor:$grad,
                       FlatSymbolRefAttr:$expert,
                       ConfinedAttr<I64Attr, [IntPositive]>:$top_k,
                       UnitAttr:$normalize,
                       DefaultValuedAttr<F64Attr, "0.0">:$aux_loss);
  let results = (outs MT_AnyTensor:$input_grad, MT_AnyTensor:$router_grad);
  let assemblyFormat = [{
    $input `,` $router `,` $grad `expert` $expert `top_k` `=` $top_k
    (`normalize` $normalize^)? `aux_loss` `=` $aux_loss attr-dict `:`
    type($input) `,` type($router) `,` type($grad) `->` type($input_grad) `,`
    type($router_grad)
  }];
  let hasVerifier = 1;
}

def MT_ApplyLayersGradOp : MT_Op<"apply_layers_grad", [
    AllTypesMatch<["grad", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "runs the backward of layer instances in reverse order";
  let description = [{
    The vector-Jacobian product of `mt.apply_layers @L[first, count]`: for
    instance `first + count - 1` down to `first`, runs the layer's
    `func.func @backward` on the input that instance saw in the forward pass
    (kept by the runtime as the activation checkpoint) and the gradient of its
    output, accumulating that instance's parameter gradients.

    ```mlir
    %dx = mt.apply_layers_grad @Block[0, 4] %dy : !mt.tensor<[B, S, 256], f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$layer,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$first,
                       ConfinedAttr<I64Attr, [IntPositive]>:$count,
                       MT_AnyTensor:$grad);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $layer `[` $first `,` $count `]` $grad attr-dict `:` type($result)
  }];
}

#endif // MTC_DIALECTS_MT_MTGRADOPS_TD
