// Attention variants and RoPE (partial rotary, llama3 scaling), for gradcheck.
model Attention {
  config { vocab = 16; dim = 16; hq = 4; hkv = 2; hd = 4 }
  param emb: [vocab, dim] = normal(0.5)
  layer L x 1 {
    param wq: [dim, hq * hd] = normal(0.4)
    param wk: [dim, hkv * hd] = normal(0.4)
    param wv: [dim, hkv * hd] = normal(0.4)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      q = rope(reshape(x @ wq, [B, S, hq, hd]), 10000.0, fraction = 0.5)
      k = rope(reshape(x @ wk, [B, S, hkv, hd]), 10000.0, fraction = 0.5)
      q2 = rope(reshape(x @ wq, [B, S, hq, hd]), 500000.0, scaling = llama3(8.0, 1.0, 4.0, 16))
      k2 = rope(reshape(x @ wk, [B, S, hkv, hd]), 500000.0, scaling = llama3(8.0, 1.0, 4.0, 16))
      v = reshape(x @ wv, [B, S, hkv, hd])
      a = attention(q, k, v, causal = true)
      b = attention(q2, k2, v, causal = true, window = 3, softcap = 2.0, scale = 0.4)
      c = attention(q, k, v, causal = false)
      return x + reshape(a + b * 0.5 + c * 0.25, [B, S, dim])
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = L(embedding(tokens, emb))
    return cross_entropy(x @ transpose(emb), targets)
  }
}
