// RUN: not mtc compile %s --emit=mlir 2>&1 | FileCheck %s
// repeat applies only 3 of the 4 instances of each layer.
// CHECK: {{.*}}sema-instances-not-applied.mt:8:9: error: layer 'Local' has 4 instances but 3 are applied
// CHECK: {{.*}}sema-instances-not-applied.mt:14:9: error: layer 'Global' has 4 instances but 3 are applied
model M {
  config { dim = 8; eps = 1e-5; n_layers = 8 }
  param emb: [16, dim] = normal(0.02)
  layer Local x n_layers / 2 {
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x + x @ w
    }
  }
  layer Global x n_layers / 2 {
    param w: [dim, dim] = normal(0.02)
    forward(x: [B, S, dim]) -> [B, S, dim] {
      return x + x @ w
    }
  }
  forward(tokens: [B, S] i32, targets: [B, S] i32) -> [] {
    x = embedding(tokens, emb)
    repeat 3 {
      x = Local[1](x)
      x = Global[1](x)
    }
    return cross_entropy(x @ transpose(emb), targets)
  }
}
