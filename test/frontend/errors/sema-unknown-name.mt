// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// A misspelt parameter name gets a suggestion.
// CHECK: {{.*}}sema-unknown-name.mt:11:42: error: unknown name 'ww'; did you mean 'w'?
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param norm: [dim] = ones
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x + rmsnorm(x, norm, eps) @ ww
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
