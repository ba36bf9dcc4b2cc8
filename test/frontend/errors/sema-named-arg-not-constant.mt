// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// Named arguments are compile-time constants, not tensors.
// CHECK: {{.*}}sema-named-arg-not-constant.mt:11:41: error: 'x' is not a compile-time constant
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param norm: [dim] = ones
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x + rmsnorm(x, norm, eps = x) @ w
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
