// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// Nothing may follow return.
// CHECK: {{.*}}sema-statement-after-return.mt:12:7: error: unreachable statement after 'return'
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param norm: [dim] = ones
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x + rmsnorm(x, norm, eps) @ w
      y = x
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
