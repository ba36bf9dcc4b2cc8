//===- MtTypes.td - Types of the mt dialect ----------------*- tablegen -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_DIALECTS_MT_MTTYPES_TD
#define MTC_DIALECTS_MT_MTTYPES_TD

include "MtBase.td"

def Mt_TensorType : TypeDef<Mt_Dialect, "MtTensor"> {
  let mnemonic = "tensor";
  let summary = "a tensor whose dims may be symbolic (B, S, T)";
  let description = [{
    A ranked tensor. Each dimension is a non-negative integer or one of the
    symbolic dimensions `B` (batch), `S` (sequence length) and `T` (tokens
    routed to one expert), which are bound only when a step is built. The
    element type is `f32`, `bf16` or `i32`.

    ```mlir
    !mt.tensor<[B, S, 256], f32>
    !mt.tensor<[256, 688], bf16>
    !mt.tensor<[B, S], i32>
    !mt.tensor<[], f32>          // a scalar
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t", "dims">:$shape,
                        "::mlir::Type":$elementType);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    TypeBuilderWithInferredContext<(ins "::llvm::ArrayRef<int64_t>":$shape,
                                        "::mlir::Type":$elementType), [{
      return $_get(elementType.getContext(), shape, elementType);
    }]>
  ];
  let extraClassDeclaration = [{
    int64_t getRank() const { return getShape().size(); }
    /// The shape as the frontend's shape vocabulary (lib/Support/Shape.h).
    ::mtc::Shape getShapeVector() const {
      return ::mtc::Shape(getShape().begin(), getShape().end());
    }
    bool isFloat() const { return ::llvm::isa<::mlir::FloatType>(getElementType()); }
  }];
}

// Operands and results are declared with the generic C++ type so that the
// printed IR always spells `!mt.tensor<...>` in full.
def MT_AnyTensor : Type<CPred<"::llvm::isa<::mtc::mt::MtTensorType>($_self)">,
                        "mt tensor">;

#endif // MTC_DIALECTS_MT_MTTYPES_TD
