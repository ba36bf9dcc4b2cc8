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

// A mixture-of-experts layer: each expert template gets its own @backward
// over its [T, D] tokens (parameter gradients into the expert's buffers);
// mt.moe differentiates to one mt.moe_grad, and the recomputed mt.moe, which
// the backward does not need, is dropped.
mt.model @Moe {
  mt.layer @MoeLayer x 1 {
    mt.param @router : !mt.tensor<[8, 4], f32> init normal [0.02]
    mt.expert @E x 4 {
      mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
      func.func @forward(%t: !mt.tensor<[T, 8], f32>) -> !mt.tensor<[T, 8], f32> {
        %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
        %h = mt.matmul %t, %w : !mt.tensor<[T, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[T, 8], f32>
        %y = mt.silu %h : !mt.tensor<[T, 8], f32>
        return %y : !mt.tensor<[T, 8], f32>
      }
    }
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %r = mt.param_ref @router : !mt.tensor<[8, 4], f32>
      %m = mt.moe %x, %r expert @E top_k = 2 normalize aux_loss = 0.01 : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 4], f32> -> !mt.tensor<[B, S, 8], f32>
      %y = mt.add %x, %m : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[B, S, 8], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// CHECK-LABEL: mt.layer @MoeLayer x 1
// CHECK: mt.expert @E x 4
// CHECK: func.func @backward(%[[T:.*]]: !mt.tensor<[T, 8], f32>, %[[DT:.*]]: !mt.tensor<[T, 8], f32>) -> !mt.tensor<[T, 8], f32>
// CHECK: %[[W:.*]] = mt.param_ref @w
// CHECK: %[[H:.*]] = mt.matmul %[[T]], %[[W]]
// CHECK: %[[DH:.*]] = mt.unary_grad silu %[[H]], %[[DT]]
// CHECK: %[[DTIN:.*]] = mt.matmul %[[DH]], %{{.*}} : !mt.tensor<[T, 8], f32>
// CHECK: %[[DW:.*]] = mt.weight_grad %[[T]], %[[DH]]
// CHECK: mt.param_grad @w, %[[DW]] : !mt.tensor<[8, 8], f32>
// CHECK: return %[[DTIN]] : !mt.tensor<[T, 8], f32>
// CHECK: func.func @backward(%[[X:.*]]: !mt.tensor<[B, S, 8], f32>, %[[DY:.*]]: !mt.tensor<[B, S, 8], f32>)
// CHECK-NOT: mt.moe %
// CHECK: %[[R:.*]] = mt.param_ref @router
// CHECK-NOT: mt.moe %
// CHECK: %[[DX:.*]], %[[DR:.*]] = mt.moe_grad %[[X]], %[[R]], %[[DY]] expert @E top_k = 2 normalize aux_loss = 1.000000e-02 : {{.*}} -> !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 4], f32>
// CHECK: %[[SUM:.*]] = mt.add %[[DY]], %[[DX]]
// CHECK: mt.param_grad @router, %[[DR]] : !mt.tensor<[8, 4], f32>
// CHECK: return %[[SUM]]

// A unary function without an op of its own in the VJP: relu2's gradient is
// unary_grad relu2 of the saved input.
mt.model @Unary {
  mt.layer @U x 1 {
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %y = mt.relu2 %x : !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>, %u: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}

// CHECK-LABEL: mt.layer @U x 1
// CHECK: func.func @backward(%[[UX:.*]]: !mt.tensor<[B, S, 8], f32>, %[[UDY:.*]]: !mt.tensor<[B, S, 8], f32>)
// CHECK: %[[UDX:.*]] = mt.unary_grad relu2 %[[UX]], %[[UDY]] param = 0.000000e+00 : !mt.tensor<[B, S, 8], f32>
// CHECK: return %[[UDX]] : !mt.tensor<[B, S, 8], f32>
