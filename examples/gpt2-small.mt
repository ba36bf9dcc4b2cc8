# gpt2-small.mt — a small GPT-2 (the GPT-2 / nanoGPT / llm.c family).
#
# Faithful to GPT-2:
#   * learned absolute position embeddings: a table of n_ctx = 1024 rows of
#     which a sequence of S tokens uses the first S (`slice(pos_emb, 0, 0, S)`),
#     so the model trains at any --seq up to 1024;
#   * pre-norm blocks with LayerNorm (weight and bias, eps 1e-5);
#   * one fused q/k/v projection with bias, split into q, k and v; causal
#     multi-head attention scaled by 1/sqrt(head_dim); output projection
#     with bias;
#   * MLP 4·dim with the tanh GELU (GPT-2's `gelu_new`), biases on both
#     projections;
#   * a final LayerNorm and the LM head tied to the token embedding.
#   * init: normal(0.02) everywhere, residual projections (wo, w_down)
#     scaled by 1/sqrt(2·n_layers).
# Small: byte-level vocabulary (256), dim 128, 4 layers, 4 heads of 32.
# Parameter names are those `mtc import-hf` gives a HuggingFace gpt2 config
# (docs/hf.md), so weights move between the two.
#
# Parameter count (source of truth for test/examples/gpt2-small-summary.test):
#   per layer = 4*dim                                   (attn_norm(_b), mlp_norm(_b))
#             + dim*3*dim + 3*dim                       (w_qkv, b_qkv)
#             + dim*dim + dim                           (wo, bo)
#             + dim*ffn + ffn + ffn*dim + dim           (w_up, b_up, w_down, b_down)
#             = 512 + 49,536 + 16,512 + 131,712 = 198,272
#   model     = vocab*dim + n_ctx*dim + 2*dim           (tok_emb, pos_emb, final_norm(_b))
#             = 32,768 + 131,072 + 256 = 164,096
#   total     = 164,096 + 4 * 198,272 = 957,184

model GPT2Small {
  config {
    vocab = 256
    n_ctx = 1024
    dim = 128
    n_layers = 4
    n_heads = 4
    head_dim = dim / n_heads
    ffn = 4 * dim
    eps = 1e-5
  }

  param tok_emb: [vocab, dim] = normal(0.02)
  param pos_emb: [n_ctx, dim] = normal(0.02)

  layer Block x n_layers {
    param attn_norm: [dim] = ones
    param attn_norm_b: [dim] = zeros
    param w_qkv: [dim, 3 * dim] = normal(0.02)
    param b_qkv: [3 * dim] = zeros
    param wo: [dim, dim] = scaled_normal(0.02)
    param bo: [dim] = zeros
    param mlp_norm: [dim] = ones
    param mlp_norm_b: [dim] = zeros
    param w_up: [dim, ffn] = normal(0.02)
    param b_up: [ffn] = zeros
    param w_down: [ffn, dim] = scaled_normal(0.02)
    param b_down: [dim] = zeros

    forward(x: [B, S, dim]) -> [B, S, dim] {
      # Attention: x + c_proj(attn(split(c_attn(ln_1(x)))))
      h = layernorm(x, attn_norm, attn_norm_b, eps)
      q, k, v = split(matmul(h, w_qkv, b_qkv), [dim, dim, dim], axis = -1)
      q = reshape(q, [B, S, n_heads, head_dim])
      k = reshape(k, [B, S, n_heads, head_dim])
      v = reshape(v, [B, S, n_heads, head_dim])
      a = attention(q, k, v, causal = true)
      x = x + matmul(reshape(a, [B, S, dim]), wo, bo)

      # MLP: x + c_proj(gelu_new(c_fc(ln_2(x))))
      m = layernorm(x, mlp_norm, mlp_norm_b, eps)
      u = gelu(matmul(m, w_up, b_up), approximate = "tanh")
      return x + matmul(u, w_down, b_down)
    }
  }

  param final_norm: [dim] = ones
  param final_norm_b: [dim] = zeros

  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    # Token embedding plus the position table's first S rows ([S, dim],
    # broadcast over the batch); only those rows receive a gradient.
    x = embedding(tokens, tok_emb) + slice(pos_emb, 0, 0, S)
    x = Block(x)
    x = layernorm(x, final_norm, final_norm_b, eps)
    logits = x @ transpose(tok_emb)          # tied LM head
    return cross_entropy(logits, targets, ignore_index = -1)
  }
}
