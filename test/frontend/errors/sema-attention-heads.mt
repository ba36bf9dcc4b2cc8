// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// Grouped-query attention needs the key/value heads to divide the query heads.
// CHECK: {{.*}}sema-attention-heads.mt:13:11: error: shape mismatch in 'attention': attention key/value heads 3 do not divide query heads 4: q [B, S, 4, 6], k [B, S, 3, 6]
model M {
  config { dim = 24; eps = 1e-5; heads = 4; kv = 3; hd = 6 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param wq: [dim, heads * hd] = normal(0.02)
    param wk: [dim, kv * hd] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      q = reshape(x @ wq, [B, S, heads, hd])
      k = reshape(x @ wk, [B, S, kv, hd])
      a = attention(q, k, k)
      return x + reshape(a, [B, S, dim])
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
