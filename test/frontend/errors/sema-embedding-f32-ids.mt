// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// embedding needs i32 ids.
// CHECK: {{.*}}sema-embedding-f32-ids.mt:17:9: error: 'embedding' ids must be i32, got f32
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
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
    y = embedding(x, emb)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
