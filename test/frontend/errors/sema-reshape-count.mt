// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// reshape must keep the element count.
// CHECK: {{.*}}sema-reshape-count.mt:11:11: error: shape mismatch in 'reshape': cannot reshape [B, S, 8] to [B, S, 2, 3]: element counts differ (8 vs 6)
model M {
  config { dim = 8; eps = 1e-5; heads = 2 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param norm: [dim] = ones
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = reshape(x, [B, S, heads, 3])
      return x + rmsnorm(x, norm, eps) @ w
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
