// Reductions and softmax, for gradcheck.
model Reductions {
  config { vocab = 16; dim = 8 }
  param emb: [vocab, dim] = normal(0.5)
  layer L x 1 {
    param w: [dim, dim] = normal(0.3)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = x @ w
      s = sum(h, -1, keepdim = true)
      m = mean(h, -1, keepdim = true)
      mx = max(h, -1, keepdim = true)
      p = softmax(h, axis = -1)
      return x + p * s - m * 0.5 + mx * 0.1
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = L(embedding(tokens, emb))
    return cross_entropy(x @ transpose(emb), targets, ignore_index = 3)
  }
}
