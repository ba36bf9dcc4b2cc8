// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// Layers are applied only in the model forward.
// CHECK: {{.*}}sema-layer-in-layer.mt:16:14: error: layer 'Block' cannot be applied inside layer 'Outer'; layers are applied in the model forward
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
  layer Outer x 1 {
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return Block(x)
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    x = Outer(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
