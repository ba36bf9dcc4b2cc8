# A model whose forward declares a static sequence length (a learned
# position table of `seq` rows added to every sequence, as GPT-2 does):
# it trains only at --seq 16.
model StaticSeq {
  config {
    vocab = 256
    seq = 16
    dim = 32
    n_layers = 1
    n_heads = 4
    head_dim = dim / n_heads
    eps = 1e-5
  }

  param tok_emb: [vocab, dim] = normal(0.02)
  param pos_emb: [seq, dim] = normal(0.01)

  layer Block x n_layers {
    param norm: [dim] = ones
    param wq: [dim, dim] = normal(0.02)
    param wk: [dim, dim] = normal(0.02)
    param wv: [dim, dim] = normal(0.02)
    param wo: [dim, dim] = scaled_normal(0.02)

    forward(x: [B, seq, dim]) -> [B, seq, dim] {
      h = rmsnorm(x, norm, eps)
      q = reshape(h @ wq, [B, seq, n_heads, head_dim])
      k = reshape(h @ wk, [B, seq, n_heads, head_dim])
      v = reshape(h @ wv, [B, seq, n_heads, head_dim])
      a = attention(q, k, v, causal = true)
      return x + reshape(a, [B, seq, dim]) @ wo
    }
  }

  param lm_head: [dim, vocab] = normal(0.02)

  forward(tokens: [B, seq] i32, targets: [B, seq] i32) -> [] {
    x = embedding(tokens, tok_emb) + pos_emb
    x = Block(x)
    return cross_entropy(x @ lm_head, targets, ignore_index = -1)
  }
}
