# A small decoder whose fused regions read their inputs in every way the
# kernels know: whole tensors, a one-element parameter (scalar), a [dim]
# parameter (suffix), per-row values (row), with sum, mean and max over the
# last axis; the activations include relu2, whose device functions only the
# emitted kernels call. dim is set per test (rows of one warp, or of a whole block).
model FusedAccess {
  config {
    vocab = 64
    dim = 40
    ffn = 48
    eps = 1e-5
  }

  param tok_emb: [vocab, dim] = normal(0.5)

  layer Block x 1 {
    param norm: [dim] = ones
    param gain: [1] = ones
    param w1: [dim, ffn] = normal(0.02)
    param w2: [ffn, dim] = scaled_normal(0.02)

    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = x * rsqrt(mean(square(x), -1, keepdim = true) + eps) * norm
      c = h - max(h, -1, keepdim = true)
      z = log(sum(exp(c), -1, keepdim = true))
      a = h @ w1
      u = tanh(gelu(a) * gain) + relu2(a) * gain
      return x + (u @ w2) * gain + sigmoid(c - z) * norm
    }
  }

  param lm_head: [dim, vocab] = normal(0.02)

  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = Block(embedding(tokens, tok_emb))
    return cross_entropy(x @ lm_head, targets, ignore_index = -1)
  }
}
