// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-unterminated-string.mt:6:36: error: unterminated string
model M {
  layer Block x 1 {
    forward(x: [B, S, 4]) -> [B, S, 4] {
      return gelu(x, approximate = "tanh)
    }
  }
  forward(x: [B, S, 4]) -> [B, S, 4] { return Block(x) }
}
