# qwen2-small.mt — a small Qwen2-style decoder (Qwen2 / Qwen2.5 family).
#
# Faithful to Qwen2 (the 0.5B / 1.5B configurations):
#   * pre-norm blocks with RMSNorm, eps 1e-6;
#   * q, k and v projections WITH a bias, the output projection without one;
#   * rotary position embeddings with theta 1,000,000;
#   * grouped-query attention with a head_dim of 64 that is chosen
#     independently of dim (Qwen2-0.5B: 14 query heads, 2 kv heads, 64 dims);
#   * SwiGLU feed-forward, hidden size about 5.4 * dim (0.5B: 4864 / 896),
#     here 1408 = 5.5 * 256;
#   * tied embeddings: the LM head is the transposed embedding table.
# Small: byte-level vocabulary (256), dim 256, 4 layers, 4 query heads, 2 kv
# heads.
#
# Parameter count (source of truth for test/examples/qwen2-small-summary.test):
#   per layer = 2*dim                                   (attn_norm, mlp_norm)
#             + (dim*n_heads*hd + n_heads*hd)           (wq, bq)
#             + 2*(dim*n_kv*hd + n_kv*hd)               (wk, bk, wv, bv)
#             + n_heads*hd*dim                          (wo)
#             + 3*dim*ffn                               (w_gate, w_up, w_down)
#             = 512 + 65,792 + 2*32,896 + 65,536 + 3*360,448 = 1,278,976
#   model     = vocab*dim + dim                         (tok_emb, final_norm; tied head)
#             = 65,536 + 256 = 65,792
#   total     = 65,792 + 4 * 1,278,976 = 5,181,696

model Qwen2Small {
  config {
    vocab = 256
    dim = 256
    n_layers = 4
    n_heads = 4
    n_kv = 2
    head_dim = 64
    ffn = 1408
    theta = 1000000.0
    eps = 1e-6
  }

  param tok_emb: [vocab, dim] = normal(0.02)

  layer Block x n_layers {
    param attn_norm: [dim] = ones
    param wq: [dim, n_heads * head_dim] = normal(0.02)
    param bq: [n_heads * head_dim] = zeros
    param wk: [dim, n_kv * head_dim] = normal(0.02)
    param bk: [n_kv * head_dim] = zeros
    param wv: [dim, n_kv * head_dim] = normal(0.02)
    param bv: [n_kv * head_dim] = zeros
    param wo: [n_heads * head_dim, dim] = scaled_normal(0.02)
    param mlp_norm: [dim] = ones
    param w_gate: [dim, ffn] = normal(0.02)
    param w_up: [dim, ffn] = normal(0.02)
    param w_down: [ffn, dim] = scaled_normal(0.02)

    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = rmsnorm(x, attn_norm, eps)
      q = rope(reshape(matmul(h, wq, bq), [B, S, n_heads, head_dim]), theta)
      k = rope(reshape(matmul(h, wk, bk), [B, S, n_kv, head_dim]), theta)
      v = reshape(matmul(h, wv, bv), [B, S, n_kv, head_dim])
      a = attention(q, k, v, causal = true)
      x = x + reshape(a, [B, S, n_heads * head_dim]) @ wo   # no o-proj bias

      m = rmsnorm(x, mlp_norm, eps)
      return x + (silu(m @ w_gate) * (m @ w_up)) @ w_down
    }
  }

  param final_norm: [dim] = ones

  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, tok_emb)
    x = Block(x)
    x = rmsnorm(x, final_norm, eps)
    logits = x @ transpose(tok_emb)         # tied word embeddings
    return cross_entropy(logits, targets, ignore_index = -1)
  }
}
