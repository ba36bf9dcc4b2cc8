// RUN: not mtc compile %s --emit=ast 2>&1 | FileCheck %s
// A layer whose closing '}' is missing: the model's forward follows.
// CHECK: {{.*}}syntax-missing-brace.mt:11:3: error: unexpected 'forward'; expected '}' to close layer 'Block'
// CHECK-NEXT: {{^}}  forward(t: [B, S] i32) -> [] {
// CHECK-NEXT: {{^}}  ^
// CHECK-NEXT: {{.*}}syntax-missing-brace.mt:9:19: note: to match this '{'
// CHECK: 1 error generated.
model M {
  layer Block x 2 {
    forward(x: [B, S, 4]) -> [B, S, 4] { return x }
  forward(t: [B, S] i32) -> [] {
    return t
  }
}
