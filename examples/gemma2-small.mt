# gemma2-small.mt — a small Gemma-2-style decoder.
#
# Faithful to Gemma 2:
#   * the embedding output is multiplied by sqrt(dim) (emb_scale below);
#   * every RMSNorm is Gemma's `x_normed * (1 + w)` (offset = 1.0) with w
#     initialised to zeros, eps 1e-6;
#   * "sandwich" norms: each block normalises the input of the attention and
#     of the feed-forward (pre norms) AND their outputs before the residual
#     add (post norms) — four norms per layer;
#   * GeGLU feed-forward with the tanh approximation of GELU:
#     w_down(gelu_tanh(x w_gate) * (x w_up)), hidden size 4 * dim (Gemma-2 2B:
#     9216 = 4 * 2304);
#   * head_dim chosen independently of dim (2B: 8 heads x 256 = 2048 != 2304),
#     grouped-query attention, RoPE theta 10000;
#   * attention scores scaled by query_pre_attn_scalar^-1/2 rather than
#     head_dim^-1/2; here query_pre_attn_scalar = dim / n_heads as in
#     Gemma-2 27B (4608 / 32 = 144), so the scale differs from the default;
#   * attention-logit soft-capping at 50 and final-logit soft-capping at 30;
#   * layers alternate local sliding-window attention (even layers, window
#     4096 in the real model, 64 here to fit a short training context) and
#     global attention (odd layers): two layer templates, Local and Global,
#     interleaved with `repeat`;
#   * tied embeddings.
# Small: byte-level vocabulary (256), dim 320, 4 layers (2 Local + 2 Global),
# 4 query heads, 2 kv heads, head_dim 64, ffn 1280.
#
# Parameter count (source of truth for test/examples/gemma2-small-summary.test):
#   per layer (Local and Global are identical in parameters)
#             = 4*dim                                   (4 norms)
#             + dim*n_heads*hd + 2*dim*n_kv*hd          (wq, wk, wv)
#             + n_heads*hd*dim                          (wo)
#             + 3*dim*ffn                               (w_gate, w_up, w_down)
#             = 1,280 + 81,920 + 2*40,960 + 81,920 + 3*409,600 = 1,475,840
#   model     = vocab*dim + dim                         (tok_emb, final_norm; tied head)
#             = 81,920 + 320 = 82,240
#   total     = 82,240 + 4 * 1,475,840 = 5,985,600
#               (Local x 2: 2,951,680; Global x 2: 2,951,680)

model Gemma2Small {
  config {
    vocab = 256
    dim = 320
    n_layers = 4
    n_heads = 4
    n_kv = 2
    head_dim = 64
    ffn = 4 * dim
    theta = 10000.0
    eps = 1e-6
    emb_scale = sqrt(dim)
    query_pre_attn_scalar = dim / n_heads
    scale = 1.0 / sqrt(query_pre_attn_scalar)
    window = 64
    attn_softcap = 50.0
    final_softcap = 30.0
  }

  param tok_emb: [vocab, dim] = normal(0.02)

  # Even layers: sliding-window (local) attention.
  layer Local x n_layers / 2 {
    param pre_attn_norm: [dim] = zeros
    param wq: [dim, n_heads * head_dim] = normal(0.02)
    param wk: [dim, n_kv * head_dim] = normal(0.02)
    param wv: [dim, n_kv * head_dim] = normal(0.02)
    param wo: [n_heads * head_dim, dim] = scaled_normal(0.02)
    param post_attn_norm: [dim] = zeros
    param pre_ffw_norm: [dim] = zeros
    param w_gate: [dim, ffn] = normal(0.02)
    param w_up: [dim, ffn] = normal(0.02)
    param w_down: [ffn, dim] = scaled_normal(0.02)
    param post_ffw_norm: [dim] = zeros

    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = rmsnorm(x, pre_attn_norm, eps, offset = 1.0)
      q = rope(reshape(h @ wq, [B, S, n_heads, head_dim]), theta)
      k = rope(reshape(h @ wk, [B, S, n_kv, head_dim]), theta)
      v = reshape(h @ wv, [B, S, n_kv, head_dim])
      a = attention(q, k, v, causal = true, window = window,
                    softcap = attn_softcap, scale = scale)
      a = reshape(a, [B, S, n_heads * head_dim]) @ wo
      x = x + rmsnorm(a, post_attn_norm, eps, offset = 1.0)

      m = rmsnorm(x, pre_ffw_norm, eps, offset = 1.0)
      m = (gelu(m @ w_gate, approximate = "tanh") * (m @ w_up)) @ w_down
      return x + rmsnorm(m, post_ffw_norm, eps, offset = 1.0)
    }
  }

  # Odd layers: global attention. Same parameters and body as Local, without
  # the window.
  layer Global x n_layers / 2 {
    param pre_attn_norm: [dim] = zeros
    param wq: [dim, n_heads * head_dim] = normal(0.02)
    param wk: [dim, n_kv * head_dim] = normal(0.02)
    param wv: [dim, n_kv * head_dim] = normal(0.02)
    param wo: [n_heads * head_dim, dim] = scaled_normal(0.02)
    param post_attn_norm: [dim] = zeros
    param pre_ffw_norm: [dim] = zeros
    param w_gate: [dim, ffn] = normal(0.02)
    param w_up: [dim, ffn] = normal(0.02)
    param w_down: [ffn, dim] = scaled_normal(0.02)
    param post_ffw_norm: [dim] = zeros

    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = rmsnorm(x, pre_attn_norm, eps, offset = 1.0)
      q = rope(reshape(h @ wq, [B, S, n_heads, head_dim]), theta)
      k = rope(reshape(h @ wk, [B, S, n_kv, head_dim]), theta)
      v = reshape(h @ wv, [B, S, n_kv, head_dim])
      a = attention(q, k, v, causal = true, softcap = attn_softcap, scale = scale)
      a = reshape(a, [B, S, n_heads * head_dim]) @ wo
      x = x + rmsnorm(a, post_attn_norm, eps, offset = 1.0)

      m = rmsnorm(x, pre_ffw_norm, eps, offset = 1.0)
      m = (gelu(m @ w_gate, approximate = "tanh") * (m @ w_up)) @ w_down
      return x + rmsnorm(m, post_ffw_norm, eps, offset = 1.0)
    }
  }

  param final_norm: [dim] = zeros

  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, tok_emb) * emb_scale
    repeat n_layers / 2 {
      x = Local[1](x)
      x = Global[1](x)
    }
    x = rmsnorm(x, final_norm, eps, offset = 1.0)
    logits = softcap(x @ transpose(tok_emb), final_softcap)   # tied
    return cross_entropy(logits, targets, ignore_index = -1)
  }
}
