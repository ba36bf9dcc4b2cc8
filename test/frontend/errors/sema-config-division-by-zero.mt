// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// Division by zero while evaluating the config.
// CHECK: {{.*}}sema-config-division-by-zero.mt:5:61: error: division by zero
model M {
  config { dim = 8; eps = 1e-5; groups = 0; per_group = dim / groups }
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
    return cross_entropy(x @ transpose(emb), targets)
  }
}
