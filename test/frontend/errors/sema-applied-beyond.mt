// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// Block[k] applications that run past the layer's instance count.
// CHECK: {{.*}}sema-applied-beyond.mt:17:11: error: layer 'Block' applied beyond its 2 instances
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  layer Block x 2 {
    param norm: [dim] = ones
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x + rmsnorm(x, norm, eps) @ w
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    repeat 3 {
      x = Block[1](x)
    }
    return cross_entropy(x @ transpose(emb), targets)
  }
}
