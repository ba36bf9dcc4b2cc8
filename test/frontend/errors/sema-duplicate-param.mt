// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// A parameter declared twice in one layer; the note points at the first.
// CHECK: {{.*}}sema-duplicate-param.mt:11:11: error: duplicate parameter 'w'
// CHECK: {{.*}}sema-duplicate-param.mt:10:11: note: 'w' was first declared here
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param norm: [dim] = ones
    param w: [dim, dim] = normal(0.02)
    param w: [dim, dim] = zeros
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
