// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// A config entry used before its definition.
// CHECK: {{.*}}sema-config-undefined.mt:6:43: error: config entry 'hidden' is used before its definition
// CHECK: {{.*}}sema-config-undefined.mt:6:51: note: 'hidden' is defined here
model M {
  config { dim = 8; eps = 1e-5; ffn = 4 * hidden; hidden = dim }
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
