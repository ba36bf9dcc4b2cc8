# tiny-llama.mt — a small Llama-style decoder (LLaMA / Llama 2 family).
#
# Faithful to Llama:
#   * pre-norm blocks with RMSNorm (eps 1e-5), no biases anywhere;
#   * rotary position embeddings on q and k, theta 10000, rotate-half layout;
#   * grouped-query attention (8 query heads share 4 key/value heads, as
#     Llama 2 70B shares 8 kv heads between 64 query heads), causal;
#   * SwiGLU feed-forward: w_down(silu(x w_gate) * (x w_up)), with the hidden
#     size from Llama's rule: 2/3 * 4 * dim = 682.7, rounded up to a multiple
#     of 16 -> 688;
#   * a final RMSNorm and an untied LM head `lm_head: [dim, vocab]`.
# Small: byte-level vocabulary (256), dim 256, 4 layers, head_dim 32. This is
# the default model that `make run` trains on CPU.
#
# Parameter count (source of truth for test/examples/tiny-llama-summary.test):
#   per layer = 2*dim                                   (attn_norm, mlp_norm)
#             + dim*n_heads*hd + 2*dim*n_kv*hd          (wq, wk, wv)
#             + n_heads*hd*dim                          (wo)
#             + 3*dim*ffn                               (w_gate, w_up, w_down)
#             = 512 + 65,536 + 2*32,768 + 65,536 + 3*176,128 = 725,504
#   model     = vocab*dim + dim + dim*vocab             (tok_emb, final_norm, lm_head)
#             = 65,536 + 256 + 65,536 = 131,328
#   total     = 131,328 + 4 * 725,504 = 3,033,344

model ShortContext {
  config {
    vocab = 256
    max_seq = 32          # the longest sequence this model may be trained on
    dim = 256
    n_layers = 4
    n_heads = 8
    n_kv = 4
    head_dim = dim / n_heads
    ffn = 688
    theta = 10000.0
    eps = 1e-5
  }

  param tok_emb: [vocab, dim] = normal(0.02)

  layer Block x n_layers {
    param attn_norm: [dim] = ones
    param wq: [dim, n_heads * head_dim] = normal(0.02)
    param wk: [dim, n_kv * head_dim] = normal(0.02)
    param wv: [dim, n_kv * head_dim] = normal(0.02)
    param wo: [n_heads * head_dim, dim] = scaled_normal(0.02)
    param mlp_norm: [dim] = ones
    param w_gate: [dim, ffn] = normal(0.02)
    param w_up: [dim, ffn] = normal(0.02)
    param w_down: [ffn, dim] = scaled_normal(0.02)

    forward(x: [B, S, dim]) -> [B, S, dim] {
      # Attention: x + wo(attn(rope(q), rope(k), v))
      h = rmsnorm(x, attn_norm, eps)
      q = rope(reshape(h @ wq, [B, S, n_heads, head_dim]), theta)
      k = rope(reshape(h @ wk, [B, S, n_kv, head_dim]), theta)
      v = reshape(h @ wv, [B, S, n_kv, head_dim])
      a = attention(q, k, v, causal = true)
      x = x + reshape(a, [B, S, n_heads * head_dim]) @ wo

      # SwiGLU feed-forward
      m = rmsnorm(x, mlp_norm, eps)
      return x + (silu(m @ w_gate) * (m @ w_up)) @ w_down
    }
  }

  param final_norm: [dim] = ones
  param lm_head: [dim, vocab] = normal(0.02)

  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, tok_emb)
    x = Block(x)
    x = rmsnorm(x, final_norm, eps)
    logits = x @ lm_head
    return cross_entropy(logits, targets, ignore_index = -1)
  }
}
