// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-duplicate-forward.mt:8:5: error: duplicate forward in layer 'Block'; expected '}' to close it
// CHECK: {{.*}}syntax-duplicate-forward.mt:6:19: note: to match this '{'
// CHECK: 1 error generated.
model M {
  layer Block x 2 {
    forward(x: [B, S, 4]) -> [B, S, 4] { return x }
    forward(x: [B, S, 4]) -> [B, S, 4] { return x * 2 }
  }
  forward(x: [B, S, 4]) -> [B, S, 4] { return Block(x) }
}
