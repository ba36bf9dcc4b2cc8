// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// The inner dimensions of a matmul differ.
// CHECK: {{.*}}sema-matmul-mismatch.mt:11:27: error: shape mismatch in '@': matmul inner dimensions differ: [B, S, 32] @ [16, 8]
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param w1: [dim, 4 * dim] = normal(0.02)
    param w2: [2 * dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x + (x @ w1) @ w2
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
