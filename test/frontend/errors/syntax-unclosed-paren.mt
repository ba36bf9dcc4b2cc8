// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// CHECK: {{.*}}syntax-unclosed-paren.mt:6:29: error: unexpected '}'; expected ')'
// CHECK: 1 error generated.
model M {
  forward(x: [B, S, 4]) -> [B, S, 4] {
    return silu(x * (x + 1) }
}
