// RUN: mtc-opt %s --mtc-autodiff | FileCheck %s
// RUN: mtc-opt %s --mtc-autodiff | mtc-opt --mtc-autodiff | FileCheck %s

// A layer: matmul, broadcast multiply by a norm weight, rope, tied reuse of x.
mt.model @M {
  mt.param @emb : !mt.tensor<[16, 8], f32> init normal [0.02]
  mt.layer @L x 2 {
    mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
    mt.param @g : !mt.tensor<[8], f32> init ones
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %g = mt.param_ref @g : !mt.tensor<[8], f32>
      %h = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      %s = mt.mul %h, %g : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8], f32> -> !mt.tensor<[B, S, 8], f32>
      %y = mt.add %x, %s : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %e = mt.param_ref @emb : !mt.tensor<[16, 8], f32>
    %x = mt.embedding %t, %e : !mt.tensor<[B, S], i32>, !mt.tensor<[16, 8], f32> -> !mt.tensor<[B, S, 8], f32>
    %h = mt.apply_layers @L[0, 2] %x : !mt.tensor<[B, S, 8], f32>
    %et = mt.transpose %e perm = [1, 0] : !mt.tensor<[16, 8], f32> -> !mt.tensor<[8, 16], f32>
    %l = mt.matmul %h, %et : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 16], f32> -> !mt.tensor<[B, S, 16], f32>
    %loss = mt.cross_entropy %l, %u ignore_index = -1 : !mt.tensor<[B, S, 16], f32>, !mt.tensor<[B, S], i32> -> !mt.tensor<[], f32>
    return %loss : !mt.tensor<[], f32>
  }
}

// The layer's backward: recomputes h, then the reverse sweep.
// CHECK-LABEL: mt.layer @L x 2
// CHECK: func.func @backward(%[[X:.*]]: !mt.tensor<[B, S, 8], f32>, %[[DY:.*]]: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32>
// The final residual add is not recomputed: nothing needs it.
// CHECK-NOT: mt.add %[[X]]
// CHECK: %[[H:.*]] = mt.matmul %[[X]], %{{.*}}
// d(h * g)/dh: dy * g (broadcast), d/dg: dy * h reduced to [8].
// CHECK: %[[DH:.*]] = mt.mul %[[DY]], %[[G:.*]] :
// CHECK: %[[DGF:.*]] = mt.mul %[[DY]], %[[H]] :
// CHECK: %[[DG:.*]] = mt.reduce_to %[[DGF]] : !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[8], f32>
// CHECK: %[[WT:.*]] = mt.transpose %{{.*}} perm = [1, 0]
// CHECK: %[[DXM:.*]] = mt.matmul %[[DH]], %[[WT]]
// The residual: x receives dy and the matmul's input gradient.
// CHECK: %[[DX:.*]] = mt.add %[[DY]], %[[DXM]]
// CHECK: %[[DW:.*]] = mt.weight_grad %[[X]], %[[DH]] : {{.*}} -> !mt.tensor<[8, 8], f32>
// CHECK-DAG: mt.param_grad @w, %[[DW]]
// CHECK-DAG: mt.param_grad @g, %[[DG]]
// CHECK: return %[[DX]]

// The model: forward, then the reverse sweep seeded with dloss = 1.
// CHECK: func.func @forward_backward(%[[T:.*]]: !mt.tensor<[B, S], i32>, %[[U:.*]]: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32>
// CHECK: %[[XE:.*]] = mt.embedding %[[T]]
// CHECK: %[[HL:.*]] = mt.apply_layers @L[0, 2] %[[XE]]
// CHECK: %[[LOSS:.*]] = mt.cross_entropy
// CHECK: %[[ONE:.*]] = mt.constant 1.000000e+00
// CHECK: %[[DL:.*]] = mt.cross_entropy_grad %{{.*}}, %[[U]], %[[ONE]] ignore_index = -1
// CHECK: %[[DHL:.*]] = mt.matmul %[[DL]], %{{.*}}
// CHECK: %[[DETT:.*]] = mt.weight_grad %[[HL]], %[[DL]] : {{.*}} -> !mt.tensor<[8, 16], f32>
// Tied use: the transpose's gradient and the embedding's gradient add up.
// CHECK: %[[DET:.*]] = mt.transpose %[[DETT]] perm = [1, 0]
// CHECK: %[[DXL:.*]] = mt.apply_layers_grad @L[0, 2] %[[DHL]]
// CHECK: %[[DEE:.*]] = mt.embedding_grad %[[T]], %[[DXL]]
// CHECK: %[[DE:.*]] = mt.add %[[DET]], %[[DEE]]
// CHECK: mt.param_grad @emb, %[[DE]] : !mt.tensor<[16, 8], f32>
// CHECK: return %[[LOSS]]
