# qwen2-moe-small.mt — a small Qwen2-MoE-style decoder (Qwen1.5-MoE-A2.7B /
# Qwen2-57B-A14B family): fine-grained routed experts plus a gated shared
# expert.
#
# Faithful to Qwen2-MoE:
#   * the attention half is Qwen2's: RMSNorm (eps 1e-6), q/k/v projections
#     with a bias, o-projection without, RoPE theta 1,000,000 (Qwen1.5-MoE
#     uses full multi-head attention: n_kv = n_heads);
#   * many small routed SwiGLU experts (Qwen1.5-MoE: 60 experts of hidden
#     size 1408, 4 per token; here 16 of 128, 4 per token), softmax router
#     without renormalising the top-k weights (norm_topk_prob = false ->
#     normalize = false), load-balancing loss coefficient 0.001;
#   * a shared SwiGLU expert that every token goes through (hidden size
#     4 x the routed one: 5632 = 4 * 1408), scaled per token by
#     sigmoid(h @ shared_gate) with a bias-free [dim, 1] gate. The language
#     has no built-in for it: it is written with ordinary operations, the
#     [B, S, 1] gate broadcasting over [B, S, dim];
#   * a final RMSNorm and an untied LM head.
# Small: byte-level vocabulary (256), dim 256, 4 layers, 8 heads of 32.
#
# Parameter count (source of truth for test/examples/qwen2-moe-small-summary.test):
#   per expert = 3*dim*moe_ffn = 3*32,768 = 98,304
#   per layer  = 2*dim                                  (attn_norm, moe_norm)
#              + 3*(dim*dim + dim) + dim*dim            (wq,bq, wk,bk, wv,bv, wo)
#              + dim*n_experts                          (router)
#              + 3*dim*shared_ffn + dim                 (shared expert, shared_gate)
#              + n_experts * 3*dim*moe_ffn              (routed experts)
#              = 512 + 262,912 + 4,096 + 393,472 + 16*98,304 = 2,233,856
#   model      = vocab*dim + dim + dim*vocab            (tok_emb, final_norm, lm_head)
#              = 65,536 + 256 + 65,536 = 131,328
#   total      = 131,328 + 4 * 2,233,856 = 9,066,752

model Qwen2MoeSmall {
  config {
    vocab = 256
    dim = 256
    n_layers = 4
    n_heads = 8
    n_kv = 8
    head_dim = dim / n_heads
    n_experts = 16
    experts_per_token = 4
    moe_ffn = 128
    shared_ffn = 4 * moe_ffn
    aux_coef = 0.001
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

    param moe_norm: [dim] = ones
    param router: [dim, n_experts] = normal(0.02)
    param shared_gate_proj: [dim, shared_ffn] = normal(0.02)
    param shared_up_proj: [dim, shared_ffn] = normal(0.02)
    param shared_down_proj: [shared_ffn, dim] = scaled_normal(0.02)
    param shared_gate: [dim, 1] = normal(0.02)

    expert FFN x n_experts {
      param w_gate: [dim, moe_ffn] = normal(0.02)
      param w_up: [dim, moe_ffn] = normal(0.02)
      param w_down: [moe_ffn, dim] = scaled_normal(0.02)

      forward(t: [T, dim]) -> [T, dim] {
        return (silu(t @ w_gate) * (t @ w_up)) @ w_down
      }
    }

    forward(x: [B, S, dim]) -> [B, S, dim] {
      h = rmsnorm(x, attn_norm, eps)
      q = rope(reshape(matmul(h, wq, bq), [B, S, n_heads, head_dim]), theta)
      k = rope(reshape(matmul(h, wk, bk), [B, S, n_kv, head_dim]), theta)
      v = reshape(matmul(h, wv, bv), [B, S, n_kv, head_dim])
      a = attention(q, k, v, causal = true)
      x = x + reshape(a, [B, S, n_heads * head_dim]) @ wo

      m = rmsnorm(x, moe_norm, eps)
      routed = moe(m, router, FFN, top_k = experts_per_token,
                   normalize = false, aux_loss = aux_coef)
      shared = (silu(m @ shared_gate_proj) * (m @ shared_up_proj)) @ shared_down_proj
      gate = sigmoid(m @ shared_gate)                  # [B, S, 1]
      return x + routed + gate * shared
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
