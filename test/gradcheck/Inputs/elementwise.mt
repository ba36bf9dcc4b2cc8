// Elementwise operations, broadcasting and scalars, for gradcheck.
model Elementwise {
  config { vocab = 16; dim = 8 }
  param emb: [vocab, dim] = normal(0.5)
  layer L x 1 {
    param g: [dim] = normal(0.5)
    param b: [dim] = normal(0.5)
    param w: [dim, dim] = normal(0.3)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      a = exp(x * 0.5) + log(sigmoid(x) + 1.0) - tanh(x) * g
      c = silu(x) * relu(x + b) + gelu(x) - gelu(x, approximate = "tanh")
      d = rsqrt(square(x) + 1.0) + sqrt(square(b) + 0.5) / (2.0 + sigmoid(x))
      e = softcap(x @ w, 2.0) - neg(x) * 0.25 + relu2(x - b) * 0.5
      return a + c + d + e
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = L(embedding(tokens, emb))
    return cross_entropy(x @ transpose(emb), targets)
  }
}
