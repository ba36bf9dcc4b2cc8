// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// Independent mistakes are all reported in one run; a failed value does not cascade.
// CHECK: {{.*}}sema-multiple-errors.mt:14:22: error: unknown name 'nrom'; did you mean 'norm'?
// CHECK: {{.*}}sema-multiple-errors.mt:16:13: error: shape mismatch in '+': cannot broadcast [B, S, 8] and [B, S, 16]
// CHECK: {{.*}}sema-multiple-errors.mt:23:9: error: unknown operation 'softmaxx'; did you mean 'softmax'?
// CHECK: 3 errors generated.
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param norm: [dim] = ones
    param w: [dim, 2 * dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = rmsnorm(x, nrom, eps)
      y = h @ w
      z = x + x @ w
      return x + silu(x)
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    x = softmaxx(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
