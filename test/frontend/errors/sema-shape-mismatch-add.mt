// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// Adding activations of different widths: both shapes are shown at the '+'.
// CHECK: {{.*}}sema-shape-mismatch-add.mt:10:16: error: shape mismatch in '+': cannot broadcast [B, S, 8] and [B, S, 16]
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param w: [dim, 2 * dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x + x @ w
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
