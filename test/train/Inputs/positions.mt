# A GPT-2-style model whose output depends strongly on the learned position
# rows (a table of 24 rows drawn with std 1): the KV cache must give each new
# token the row of its absolute position. test/train/positions.test.
model Positions {
  config { vocab = 256; n_ctx = 24; dim = 32; n_heads = 2; eps = 1e-5 }
  param tok_emb: [vocab, dim] = normal(0.02)
  param pos_emb: [n_ctx, dim] = normal(1.0)
  layer Block x 1 {
    param ln: [dim] = ones
    param ln_b: [dim] = zeros
    param w_qkv: [dim, 3 * dim] = normal(0.2)
    param wo: [dim, dim] = normal(0.2)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = layernorm(x, ln, ln_b, eps)
      q, k, v = split(h @ w_qkv, [dim, dim, dim], axis = -1)
      a = attention(reshape(q, [B, S, n_heads, dim / n_heads]),
                    reshape(k, [B, S, n_heads, dim / n_heads]),
                    reshape(v, [B, S, n_heads, dim / n_heads]), causal = true)
      return x + reshape(a, [B, S, dim]) @ wo
    }
  }
  param lm_head: [dim, vocab] = normal(0.2)
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, tok_emb) + slice(pos_emb, 0, 0, S)
    x = Block(x)
    return cross_entropy(x @ lm_head, targets, ignore_index = -1)
  }
}
