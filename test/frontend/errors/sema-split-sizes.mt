// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// split sizes must add up to the split dimension.
// CHECK: {{.*}}sema-split-sizes.mt:11:14: error: shape mismatch in 'split': split sizes [4, 2] add up to 6, but axis 2 of [B, S, 8] is 8
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param norm: [dim] = ones
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      a, b = split(x, [4, 2], -1)
      return x + rmsnorm(x, norm, eps) @ w
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
