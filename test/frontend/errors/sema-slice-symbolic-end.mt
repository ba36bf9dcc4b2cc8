// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// `slice(x, axis, 0, S)` takes the first S rows of a static axis (a learned
// position table); any other use of a symbolic end is an error.
// CHECK: {{.*}}sema-slice-symbolic-end.mt:18:9: error: shape mismatch in 'slice': a slice that ends at S must start at 0, got start 1
// CHECK: {{.*}}sema-slice-symbolic-end.mt:19:26: error: argument 'end' of 'slice' may be S (the sequence length) in a model or layer forward, not B
// CHECK: {{.*}}sema-slice-symbolic-end.mt:20:9: error: shape mismatch in 'slice': cannot slice the symbolic dimension S of [B, S, 8]
model M {
  config { dim = 8; n_ctx = 32 }
  param emb: [16, dim] = normal(0.02)
  param pos: [n_ctx, dim] = normal(0.02)
  layer Block x 1 {
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] { return x @ w }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    p = slice(pos, 0, 0, S)
    a = slice(pos, 0, 1, S)
    b = slice(pos, 0, 0, B)
    c = slice(x, 1, 0, S)
    x = Block(x + p)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
