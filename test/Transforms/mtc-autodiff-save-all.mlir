// RUN: mtc-opt %s --mtc-autodiff="save=all" | FileCheck %s
// RUN: not mtc-opt %s --mtc-autodiff="save=some" 2>&1 | FileCheck %s --check-prefix=BAD

// With save=all the forward returns what the backward reads, and the
// backward takes it instead of recomputing: no forward op is repeated.
mt.model @M {
  mt.layer @L x 2 {
    mt.param @w : !mt.tensor<[8, 8], f32> init normal [0.02]
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %w = mt.param_ref @w : !mt.tensor<[8, 8], f32>
      %h = mt.matmul %x, %w : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 8], f32> -> !mt.tensor<[B, S, 8], f32>
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
// CHECK: %[[H:.*]] = mt.matmul %[[X]]
// CHECK: %[[Y:.*]] = mt.add
// CHECK: return %[[Y]], %[[H]]
// CHECK: func.func @backward(%[[BX:.*]]: !mt.tensor<[B, S, 8], f32>, %[[DY:.*]]: !mt.tensor<[B, S, 8], f32>, %[[BH:.*]]: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32>
// CHECK-NOT: mt.matmul %[[BX]]
// CHECK: mt.unary_grad silu %[[BH]], %[[DY]]
// CHECK: mt.weight_grad %[[BX]]
// CHECK: return

// BAD: for the --save option: 'some' is not one of input, all, selective
