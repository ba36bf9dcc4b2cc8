// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// Block(x) applies every instance, so a second application is an error.
// CHECK: {{.*}}sema-applied-twice.mt:17:9: error: 'Block(x)' applies all 2 instances of layer 'Block' and cannot be combined with other applications of it
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
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
