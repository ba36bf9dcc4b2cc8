// RUN: mtc-opt %s --mtc-autodiff --verify-diagnostics

// Every op of the language has a differentiation rule (mt.moe included: it
// becomes mt.moe_grad, see mtc-autodiff.mlir). What remains rejected is IR
// that only later passes produce: mtc-autodiff runs before mtc-fuse, so an
// mt.fused region in a forward function has no rule.
mt.model @M {
  mt.layer @L x 1 {
    mt.param @g : !mt.tensor<[8], f32> init ones
    func.func @forward(%x: !mt.tensor<[B, S, 8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      %g = mt.param_ref @g : !mt.tensor<[8], f32>
      // expected-error @+1 {{'mt.fused' op has no differentiation rule yet; mtc-autodiff cannot build its backward pass}}
      %y = mt.fused (%x, %g) : (!mt.tensor<[B, S, 8], f32>, !mt.tensor<[8], f32>) -> !mt.tensor<[B, S, 8], f32> {
      ^bb0(%a: !mt.tensor<[B, S, 8], f32>, %b: !mt.tensor<[8], f32>):
        %s = mt.silu %a : !mt.tensor<[B, S, 8], f32>
        %m = mt.mul %s, %b : !mt.tensor<[B, S, 8], f32>, !mt.tensor<[8], f32> -> !mt.tensor<[B, S, 8], f32>
        mt.yield %m : !mt.tensor<[B, S, 8], f32>
      }
      return %y : !mt.tensor<[B, S, 8], f32>
    }
  }
  func.func @forward(%t: !mt.tensor<[B, S], i32>) -> !mt.tensor<[], f32> {
    %c = mt.constant 0.0 : !mt.tensor<[], f32>
    return %c : !mt.tensor<[], f32>
  }
}
