//===- TestModels.h - Model sources shared by the unit tests ----*- C++ -*-===//
//
// Part of mtc.
//
//===----------------------------------------------------------------------===//
#ifndef MTC_TEST_UNIT_FRONTEND_TESTMODELS_H
#define MTC_TEST_UNIT_FRONTEND_TESTMODELS_H

namespace mtc::test {

/// The example of docs/language.md.
inline const char *const kTinyLlama = R"mt(model TinyLlama {
  config {
    vocab = 256; dim = 256; n_layers = 4; n_heads = 8; n_kv = 4;
    head_dim = dim / n_heads; ffn = 688; theta = 10000.0; eps = 1e-5
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
      h = rmsnorm(x, attn_norm, eps)
      q = rope(reshape(h @ wq, [B, S, n_heads, head_dim]), theta)
      k = rope(reshape(h @ wk, [B, S, n_kv, head_dim]), theta)
      v = reshape(h @ wv, [B, S, n_kv, head_dim])
      x = x + reshape(attention(q, k, v, causal = true), [B, S, dim]) @ wo
      m = rmsnorm(x, mlp_norm, eps)
      return x + (silu(m @ w_gate) * (m @ w_up)) @ w_down
    }
  }

  param final_norm: [dim] = ones

  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, tok_emb)
    x = Block(x)
    x = rmsnorm(x, final_norm, eps)
    logits = x @ transpose(tok_emb)          # tied: the embedding is used twice
    return cross_entropy(logits, targets, ignore_index = -1)
  }
}
)mt";

} // namespace mtc::test

#endif // MTC_TEST_UNIT_FRONTEND_TESTMODELS_H
