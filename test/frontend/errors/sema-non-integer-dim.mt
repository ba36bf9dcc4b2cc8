// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// A dimension that evaluates to a fraction.
// CHECK: {{.*}}sema-non-integer-dim.mt:7:17: error: dimension 'head_dim' is 2.66667, not an integer
model M {
  config { dim = 8; eps = 1e-5; heads = 3; head_dim = dim / heads }
  param emb: [16, dim] = normal(0.02)
  param extra: [head_dim] = ones
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
