# A small decoder whose RMSNorms are written by hand, so that mtc-fuse sees
# the reduction chain rsqrt(mean(square(x)) + eps) (and its backward).
model HandNorm {
  config {
    vocab = 256
    dim = 32
    ffn = 64
    eps = 1e-5
  }

  param tok_emb: [vocab, dim] = normal(0.02)

  layer Block x 2 {
    param norm: [dim] = ones
    param w1: [dim, ffn] = normal(0.02)
    param w2: [ffn, dim] = scaled_normal(0.02)

    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = x * rsqrt(mean(square(x), -1, keepdim = true) + eps) * norm
      return x + silu(h @ w1) @ w2
    }
  }

  param final_norm: [dim] = ones
  param lm_head: [dim, vocab] = normal(0.02)

  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = Block(embedding(tokens, tok_emb))
    x = x * rsqrt(mean(square(x), -1, keepdim = true) + eps) * final_norm
    return cross_entropy(x @ lm_head, targets, ignore_index = -1)
  }
}
