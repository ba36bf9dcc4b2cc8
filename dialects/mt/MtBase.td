//===- MtBase.td - The mt dialect and its attributes -------*- tablegen -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_DIALECTS_MT_MTBASE_TD
#define MTC_DIALECTS_MT_MTBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Mt_Dialect : Dialect {
  let name = "mt";
  let cppNamespace = "::mtc::mt";
  let summary = "Transformer models as tensor programs over layer templates";
  let description = [{
    The `mt` dialect is what the `.mt` frontend (and the HuggingFace importer)
    produce. A model (`mt.model`) holds its parameters (`mt.param`), its layer
    templates (`mt.layer`, each instantiated `count` times, possibly holding
    `mt.expert` blocks) and one `func.func @forward` computing the loss. Every
    layer template has its own `func.func @forward`: the same body serves every
    instance, with the instance's weights read through `mt.param_ref`. The model
    body applies layers with `mt.apply_layers`; that op, one layer instance at a
    time, is the unit later passes stream through device memory.

    Tensors are `!mt.tensor<[dims], dtype>` where a dim is an integer or one of
    the symbolic dims `B` (batch), `S` (sequence) and `T` (tokens routed to one
    expert). Every op verifies its shapes with the same rules as the frontend.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let extraClassDeclaration = [{
    /// Registers the dialect's types (MtTypes.cpp, where their storage lives).
    void registerTypes();
  }];
}

def MT_InitKind : I32Enum<"InitKind", "parameter initializer", [
  I32EnumCase<"Zeros", 0, "zeros">,
  I32EnumCase<"Ones", 1, "ones">,
  I32EnumCase<"Normal", 2, "normal">,
  I32EnumCase<"ScaledNormal", 3, "scaled_normal">,
  I32EnumCase<"Uniform", 4, "uniform">
]> {
  let cppNamespace = "::mtc::mt";
}

def MT_InitKindAttr : EnumAttr<Mt_Dialect, MT_InitKind, "init"> {
  let assemblyFormat = "`<` $value `>`";
}

// The elementwise functions of lib/Bundle/UnaryFns.def (MT_UnaryFnCases is
// generated from it, see MtUnaryFns.td.in).
include "MtUnaryFns.td"

def MT_UnaryFn : I32Enum<"UnaryFn", "elementwise function", MT_UnaryFnCases> {
  let cppNamespace = "::mtc::mt";
  let description = [{
    The function a unary op computes, and whose derivative `mt.unary_grad`
    computes: one case per line of lib/Bundle/UnaryFns.def, with the same
    names and numbers as the runtime's `bundle::UnaryFn`.
  }];
}

def MT_UnaryFnAttr : EnumAttr<Mt_Dialect, MT_UnaryFn, "unary_fn"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // MTC_DIALECTS_MT_MTBASE_TD
