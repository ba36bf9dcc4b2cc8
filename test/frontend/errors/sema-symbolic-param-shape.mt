// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// Parameters have static shapes: B is not allowed.
// CHECK: {{.*}}sema-symbolic-param-shape.mt:7:16: error: 'B' cannot be used in the shape of parameter 'bias'; parameter shapes are static
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  param bias: [B, dim] = zeros
  layer Block x 2 {
    param norm: [dim] = ones
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x + rmsnorm(x, norm, eps) @ w
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
