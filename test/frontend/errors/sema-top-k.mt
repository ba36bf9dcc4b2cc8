// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// moe cannot choose more experts than there are.
// CHECK: {{.*}}sema-top-k.mt:16:46: error: top_k 5 exceeds the 4 experts of 'FFN'
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param router: [dim, 4] = normal(0.02)
    expert FFN x 4 {
      param w: [dim, dim] = normal(0.02)
      forward(t: [T, dim]) -> [T, dim] {
        return silu(t @ w)
      }
    }
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x + moe(x, router, FFN, top_k = 5)
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
