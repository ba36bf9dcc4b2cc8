// Reshape, transpose, split, concat, slice and batched matmul, for gradcheck.
model Movement {
  config { vocab = 16; dim = 8; half = 4 }
  param emb: [vocab, dim] = normal(0.5)
  layer L x 2 {
    param w: [dim, 2 * dim] = normal(0.3)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      a, b = split(x @ w, [dim, dim], axis = -1)
      r = reshape(a, [B, S, 2, half])
      t = transpose(r, [0, 2, 1, 3])
      u = transpose(t, [0, 2, 1, 3])
      v = reshape(u, [B, S, dim])
      lo = slice(b, -1, 0, half)
      hi = slice(b, -1, half, dim)
      c = concat(hi, lo, axis = -1)
      q = reshape(v, [B, S, 2, half])
      k = transpose(reshape(c, [B, S, 2, half]), [0, 2, 3, 1])
      scores = transpose(q, [0, 2, 1, 3]) @ k
      mix = reshape(transpose(scores @ transpose(q, [0, 2, 1, 3]), [0, 2, 1, 3]), [B, S, dim])
      return x + v * 0.5 + c * 0.25 + mix * 0.05
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = L(embedding(tokens, emb))
    return cross_entropy(x @ transpose(emb), targets)
  }
}
