// RMSNorm (plain and (1 + w)) and LayerNorm (with and without bias), and a
// matmul with bias, for gradcheck.
model Norms {
  config { vocab = 16; dim = 8; eps = 1e-5 }
  param emb: [vocab, dim] = normal(0.5)
  param head: [dim, vocab] = normal(0.3)
  param head_b: [vocab] = normal(0.1)
  layer L x 2 {
    param g1: [dim] = normal(0.5)
    param g2: [dim] = normal(0.5)
    param g3: [dim] = normal(0.5)
    param b3: [dim] = normal(0.5)
    param g4: [dim] = normal(0.5)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      a = rmsnorm(x, g1, eps)
      b = rmsnorm(x, g2, eps, offset = 1.0)
      c = layernorm(x * 2.0, g3, b3, eps)
      d = layernorm(x, g4, eps)
      return x + a * 0.5 + b * 0.25 + c * 0.125 + d * 0.0625
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = L(embedding(tokens, emb))
    return cross_entropy(matmul(x, head, head_b), targets)
  }
}
