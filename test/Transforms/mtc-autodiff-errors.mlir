// RUN: mtc-opt %s --mtc-autodiff --verify-diagnostics

mt.model @M {
  mt.layer @L x 1 {
    mt.param @router : !mt.tensor<[8, 4], f32> init zeros
    mt.expert @E x 4 {
      func.func @forward(%t: !mt.tensor<[T, 8], f32>) -> !mt.tensor<[T, 8], f32> {
        return %t : !mt.tensor<[T, 8], f32>
      }
    }
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %r = mt.param_ref @router : !mt.tensor<[8, 4], f32>
      // expected-error @+1 {{'mt.moe' op has no differentiation rule yet; mtc-autodiff cannot build its backward pass}}
      %y = mt.moe %x, %r expert @E top_k = 2 aux_loss = 0.0 : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8, 4], f32> -> !mt.tensor<[B, S, 8], f32>
      return %y : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}
