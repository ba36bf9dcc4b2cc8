//===- MtOps.td - Operations of the mt dialect -------------*- tablegen -*-===//
//
// Part of mtc. Every op verifies its shapes with the rules of
// lib/Support/Shape.h, the same functions the frontend's Sema uses.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_DIALECTS_MT_MTOPS_TD
#define MTC_DIALECTS_MT_MTOPS_TD

include "MtBase.td"
include "MtTypes.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

class MT_Op<string mnemonic, list<Trait> traits = []>
    : Op<Mt_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Structure: model, layers, experts, parameters
//===----------------------------------------------------------------------===//

def MT_ModelOp : MT_Op<"model", [Symbol, SymbolTable, IsolatedFromAbove,
    NoTerminator, SingleBlock, NoRegionArguments]> {
  let summary = "a whole model: parameters, layer templates and the loss";
  let description = [{
    Holds model-level parameters (`mt.param`), layer templates (`mt.layer`) and
    exactly one `func.func @forward` that maps token ids and targets to the
    scalar loss. The evaluated config of the source is kept in the `config`
    dictionary for tools that print it.

    ```mlir
    mt.model @Tiny attributes {config = {dim = 64 : i64}} {
      mt.param @tok_emb : !mt.tensor<[256, 64], f32> init normal [2.0e-02]
      mt.layer @Block x 2 { ... }
      func.func @forward(%tokens: !mt.tensor<[B, S], i32>,
                         %targets: !mt.tensor<[B, S], i32>)
          -> !mt.tensor<[], f32> { ... }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       OptionalAttr<DictionaryAttr>:$config);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The model's forward function, or null.
    ::mlir::func::FuncOp getForward();
    /// The layer template called \p name, or null.
    LayerOp lookupLayer(::llvm::StringRef name);
  }];
}

def MT_LayerOp : MT_Op<"layer", [Symbol, SymbolTable, IsolatedFromAbove,
    NoTerminator, SingleBlock, NoRegionArguments, HasParent<"ModelOp">]> {
  let summary = "a layer template instantiated `count` times";
  let description = [{
    A stateless layer template: its parameters (`mt.param`) exist once per
    instance, and its `func.func @forward` (one activation in, one activation
    of the same type out, then any intermediates mtc-autodiff chose to keep
    for the backward) serves every instance. Experts of a mixture-of-experts
    layer are nested `mt.expert` ops.

    ```mlir
    mt.layer @Block x 4 {
      mt.param @norm : !mt.tensor<[64], f32> init ones
      func.func @forward(%x: !mt.tensor<[B, S, 64], f32>)
          -> !mt.tensor<[B, S, 64], f32> {
        %w = mt.param_ref @norm : !mt.tensor<[64], f32>
        %y = mt.rmsnorm %x, %w eps = 1.0e-05 offset = 0.0 : ...
        func.return %y : !mt.tensor<[B, S, 64], f32>
      }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       ConfinedAttr<I64Attr, [IntPositive]>:$count);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `x` $count attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::func::FuncOp getForward();
    /// The activation type the layer takes and returns (null if malformed).
    MtTensorType getActivationType();
  }];
}

