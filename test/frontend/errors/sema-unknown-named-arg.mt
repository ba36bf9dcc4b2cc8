// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// A misspelt named argument of attention.
// CHECK: {{.*}}sema-unknown-named-arg.mt:11:30: error: 'attention' has no argument named 'casual'; did you mean 'causal'?
model M {
  config { dim = 8; eps = 1e-5; heads = 2; hd = dim / heads }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param wq: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      q = reshape(x @ wq, [B, S, heads, hd])
      a = attention(q, q, q, casual = true)
      return x + reshape(a, [B, S, dim])
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
