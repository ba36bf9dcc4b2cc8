// RUN: mtc-opt %s --mtc-autodiff="save=selective" | FileCheck %s

// With save=selective the forward returns the results of its expensive ops
// (matmul, attention, moe) that the backward needs, and the backward
// recomputes the cheap ops from them and the input: here the square %n that
// the weight gradient reads is recomputed, the matmul %h is kept.
mt.model @M {
  mt.layer @L x 2 {
    mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %n = mt.mul %x, %x : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %h = mt.matmul %n, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %s = mt.silu %h : !mt.tensor<[B, S, 8], f32>
      %y = mt.add %x, %s : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[], f32> {
    %h = mt.apply_layers @L[0, 2] %x : !mt.tensor<[B, S, 8], f32>
    %s = mt.sum %h axis = 2 : !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S], f32>
    %m = mt.mean %s axis = 1 : !mt.tensor<[B, S], f32> -> !mt.tensor<[B], f32>
    %l = mt.mean %m axis = 0 : !mt.tensor<[B], f32> -> !mt.tensor<[], f32>
    return %l : !mt.tensor<[], f32>
  }
}

// CHECK-LABEL: mt.layer @L x 2
// CHECK: func.func @forward(%[[X:.*]]: !mt.tensor<[B, S, 8], f32>) -> (!mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32>)
// CHECK: %[[N:.*]] = mt.mul %[[X]], %[[X]]
// CHECK: %[[H:.*]] = mt.matmul %[[N]]
// CHECK: %[[Y:.*]] = mt.add
// CHECK: return %[[Y]], %[[H]] :
// CHECK: func.func @backward(%[[BX:.*]]: !mt.tensor<[B, S, 8], f32>, %[[DY:.*]]: !mt.tensor<[B, S, 8], f32>, %[[BH:.*]]: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "selective"}
// CHECK: %[[BN:.*]] = mt.mul %[[BX]], %[[BX]]
// CHECK-NOT: mt.matmul %[[BN]]
// CHECK: mt.unary_grad silu %[[BH]], %[[DY]]
// CHECK: mt.weight_grad %[[BN]]
// CHECK: return
