// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// The returned value does not have the declared result shape.
// CHECK: {{.*}}sema-return-shape.mt:10:7: error: forward returns [B, S] but is declared to return [B, S, 8]
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return sum(x @ w, -1)
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
