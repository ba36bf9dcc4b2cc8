// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// A layer body may not use a model-level parameter.
// CHECK: {{.*}}sema-model-param-in-layer.mt:12:18: error: model parameter 'scale' cannot be used in layer 'Block'; layers and experts use only their own parameters
model M {
  config { dim = 8; eps = 1e-5 }
  param emb: [16, dim] = normal(0.02)
  param scale: [dim] = ones
  layer Block x 2 {
    param norm: [dim] = ones
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x * scale + rmsnorm(x, norm, eps) @ w
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    x = Block(x)
    return cross_entropy(x @ transpose(emb), targets)
  }
}
