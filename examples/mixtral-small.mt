# mixtral-small.mt — a small Mixtral-style sparse mixture-of-experts decoder.
#
# Faithful to Mixtral 8x7B:
#   * the attention half of each block is Llama's/Mistral's: RMSNorm (eps
#     1e-5), RoPE (theta 1,000,000), grouped-query attention (Mixtral: 32
#     query heads, 8 kv heads; here 8 and 2), no biases;
#   * the feed-forward half is a sparse MoE: 8 SwiGLU experts
#     w2(silu(t w1) * (t w3)), a bias-free router [dim, n_experts] whose
#     logits go through a softmax over all experts, the top 2 experts per
#     token, their weights renormalised to sum to one (normalize = true),
#     and the Switch-style load-balancing loss with coefficient 0.02 (the
#     router_aux_loss_coef of the reference configuration);
#   * a final RMSNorm and an untied LM head `lm_head: [dim, vocab]`.
# Small: byte-level vocabulary (256), dim 256, 4 layers, head_dim 32, expert
# hidden size 512.
#
# Parameter count (source of truth for test/examples/mixtral-small-summary.test):
#   per expert = 3*dim*ffn = 3*131,072 = 393,216
#   per layer  = 2*dim                                  (attn_norm, moe_norm)
#              + dim*n_heads*hd + 2*dim*n_kv*hd         (wq, wk, wv)
#              + n_heads*hd*dim                         (wo)
#              + dim*n_experts                          (router)
#              + n_experts * 3*dim*ffn                  (experts)
#              = 512 + 65,536 + 2*16,384 + 65,536 + 2,048 + 8*393,216
#              = 3,312,128
#   model      = vocab*dim + dim + dim*vocab            (tok_emb, final_norm, lm_head)
#              = 65,536 + 256 + 65,536 = 131,328
#   total      = 131,328 + 4 * 3,312,128 = 13,379,840
#   (active per token, 2 of the 8 experts: 131,328 + 4 * 952,832 = 3,942,656)

model MixtralSmall {
  config {
    vocab = 256
    dim = 256
    n_layers = 4
    n_heads = 8
    n_kv = 2
    head_dim = dim / n_heads
    ffn = 512
    n_experts = 8
    experts_per_token = 2
    aux_coef = 0.02
    theta = 1000000.0
    eps = 1e-5
  }

  param tok_emb: [vocab, dim] = normal(0.02)

  layer Block x n_layers {
    param attn_norm: [dim] = ones
    param wq: [dim, n_heads * head_dim] = normal(0.02)
    param wk: [dim, n_kv * head_dim] = normal(0.02)
    param wv: [dim, n_kv * head_dim] = normal(0.02)
    param wo: [n_heads * head_dim, dim] = scaled_normal(0.02)
    param moe_norm: [dim] = ones
    param router: [dim, n_experts] = normal(0.02)

    expert FFN x n_experts {
      param w1: [dim, ffn] = normal(0.02)
      param w3: [dim, ffn] = normal(0.02)
      param w2: [ffn, dim] = scaled_normal(0.02)

      forward(t: [T, dim]) -> [T, dim] {
        return (silu(t @ w1) * (t @ w3)) @ w2
      }
    }

    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = rmsnorm(x, attn_norm, eps)
      q = rope(reshape(h @ wq, [B, S, n_heads, head_dim]), theta)
      k = rope(reshape(h @ wk, [B, S, n_kv, head_dim]), theta)
      v = reshape(h @ wv, [B, S, n_kv, head_dim])
      a = attention(q, k, v, causal = true)
      x = x + reshape(a, [B, S, n_heads * head_dim]) @ wo

      m = rmsnorm(x, moe_norm, eps)
      return x + moe(m, router, FFN, top_k = experts_per_token, normalize = true,
                     aux_loss = aux_coef)
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
