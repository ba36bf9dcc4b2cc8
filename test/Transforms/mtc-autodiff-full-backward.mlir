// RUN: mtc-opt %s --mtc-autodiff="save=selective full-backward=true" | FileCheck %s
// RUN: mtc-opt %s --mtc-autodiff="save=selective" | FileCheck %s --check-prefix=NOFULL

// full-backward=true: besides the save=selective @backward, the layer gets
// @backward_full(%x, %dy) -> %dx, the save=input backward of the same
// forward, which recomputes the matmul from the input. A mixed plan runs it
// for the instances that keep their input alone (mtc-insert-recompute
// selective-layers). The forward is the selective one (it returns %h).
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
// CHECK: return %{{.*}}, %[[H:.*]] :
// CHECK: func.func @backward_full(%[[FX:.*]]: !mt.tensor<[B, S, 8], f32>, %[[FDY:.*]]: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "input"}
// CHECK: %[[FN:.*]] = mt.mul %[[FX]], %[[FX]]
// CHECK: %[[FH:.*]] = mt.matmul %[[FN]]
// CHECK: mt.unary_grad silu %[[FH]], %[[FDY]]
// CHECK: return
// CHECK: func.func @backward(%{{.*}}: !mt.tensor<[B, S, 8], f32>, %{{.*}}: !mt.tensor<[B, S, 8], f32>, %{{.*}}: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> attributes {mt.save = "selective"}

// NOFULL-NOT: @backward_full