def MT_ExpertOp : MT_Op<"expert", [Symbol, SymbolTable, IsolatedFromAbove,
    NoTerminator, SingleBlock, NoRegionArguments, HasParent<"LayerOp">]> {
  let summary = "the experts of a mixture-of-experts layer";
  let description = [{
    `count` experts sharing one template: parameters exist once per expert (per
    layer instance); `func.func @forward` maps the `[T, D]` tokens routed to an
    expert to its `[T, D]` output. Used by `mt.moe`.

    ```mlir
    mt.expert @FFN x 8 {
      mt.param @w1 : !mt.tensor<[64, 128], f32> init normal [2.0e-02]
      func.func @forward(%t: !mt.tensor<[T, 64], f32>) -> !mt.tensor<[T, 64], f32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       ConfinedAttr<I64Attr, [IntPositive]>:$count);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name `x` $count attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::func::FuncOp getForward();
  }];
}

def MT_ParamOp : MT_Op<"param", [Symbol,
    ParentOneOf<["ModelOp", "LayerOp", "ExpertOp"]>]> {
  let summary = "a trainable parameter: shape, dtype and initializer";
  let description = [{
    Declares a parameter of its enclosing model, layer (one per instance) or
    expert (one per expert). The type is static (no symbolic dims). `init_args`
    holds the standard deviation for `normal` and `scaled_normal` and the bounds
    for `uniform`.

    ```mlir
    mt.param @wq : !mt.tensor<[256, 256], f32> init normal [2.0e-02]
    mt.param @norm : !mt.tensor<[256], bf16> init ones
    mt.param @b : !mt.tensor<[8], f32> init uniform [-1.0e-01, 1.0e-01]
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<MT_AnyTensor>:$type,
                       MT_InitKindAttr:$init,
                       DefaultValuedAttr<DenseF64ArrayAttr, "{}">:$init_args);
  let assemblyFormat = [{
    $sym_name `:` $type `init` custom<Init>($init, $init_args) attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    MtTensorType getTensorType() { return ::llvm::cast<MtTensorType>(getType()); }
    /// Elements of one instance.
    int64_t getNumElements();
  }];
}

def MT_ParamRefOp : MT_Op<"param_ref", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a parameter of the enclosing model, layer or expert";
  let description = [{
    Inside the `forward` of a layer (or expert), yields the current instance's
    value of the named parameter; inside the model's `forward`, a model-level
    parameter. The result type must equal the parameter's type.

    ```mlir
    %w = mt.param_ref @wq : !mt.tensor<[256, 256], f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Model-body ops
//===----------------------------------------------------------------------===//

def MT_ApplyLayersOp : MT_Op<"apply_layers", [
    AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "applies instances [first, first + count) of a layer in order";
  let description = [{
    Runs `count` consecutive instances of the layer template, starting at
    instance `first`, each on the previous one's output. Only valid in the
    model's forward. Across the model body, every instance of every layer is
    applied exactly once and in order.

    ```mlir
    %h = mt.apply_layers @Block[0, 4] %x : !mt.tensor<[B, S, 256], f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$layer,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$first,
                       ConfinedAttr<I64Attr, [IntPositive]>:$count,
                       MT_AnyTensor:$input);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $layer `[` $first `,` $count `]` $input attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let builders = [
    OpBuilder<(ins "::llvm::StringRef":$layer, "int64_t":$first,
                   "int64_t":$count, "::mlir::Value":$input)>
  ];
}

//===----------------------------------------------------------------------===//
// Tensor ops
//===----------------------------------------------------------------------===//

def MT_ConstantOp : MT_Op<"constant", [Pure]> {
  let summary = "a scalar f32 constant";
  let description = [{
    ```mlir
    %c = mt.constant 5.000000e-01 : !mt.tensor<[], f32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MT_EmbeddingOp : MT_Op<"embedding", [Pure]> {
  let summary = "gathers rows of a table by token id";
  let description = [{
    `ids` (`i32`, any shape `[..]`) index the rows of `table` (`[V, D]`); the
    result is `[.., D]`.

    ```mlir
    %e = mt.embedding %ids, %table : !mt.tensor<[B, S], i32>,
        !mt.tensor<[256, 64], f32> -> !mt.tensor<[B, S, 64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$ids, MT_AnyTensor:$table);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $ids `,` $table attr-dict `:` type($ids) `,` type($table) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_MatMulOp : MT_Op<"matmul", [Pure]> {
  let summary = "matrix product with an optional bias";
  let description = [{
    `[.., K] x [K, N] -> [.., N]` (a weight applied to activations) or batched
    `[.., M, K] x [.., K, N] -> [.., M, N]` with equal leading dims. `bias`,
    when present, is `[N]` and is added to every row.

    ```mlir
    %y = mt.matmul %x, %w : !mt.tensor<[B, S, 64], f32>,
        !mt.tensor<[64, 128], f32> -> !mt.tensor<[B, S, 128], f32>
    %z = mt.matmul %x, %w bias %b : !mt.tensor<[B, S, 64], f32>,
        !mt.tensor<[64, 128], f32>, !mt.tensor<[128], f32>
        -> !mt.tensor<[B, S, 128], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$lhs, MT_AnyTensor:$rhs,
                       Optional<MT_AnyTensor>:$bias);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` $bias^)? attr-dict `:` type($lhs) `,` type($rhs)
    (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

class MT_BinaryOp<string mnemonic, string what> : MT_Op<mnemonic, [Pure]> {
  let summary = "elementwise " # what # " with NumPy-style broadcasting";
  let description = [{
    Operands broadcast right-aligned: a missing dimension or a 1 stretches.
    Symbolic dims only match themselves.

    ```mlir
    %r = mt.}] # mnemonic # [{ %a, %b : !mt.tensor<[B, S, 64], f32>,
        !mt.tensor<[64], f32> -> !mt.tensor<[B, S, 64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$lhs, MT_AnyTensor:$rhs);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_AddOp : MT_BinaryOp<"add", "addition">;
def MT_SubOp : MT_BinaryOp<"sub", "subtraction">;
def MT_MulOp : MT_BinaryOp<"mul", "multiplication">;
def MT_DivOp : MT_BinaryOp<"div", "division">;

class MT_UnaryOp<string mnemonic, string what>
    : MT_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise " # what;
  let description = [{
    ```mlir
    %r = mt.}] # mnemonic # [{ %x : !mt.tensor<[B, S, 64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  // The input must be a float tensor (requireFloat, MtOps.cpp).
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::mlir::LogicalResult $cppClass::verify() {
      return requireFloat(*this, getInput(), "input");
    }
  }];
}

def MT_NegOp : MT_UnaryOp<"neg", "negation">;
def MT_ExpOp : MT_UnaryOp<"exp", "exponential">;
def MT_LogOp : MT_UnaryOp<"log", "natural logarithm">;
def MT_SiluOp : MT_UnaryOp<"silu", "SiLU, x * sigmoid(x)">;
def MT_ReluOp : MT_UnaryOp<"relu", "ReLU, max(x, 0)">;
def MT_SigmoidOp : MT_UnaryOp<"sigmoid", "logistic sigmoid">;
def MT_TanhOp : MT_UnaryOp<"tanh", "hyperbolic tangent">;
def MT_RsqrtOp : MT_UnaryOp<"rsqrt", "reciprocal square root">;
def MT_SqrtOp : MT_UnaryOp<"sqrt", "square root">;
def MT_SquareOp : MT_UnaryOp<"square", "square, x * x">;
def MT_Relu2Op : MT_UnaryOp<"relu2", "squared ReLU, max(x, 0)^2">;

def MT_GeluOp : MT_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "GELU, exact (erf) or with the tanh approximation";
  let description = [{
    ```mlir
    %r = mt.gelu %x approximate = "tanh" : !mt.tensor<[B, S, 64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat =
      "$input `approximate` `=` $approximate attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class MT_ReduceOp<string mnemonic, string what> : MT_Op<mnemonic, [Pure]> {
  let summary = what # " over one axis";
  let description = [{
    Reduces `axis` (non-negative); with `keepdim` the axis stays as size 1.

    ```mlir
    %r = mt.}] # mnemonic # [{ %x axis = 2 : !mt.tensor<[B, S, 64], f32>
        -> !mt.tensor<[B, S], f32>
    %k = mt.}] # mnemonic # [{ %x axis = 2 keepdim : !mt.tensor<[B, S, 64], f32>
        -> !mt.tensor<[B, S, 1], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis,
                       UnitAttr:$keepdim);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $input `axis` `=` $axis (`keepdim` $keepdim^)? attr-dict `:` type($input)
    `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_SumOp : MT_ReduceOp<"sum", "sum">;
def MT_MeanOp : MT_ReduceOp<"mean", "mean">;
def MT_MaxOp : MT_ReduceOp<"max", "maximum">;

def MT_SoftmaxOp : MT_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax along one axis";
  let description = [{
    ```mlir
    %p = mt.softmax %x axis = 2 : !mt.tensor<[B, S, 8], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = "$input `axis` `=` $axis attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MT_RmsNormOp : MT_Op<"rmsnorm", [Pure]> {
  let summary = "RMS normalisation over the last axis, times (offset + w)";
  let description = [{
    `x / sqrt(mean(x^2) + eps) * (offset + w)`; `offset = 1.0` is the Gemma
    variant that stores `w` as a deviation from one.

    ```mlir
    %y = mt.rmsnorm %x, %w eps = 1.0e-05 offset = 0.0 : !mt.tensor<[B, S, 64], f32>,
        !mt.tensor<[64], f32> -> !mt.tensor<[B, S, 64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, MT_AnyTensor:$weight,
                       F64Attr:$eps, DefaultValuedAttr<F64Attr, "0.0">:$offset);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` `=` $eps `offset` `=` $offset attr-dict `:`
    type($input) `,` type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_LayerNormOp : MT_Op<"layernorm", [Pure]> {
  let summary = "layer normalisation over the last axis";
  let description = [{
    `(x - mean) / sqrt(var + eps) * w (+ b)`.

    ```mlir
    %y = mt.layernorm %x, %w, %b eps = 1.0e-05 : !mt.tensor<[B, S, 64], f32>,
        !mt.tensor<[64], f32>, !mt.tensor<[64], f32> -> !mt.tensor<[B, S, 64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, MT_AnyTensor:$weight,
                       Optional<MT_AnyTensor>:$bias, F64Attr:$eps);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? `eps` `=` $eps attr-dict `:` type($input)
    `,` type($weight) (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_ReshapeOp : MT_Op<"reshape", [Pure]> {
  let summary = "same elements, another shape";
  let description = [{
    The static element counts agree and the symbolic dims are the same multiset.

    ```mlir
    %r = mt.reshape %x : !mt.tensor<[B, S, 64], f32> -> !mt.tensor<[B, S, 8, 8], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def MT_TransposeOp : MT_Op<"transpose", [Pure]> {
  let summary = "permutes dimensions";
  let description = [{
    Result dim `i` is input dim `perm[i]`.

    ```mlir
    %t = mt.transpose %x perm = [1, 0] : !mt.tensor<[256, 64], f32>
        -> !mt.tensor<[64, 256], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $input `perm` `=` $perm attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_SplitOp : MT_Op<"split", [Pure]> {
  let summary = "splits along one axis into pieces of the given sizes";
  let description = [{
    ```mlir
    %a, %b = mt.split %x axis = 2 sizes = [32, 32] : !mt.tensor<[B, S, 64], f32>
        -> !mt.tensor<[B, S, 32], f32>, !mt.tensor<[B, S, 32], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<MT_AnyTensor>:$results);
  let assemblyFormat = [{
    $input `axis` `=` $axis `sizes` `=` $sizes attr-dict `:` type($input) `->`
    type($results)
  }];
  let hasVerifier = 1;
}

def MT_ConcatOp : MT_Op<"concat", [Pure]> {
  let summary = "joins tensors along one axis";
  let description = [{
    ```mlir
    %c = mt.concat %a, %b axis = 2 : !mt.tensor<[B, S, 32], f32>,
        !mt.tensor<[B, S, 32], f32> -> !mt.tensor<[B, S, 64], f32>
    ```
  }];
  let arguments = (ins Variadic<MT_AnyTensor>:$inputs,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$axis);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `axis` `=` $axis attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_SliceOp : MT_Op<"slice", [Pure]> {
  let summary = "elements [start, end) along one axis";
  let description = [{
    `end` is a number, or `S` (with `start = 0`): the first S entries of a
    static axis, such as the rows of a learned position table used by a
    sequence of symbolic length. Whether S fits the axis is checked when S
    is bound (compile with `--seq`, or at run time); while decoding with a
    KV cache the runtime takes the rows at the absolute positions of the new
    tokens.

    ```mlir
    %s = mt.slice %x axis = 2 start = 0 end = 16 : !mt.tensor<[B, S, 64], f32>
        -> !mt.tensor<[B, S, 16], f32>
    %p = mt.slice %wpe axis = 0 start = 0 end = S : !mt.tensor<[1024, 64], f32>
        -> !mt.tensor<[S, 64], f32>
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

def MT_RopeOp : MT_Op<"rope", [Pure, SameOperandsAndResultType]> {
  let summary = "rotary position embedding";
  let description = [{
    Rotates pairs of dims of `[B, S, H, D]` by position-dependent angles
    (rotate-half layout), as transformers does with `partial_rotary_factor`:
    `f = int(D * fraction)` frequencies `theta^(-2i/f)`, `i < ceil(f/2)`,
    rotate the first `rot = f` rounded up to even dims, pairs
    `(i, i + rot/2)`; the others pass through.
    `inverse` rotates by the negative angles (the vector-Jacobian product of
    the rotation, emitted by mtc-autodiff). With `scaling = "llama3"` the
    inverse frequencies are rescaled with
    `factor`, `low_freq_factor`, `high_freq_factor` and
    `original_max_position` as Llama 3.1 does.

    ```mlir
    %q = mt.rope %x theta = 1.0e+04 fraction = 1.0 : !mt.tensor<[B, S, 8, 32], f32>
    %r = mt.rope %x theta = 5.0e+05 fraction = 1.0 {scaling = "llama3",
        factor = 8.0 : f64, low_freq_factor = 1.0 : f64,
        high_freq_factor = 4.0 : f64, original_max_position = 8192 : i64}
        : !mt.tensor<[B, S, 8, 32], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, F64Attr:$theta,
                       DefaultValuedAttr<F64Attr, "1.0">:$fraction,
                       OptionalAttr<StrAttr>:$scaling,
                       OptionalAttr<F64Attr>:$factor,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<I64Attr>:$original_max_position,
                       UnitAttr:$inverse);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $input `theta` `=` $theta `fraction` `=` $fraction (`inverse` $inverse^)?
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def MT_AttentionOp : MT_Op<"attention", [Pure]> {
  let summary = "scaled dot-product attention (causal, grouped-query, windowed)";
  let description = [{
    `q` is `[B, S, Hq, D]`, `k` and `v` are `[B, S, Hkv, D]` with `Hkv`
    dividing `Hq` (grouped-query attention). `scale = 0` means `1/sqrt(D)`;
    `window > 0` limits each query to the last `window` keys; `softcap > 0`
    applies `softcap * tanh(logits / softcap)` before the softmax.

    ```mlir
    %o = mt.attention %q, %k, %v causal window = 0 softcap = 0.0 scale = 0.0
        : !mt.tensor<[B, S, 8, 32], f32>, !mt.tensor<[B, S, 2, 32], f32>,
          !mt.tensor<[B, S, 2, 32], f32> -> !mt.tensor<[B, S, 8, 32], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$q, MT_AnyTensor:$k, MT_AnyTensor:$v,
                       UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                       DefaultValuedAttr<F64Attr, "0.0">:$scale);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`causal` $causal^)? `window` `=` $window
    `softcap` `=` $softcap `scale` `=` $scale attr-dict `:` type($q) `,`
    type($k) `,` type($v) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_SoftcapOp : MT_Op<"softcap", [Pure, SameOperandsAndResultType]> {
  let summary = "cap * tanh(x / cap)";
  let description = [{
    ```mlir
    %r = mt.softcap %x cap = 3.0e+01 : !mt.tensor<[B, S, 256], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, F64Attr:$cap);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = "$input `cap` `=` $cap attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def MT_MoeOp : MT_Op<"moe", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "top-k mixture of experts";
  let description = [{
    Router logits `h @ router` go through a softmax; each token's `top_k`
    experts are chosen (their weights renormalised to sum to one when
    `normalize` is set), the tokens routed to each expert run through that
    expert's `forward`, and the weighted outputs are summed. `aux_loss` is the
    coefficient of the load-balancing loss added to the model loss (0: none).
    Valid only in the forward of the layer that declares the expert.

    ```mlir
    %y = mt.moe %h, %router expert @FFN top_k = 2 normalize aux_loss = 0.01
        : !mt.tensor<[B, S, 64], f32>, !mt.tensor<[64, 8], f32>
        -> !mt.tensor<[B, S, 64], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, MT_AnyTensor:$router,
                       FlatSymbolRefAttr:$expert,
                       ConfinedAttr<I64Attr, [IntPositive]>:$top_k,
                       UnitAttr:$normalize,
                       DefaultValuedAttr<F64Attr, "0.0">:$aux_loss);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $input `,` $router `expert` $expert `top_k` `=` $top_k
    (`normalize` $normalize^)? `aux_loss` `=` $aux_loss attr-dict `:`
    type($input) `,` type($router) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_CrossEntropyOp : MT_Op<"cross_entropy", [Pure]> {
  let summary = "mean token cross-entropy, skipping an ignored target id";
  let description = [{
    `logits` `[B, S, V]`, `targets` `[B, S]` (`i32`); the mean of
    `-log softmax(logits)[target]` over targets that differ from
    `ignore_index`. The result is a scalar.

    ```mlir
    %l = mt.cross_entropy %logits, %targets ignore_index = -100
        : !mt.tensor<[B, S, 256], f32>, !mt.tensor<[B, S], i32>
        -> !mt.tensor<[], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$logits, MT_AnyTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `ignore_index` `=` $ignore_index attr-dict `:`
    type($logits) `,` type($targets) `->` type($result)
  }];
  let hasVerifier = 1;
}

def MT_LinearCrossEntropyOp : MT_Op<"linear_cross_entropy", [Pure]> {
  let summary = "LM head and cross-entropy in one, chunked over rows";
  let description = [{
    `cross_entropy(softcap?(x @ w), targets)` without materialising the
    `[B, S, V]` logits: the runtime computes them a chunk of rows at a time.
    `w` is `[D, V]`, or `[V, D]` with `transpose_weight` (a tied embedding
    table). `softcap > 0` caps the logits with `softcap * tanh(l / softcap)`.
    Created by `mtc-fuse-linear-cross-entropy`.

    ```mlir
    %loss = mt.linear_cross_entropy %x, %emb, %targets transpose_weight
        softcap = 0.0 ignore_index = -1 : !mt.tensor<[B, S, 64], f32>,
        !mt.tensor<[256, 64], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    ```
  }];
  let arguments = (ins MT_AnyTensor:$input, MT_AnyTensor:$weight,
                       MT_AnyTensor:$targets, UnitAttr:$transpose_weight,
                       DefaultValuedAttr<F64Attr, "0.0">:$softcap,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs MT_AnyTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $targets (`transpose_weight` $transpose_weight^)?
    `softcap` `=` $softcap `ignore_index` `=` $ignore_index attr-dict `:`
    type($input) `,` type($weight) `,` type($targets) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The vocabulary size V.
    int64_t getVocabulary();
  }];
}

include "MtGradOps.td"
include "MtFusedOps.td"

#endif // MTC_DIALECTS_MT_MTOPS_TD
